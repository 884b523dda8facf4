"""`python -m transfer.sweep model=3b budget=smoke ...`: the main job (a thin Hydra CLI)."""

from __future__ import annotations

import sys

from transfer.clihelp import CONF_DIR, bad_group_option, help_text, wants_help
from transfer.errors import EXIT_USER_ERROR, exit_code

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
    if wants_help(sys.argv[1:]):  # answered from conf/ without importing Hydra (issue 14)
        print(help_text("transfer.sweep", SUMMARY, EXITS))
        sys.exit(0)
    if (bad := bad_group_option(sys.argv[1:])) is not None:
        print(bad, file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)
    import hydra  # a real run: Hydra composes the config

    from transfer.config import register_configs  # imports Hydra's ConfigStore: not for --help

    register_configs()

    @hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
    def _main(cfg) -> None:
        sys.exit(sweep(cfg))

    _main()


if __name__ == "__main__":
    main()
