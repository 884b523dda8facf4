"""`python -m transfer.validate proxy=custom proxy.builder._target_=my_pkg.models.build`: is my
model μP? A thin Hydra CLI over `transfer.cli.validate_job` (`validate(cfg)`), and
`validate_model(build)` for Python.

The job's imports (torch, Optuna, the trainer) load on first use, so `--help` and a misspelt
option are answered without them (`benchmarks/startup.py` measures it).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from transfer.cli.clihelp import answer_without_hydra, starting_line

if TYPE_CHECKING:  # for readers and type checkers; at run time `__getattr__` loads them
    from transfer.cli.validate_job import compose_config, run, validate, validate_model

__all__ = ["compose_config", "main", "run", "validate", "validate_model"]

SUMMARY = ("Is my model μP? Audit a builder's shapes, then check that its lr optimum stays put\n"
           "from proxy.width to proxy.validation_width: python -m transfer.validate proxy=custom "
           "proxy.builder._target_=my_pkg.models.build")
EXITS = ("exit codes: 0 passed, 3 rejected, 4 cannot tell (inconclusive), 2 bad input (one line, "
         "or one per audit finding)")
_JOB = {"compose_config", "run", "validate", "validate_model"}


def __getattr__(name: str):
    """`from transfer.cli.validate import validate_model` (and the rest of the job): loaded here."""
    if name in _JOB:
        from transfer.cli import validate_job

        return getattr(validate_job, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """`--help` and a misspelt group option are answered from conf/ (Hydra's help composes
    every group, and this module would first import the job: `benchmarks/startup.py` times
    both); anything else is Hydra's."""
    answer_without_hydra("transfer.cli.validate", SUMMARY, EXITS, sys.argv[1:])
    print(starting_line("transfer.validate", sys.argv[1:]), flush=True)
    from transfer.cli.validate_job import run
    from transfer.core.compose import hydra_main

    hydra_main(run)


if __name__ == "__main__":
    main()
