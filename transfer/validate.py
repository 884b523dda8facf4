"""`python -m transfer.validate` and `from transfer.validate import validate_model`: the
documented entry points of "is my model μP?" (the CLI is `transfer.cli.validate`)."""

from transfer.cli.validate import __all__, __getattr__, main  # noqa: F401

if __name__ == "__main__":
    main()
