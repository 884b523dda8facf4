"""`python -m transfer.compare model=llama3.2-3b,qwen2.5-3b,gemma2-2b`: the families a team weighs,
in one command and one table (the CLI is `transfer.cli.compare`)."""

from transfer.cli.compare import main

if __name__ == "__main__":
    main()
