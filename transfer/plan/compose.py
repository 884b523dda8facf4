"""The one Hydra compose: `conf/` ships inside the package (`transfer/conf`, found as the module
`transfer.conf`, so a wheel works from any directory), and the CLIs, `validate_model`, the tests
and the benchmarks all compose through here.

Standard library only at import: `--help` reads `CONF_DIR` without paying for Hydra.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

CONF_MODULE = "transfer.conf"  # Hydra's `pkg://` search path / `initialize_config_module`
CONF_DIR = Path(__file__).resolve().parent.parent / "conf"  # the same files, for --help
CONFIG_NAME = "config"
VERSION_BASE = "1.3"


def compose(overrides: Sequence[str] = ()):
    """`conf/config.yaml` with `overrides`, composed as `python -m transfer.sweep` composes it
    (the schema registered first). Inside a running Hydra app, composes there."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from transfer.plan.config import register_configs

    register_configs()
    if GlobalHydra.instance().is_initialized():
        return hydra_compose(CONFIG_NAME, overrides=list(overrides))
    with initialize_config_module(CONF_MODULE, version_base=VERSION_BASE):
        return hydra_compose(CONFIG_NAME, overrides=list(overrides))


def hydra_main(task):
    """`@hydra.main` over the packaged conf/, calling `task(cfg)` and exiting with its code."""
    import sys

    import hydra

    from transfer.plan.config import register_configs

    register_configs()

    @hydra.main(config_path=f"pkg://{CONF_MODULE}", config_name=CONFIG_NAME,
                version_base=VERSION_BASE)
    def _main(cfg) -> None:
        sys.exit(task(cfg))

    _main()
