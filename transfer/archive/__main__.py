from transfer.archive.cli import main

raise SystemExit(main())
