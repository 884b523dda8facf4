"""`python -m transfer.sweep model=3b budget=smoke ...`: the main job (a thin Hydra CLI)."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from transfer.config import register_configs
from transfer.errors import EXIT_USER_ERROR, UserError

CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")


def sweep(cfg: DictConfig) -> int:
    """Run the sweep; a user error becomes exit code 2 and one line on stderr."""
    from transfer.run import run_sweep

    try:
        return run_sweep(cfg)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR


register_configs()


@hydra.main(config_path=CONF_DIR, config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    sys.exit(sweep(cfg))


if __name__ == "__main__":
    main()
