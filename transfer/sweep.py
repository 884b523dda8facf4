"""`python -m transfer.sweep model=3b budget=smoke ...`: the main job (a thin Hydra CLI)."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from transfer.config import register_configs
from transfer.errors import exit_code

CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")


def sweep(cfg: DictConfig) -> int:
    """Run the sweep; a user error becomes exit code 2 and one line on stderr."""
    from transfer.run import run_sweep

    return exit_code(run_sweep, cfg)


register_configs()


@hydra.main(config_path=CONF_DIR, config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    sys.exit(sweep(cfg))


if __name__ == "__main__":
    main()
