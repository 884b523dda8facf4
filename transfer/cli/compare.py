"""`python -m transfer.compare model=a,b,c [overrides]`: each family's sweep (an archived run
with the same fingerprint is reused, so adding a family trains only that family), then one
comparison (compare.md, compare.json, plots/) in its own archive folder.

`model=` takes a comma-separated list of presets (or team presets in ./conf/model); every other
override applies to every family. The sweep's own checks run for every family before any trains.
"""

from __future__ import annotations

import sys

from transfer.cli.clihelp import bad_group_option, help_text, missing_extra, wants_help
from transfer.core.errors import EXIT_USER_ERROR, exit_code

SUMMARY = ("Compare families before you commit: each family's sweep (archived runs reused),\n"
           "then one table with intervals: python -m transfer.compare "
           "model=llama3.2-3b,qwen2.5-3b,gemma2-2b")
EXITS = ("exit codes: 0 the comparison was written, 2 bad input (one line says what to fix); "
         "each family's own verdict is in the table")


def split_models(argv: list[str]) -> tuple[list[str], list[str]] | str:
    """(the families of `model=a,b,c`, the other overrides), or the one line saying what is
    wrong."""
    given = [a for a in argv if a.partition("=")[0] == "model"]
    if len(given) != 1:
        return ("name the families once, comma-separated: model=llama3.2-3b,qwen2.5-3b "
                f"(got {len(given)} model= arguments)")
    models = [m.strip() for m in given[0].partition("=")[2].split(",") if m.strip()]
    if len(models) < 2 or len(set(models)) != len(models):
        return (f"model={given[0].partition('=')[2]}: compare needs two or more different "
                "families, comma-separated")
    if any(m == "hf" for m in models):
        return ("model=hf reads one config.json: name it in conf/model/<name>.yaml (config: "
                "PATH and train_tokens: D, or its model.* fields) and compare model=<name>,...")
    return models, [a for a in argv if a.partition("=")[0] != "model"]


def main() -> None:
    argv = sys.argv[1:]
    if wants_help(argv):
        print(help_text("transfer.compare", SUMMARY, EXITS), flush=True)
        sys.exit(0)
    split = split_models(argv)
    bad = split if isinstance(split, str) else (
        bad_group_option([f"model={m}" for m in split[0]] + split[1]) or missing_extra(argv))
    if bad:
        print(bad, file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)
    models, rest = split
    print(f"transfer.compare: {', '.join(models)}; loading torch, Optuna and Hydra", flush=True)
    import optuna

    from transfer.cli.compare_job import run_compare

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sys.exit(exit_code(run_compare, models, rest))


if __name__ == "__main__":
    main()
