"""The one place below `transfer.cli` that touches Hydra and OmegaConf.

- `compose`: `conf/` ships inside the package (`transfer/conf`, found as the module
  `transfer.conf`, so a wheel works from any directory); the CLIs, `validate_model`, the tests
  and the benchmarks all compose through here. `hydra_main` is the CLIs' `@hydra.main`.
- `as_config`: a composed `DictConfig` → the plain `Config` dataclasses that everything past the
  CLI reads (`transfer.run.planner` takes either and keeps the dataclasses).
- `instantiate`, `locate_callable`, `locate_object`: Hydra's `_target_` instantiation and
  dotted-path lookup, for the proxy family and a user's builder.

Standard library only at import: `--help` reads `CONF_DIR` without paying for Hydra.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

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

    register_configs()
    if GlobalHydra.instance().is_initialized():
        return hydra_compose(CONFIG_NAME, overrides=list(overrides))
    with initialize_config_module(CONF_MODULE, version_base=VERSION_BASE):
        return hydra_compose(CONFIG_NAME, overrides=list(overrides))


def hydra_main(task):
    """`@hydra.main` over the packaged conf/, calling `task(cfg)` and exiting with its code.

    In a multirun (`-m`) each job returns its code instead: exiting would end the whole sweep
    after its first job under Hydra's basic launcher, and leave a submitit job without its
    result file (`transfer.cli.launcher` collects the codes and exits with the run's)."""
    import sys

    import hydra

    register_configs()
    if (line := override_error(sys.argv[1:])) is not None:
        print(f"error: {line}", file=sys.stderr)
        sys.exit(2)  # transfer.core.errors.EXIT_USER_ERROR

    @hydra.main(config_path=f"pkg://{CONF_MODULE}", config_name=CONFIG_NAME,
                version_base=VERSION_BASE)
    def _main(cfg) -> int | None:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        code = task(cfg)
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            return code
        sys.exit(code)

    _main()


def override_error(argv: Sequence[str]) -> str | None:
    """One line for a command line whose overrides do not compose: a value of the wrong type
    (`model.d_model=64.5`), a key the schema lacks (`model.widht=64`). Hydra's own report is
    several lines and exit 1; composing first (`compose_checked`, the same config) finds it.
    None when it composes, and for what Hydra answers itself: flags (`-m`, `--cfg`, ...) and its
    own `hydra.*` / `hydra/...` overrides."""
    from transfer.core.errors import UserError

    if any(a.startswith("-") for a in argv):
        return None
    try:
        compose_checked([a for a in argv if not a.lstrip("+~").startswith("hydra")])
    except UserError as e:
        return str(e)
    except Exception:  # noqa: BLE001 - anything else is Hydra's (or the job's) to report
        return None
    return None


def compose_checked(overrides: Sequence[str] = ()):
    """`compose`, with an override that does not merge (a value of the wrong type, a key the
    schema lacks) as a UserError of one line instead of Hydra's several."""
    from hydra.errors import ConfigCompositionException

    from transfer.core.errors import UserError

    try:
        return compose(overrides)
    except ConfigCompositionException as e:
        cause = e.__cause__ or e.__context__
        why = str(cause).strip().splitlines()[0] if cause is not None and str(cause).strip() \
            else ""
        first = str(e).strip().splitlines()[0].rstrip(".")
        raise UserError(f"{first}{': ' + why if why else ''}; fix it on the command line") \
            from None


def register_configs() -> None:
    """The schema (`transfer.core.config.Config`) in Hydra's ConfigStore, as `conf/config.yaml`'s
    defaults name it."""
    from hydra.core.config_store import ConfigStore

    from transfer.core.config import Config

    ConfigStore.instance().store(name="schema", node=Config)


def as_config(cfg):
    """`cfg` as plain `Config` dataclasses, no OmegaConf left: a `Config` as it is; a composed
    `DictConfig`, or a plain container (a spawned worker's), typed against the schema. A value
    left `???` is a user error naming the key."""
    from omegaconf import MissingMandatoryValue, OmegaConf

    from transfer.core.config import Config
    from transfer.core.errors import UserError

    if isinstance(cfg, Config):
        return cfg
    try:
        merged = OmegaConf.merge(OmegaConf.structured(Config), cfg)
        _fill_from_hf(merged)
        return OmegaConf.to_object(merged)
    except MissingMandatoryValue as e:
        raise UserError(f"{e.full_key} is not set (???); pass {e.full_key}=<value>") from None


def _fill_from_hf(merged) -> None:
    """`model=hf model.config=PATH`: the model fields from the config.json, where the command
    line left them unset (`???` or the schema's default); a no-op for every other model."""
    from omegaconf import OmegaConf

    from transfer.core.config import ModelConf
    from transfer.core.hf_config import resolve_hf

    model, schema = merged.model, ModelConf()
    if OmegaConf.is_missing(model, "config") or model.config is None:
        return

    def unset(key: str) -> bool:
        if OmegaConf.is_missing(model, key):
            return True
        value = model[key]
        value = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
        return value == getattr(schema, key)

    filled = resolve_hf(str(model.config), not OmegaConf.is_missing(model, "train_tokens"),
                        unset)
    for key, value in filled.items():
        model[key] = value


@contextlib.contextmanager
def _quiet_hydra() -> Iterator[None]:
    """hydra.utils logs every lookup failure before raising; callers report it once themselves."""
    log = logging.getLogger("hydra.utils")
    was, log.disabled = log.disabled, True
    try:
        yield
    finally:
        log.disabled = was


def instantiate(node: Mapping[str, Any], **kwargs: Any) -> Any:
    """`hydra.utils.instantiate(node, **kwargs)`: the object `node["_target_"]` names."""
    from hydra.utils import instantiate as hydra_instantiate

    return hydra_instantiate(dict(node), **kwargs)


def locate_callable(path: str) -> Any:
    """`hydra.utils.get_method(path)`: the callable at a dotted path (raises as Hydra does,
    without Hydra's log line)."""
    from hydra.utils import get_method

    with _quiet_hydra():
        return get_method(path)


def locate_object(path: str) -> Any:
    """`hydra.utils.get_object(path)`: whatever the dotted path names."""
    from hydra.utils import get_object

    with _quiet_hydra():
        return get_object(path)
