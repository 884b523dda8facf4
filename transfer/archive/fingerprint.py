"""The sweep fingerprint: a hash of everything that determines the proxy results, and nothing else.

Two configs with the same fingerprint train the same proxies on the same tokens with the same
search spaces, so their trials are interchangeable. The target model, hardware, price, storage
and run bookkeeping only change what is emitted afterwards, so they are left out: tuning once
serves every target whose derived proxy shape (`cfg["derived"]`) is the same.
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
import subprocess
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

# Sections that determine proxy results and are taken whole.
WHOLE_SECTIONS = ("proxy", "train", "pruner", "validation", "derived")
# Data fields that matter; paths are replaced by the content hash (the same tokens at another
# path are the same data). vocab_size sizes the proxy's embedding, so it matters too.
DATA_FIELDS = ("kind", "val_fraction", "vocab_size", "dtype")
# The target's recipe that the proxies train under (transfer.search.training.train_spec); the
# rest of `scaling` only changes what is emitted.
SCALING_FIELDS = ("schedule", "min_lr_fraction", "wsd_cooldown_fraction", "betas", "eps",
                  "grad_clip", "tau_recipe")
# Top-level keys deliberately left out: they affect emission, storage or bookkeeping only.
EXCLUDED = ("model", "hardware", "cost", "storage", "name", "archive_dir", "workers", "progress",
            "reuse", "device", "budget")
VERSIONED = ("torch", "mup", "optuna")
FINGERPRINT_CHARS = 16
FLOAT_DIGITS = 12  # 0.1 + 0.2 and 0.3 agree; real differences in hyperparameters are far larger


def _plain(obj: Any) -> Any:
    """Deep copy into JSON types; mappings keep their order (canonical JSON sorts keys later)."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)):
        return [_plain(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy / torch scalars
        return _plain(obj.item())
    return obj


def _stages(stages: Mapping | None) -> list:
    """The stages that run, in run order, with their parameters in suggestion order.

    A list of pairs rather than a mapping, so canonical key sorting cannot hide a reordering:
    the order of stages and of `suggest_*` calls changes what the sampler draws.
    """
    if not stages:
        return []
    defined = stages.get("stage") or {}
    out = []
    for name in stages.get("order") or []:
        st = _plain(defined.get(name)) or {}
        params = [[p, spec] for p, spec in (st.get("params") or {}).items()]
        rest = {k: v for k, v in st.items() if k != "params"}
        out.append([name, {**rest, "params": params}])
    return out


def fingerprint_payload(cfg: Mapping, *, data_hash: str, versions: Mapping) -> dict:
    """The fields of a resolved config that determine proxy results, as plain JSON data."""
    if not data_hash:
        raise ValueError(f"data_hash must be the corpus content hash, got {data_hash=}")
    missing = [k for k in (*VERSIONED, "python") if k not in versions]
    if missing:
        raise ValueError(f"versions lacks {missing}; pass library_versions()")
    payload: dict[str, Any] = {k: _plain(cfg.get(k)) for k in WHOLE_SECTIONS if k != "derived"}
    if cfg.get("derived") is not None:
        payload["derived"] = _plain(cfg["derived"])
    payload["stages"] = _stages(cfg.get("stages"))
    data = cfg.get("data") or {}
    payload["data"] = {k: _plain(data.get(k)) for k in DATA_FIELDS}
    payload["data_hash"] = str(data_hash)
    scaling = cfg.get("scaling") or {}
    payload["scaling"] = {k: _plain(scaling.get(k)) for k in SCALING_FIELDS}
    if cfg.get("code"):  # transfer.archive.code: the source that decides a trial's result
        payload["code"] = _plain(cfg["code"])
    payload["versions"] = {k: str(versions[k]) for k in (*VERSIONED, "python")}
    return payload


def _normalise(obj: Any) -> Any:
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        if math.isnan(obj) or math.isinf(obj):
            return repr(obj)  # JSON has no NaN/inf; a string keeps them distinct and stable
        x = float(f"{obj:.{FLOAT_DIGITS}g}")
        return 0.0 if x == 0 else x  # -0.0 and 0.0 agree
    if isinstance(obj, dict):
        return {k: _normalise(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_normalise(v) for v in obj]
    raise TypeError(f"cannot fingerprint a {type(obj).__name__}: {obj!r}; pass plain config data")


def canonical_json(payload: Any) -> str:
    """One spelling per value: sorted keys, no spaces, floats rounded to FLOAT_DIGITS."""
    return json.dumps(_normalise(_plain(payload)), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True, allow_nan=False)


def fingerprint(cfg: Mapping, *, data_hash: str, versions: Mapping) -> str:
    """First 16 hex chars of the sha256 of the canonical payload."""
    text = canonical_json(fingerprint_payload(cfg, data_hash=data_hash, versions=versions))
    return hashlib.sha256(text.encode()).hexdigest()[:FINGERPRINT_CHARS]


def library_versions() -> dict[str, str]:
    """Installed torch, mup and optuna versions and the Python minor version (no imports)."""
    out = {}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    out["python"] = ".".join(platform.python_version_tuple()[:2])
    return out


def code_version() -> str:
    """`git describe` of the checkout holding this package, else the installed version."""
    here = Path(__file__).resolve().parent
    try:
        res = subprocess.run(["git", "describe", "--always", "--dirty", "--tags"], cwd=here,
                             capture_output=True, text=True, timeout=10, check=False)
        if res.returncode == 0 and res.stdout.strip():
            return f"git:{res.stdout.strip()}"
    except (OSError, subprocess.SubprocessError):
        pass  # no git, or not a checkout: fall back to the package version
    try:
        return f"transfer {metadata.version('transfer')}"
    except metadata.PackageNotFoundError:
        return "unknown"
