"""`python -m transfer.sweep`: the main command's entry point (the CLI is `transfer.cli.sweep`)."""

from transfer.cli.sweep import main

if __name__ == "__main__":
    main()
