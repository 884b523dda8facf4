"""`python -m transfer.sweep model=3b budget=smoke ...`: the main job (a thin Hydra CLI)."""

from __future__ import annotations

import sys

from transfer.clihelp import CONF_DIR, answer_without_hydra
from transfer.errors import exit_code

SUMMARY = ("Tune a target's hyperparameters on μP proxies, validate the transfer, emit the "
           "full-scale config\n(sweeps/<run>/target.yaml, hf/config.json, cost.json, report.md).")
EXITS = ("exit codes: 0 validated, 3 rejected, 4 cannot tell (inconclusive), 2 bad input "
         "(one line says what to fix)")


def sweep(cfg) -> int:
    """Run the sweep; a user error becomes exit code 2 and one line on stderr."""
    import optuna  # the job's imports (torch, Optuna, Hydra): not paid by --help

    from transfer.run import run_sweep

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # our progress lines replace its logs
    return exit_code(run_sweep, cfg)


def main() -> None:
    answer_without_hydra("transfer.sweep", SUMMARY, EXITS, sys.argv[1:])  # --help, typos
    import hydra  # a real run: Hydra composes the config

    from transfer.config import register_configs  # imports Hydra's ConfigStore: not for --help

    register_configs()

    @hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
    def _main(cfg) -> None:
        sys.exit(sweep(cfg))

    _main()


if __name__ == "__main__":
    main()
