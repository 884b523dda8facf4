"""`python -m transfer.sweep model=3b budget=smoke ...`: the main job (a thin Hydra CLI)."""

from __future__ import annotations

import sys

from transfer.cli.clihelp import answer_without_hydra, starting_line
from transfer.core.errors import exit_code

SUMMARY = ("Tune a target's hyperparameters on μP proxies, validate the transfer, emit the "
           "full-scale config\n(sweeps/<run>/target.yaml, hf/config.json, cost.json, report.md).")
EXITS = ("exit codes: 0 validated, 3 rejected, 4 cannot tell (inconclusive), 2 bad input "
         "(one line says what to fix)")


def sweep(cfg) -> int:
    """Run the sweep; a user error becomes exit code 2 and one line on stderr."""
    import optuna  # the job's imports (torch, Optuna, Hydra): not paid by --help

    from transfer.cli.run import run_sweep

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # our progress lines replace its logs
    return exit_code(run_sweep, cfg)


def main() -> None:
    answer_without_hydra("transfer.cli.sweep", SUMMARY, EXITS, sys.argv[1:])  # --help, typos
    print(starting_line("transfer.sweep", sys.argv[1:]), flush=True)
    from transfer.core.compose import hydra_main  # a real run: Hydra composes the config

    hydra_main(sweep)


if __name__ == "__main__":
    main()
