"""The fingerprint moves with every field that changes proxy results, and with nothing else."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from omegaconf import OmegaConf

from transfer.archive import code_version, fingerprint, fingerprint_payload, library_versions
from transfer.core.compose import compose
from transfer.core.config import (
    CostConf,
    HardwareConf,
    ModelConf,
    ProxyConf,
    PrunerConf,
    StorageConf,
    TrainConf,
    ValidationConf,
)

DATA_HASH = "ab" * 32
VERSIONS = {"torch": "2.13.0", "mup": "1.0.0", "optuna": "5.0.0", "python": "3.11"}


@pytest.fixture(scope="module")
def cfg() -> dict:
    c = compose(["model=tiny", "budget=smoke", "stages=multipliers"])
    return OmegaConf.to_container(c, resolve=True)


def fp(cfg: dict, *, data_hash: str = DATA_HASH, versions: dict = VERSIONS) -> str:
    return fingerprint(cfg, data_hash=data_hash, versions=versions)


def changed(value: Any) -> Any:
    """A different value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2 + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return [*value, 512]
    if isinstance(value, dict):
        return {**value, "_target_": "proxies.OtherFamily"}
    return 7  # None: an explicit value instead of "derive it"


def with_change(cfg: dict, dotted: str, value: Any = None, *, use: bool = False) -> dict:
    out = copy.deepcopy(cfg)
    *parents, leaf = dotted.split(".")
    node = out
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = value if use else changed(node.get(leaf))
    return out


def fields_of(section: str, conf: type) -> list[str]:
    return [f"{section}.{f.name}" for f in dataclasses.fields(conf)]


SENSITIVE = (fields_of("proxy", ProxyConf) + fields_of("train", TrainConf)
             + fields_of("pruner", PrunerConf) + fields_of("validation", ValidationConf)
             + ["data.kind", "data.val_fraction", "data.vocab_size",
                "stages.stage.lr.trials", "stages.stage.lr.params.lr.high",
                "stages.stage.lr.params.lr.log", "stages.stage.batch_size.params.batch_size.choices",
                "stages.stage.multipliers.trials", "derived.kv_group"])
INSENSITIVE = (fields_of("model", ModelConf) + fields_of("hardware", HardwareConf)
               + fields_of("cost", CostConf) + fields_of("storage", StorageConf)
               + ["name", "archive_dir", "workers", "progress", "reuse", "device", "budget",
                  "data.root", "data.path", "data.val_path"])


def test_fingerprint_is_16_hex_chars(cfg: dict):
    f = fp(cfg)
    assert len(f) == 16 and int(f, 16) >= 0


@pytest.mark.parametrize("field", SENSITIVE)
def test_sensitive_to_each_field_that_determines_proxy_results(cfg: dict, field: str):
    assert fp(with_change(cfg, field)) != fp(cfg)


@pytest.mark.parametrize("field", INSENSITIVE)
def test_insensitive_to_target_hardware_cost_and_bookkeeping(cfg: dict, field: str):
    assert fp(with_change(cfg, field)) == fp(cfg)


def test_excluded_sections_never_reach_the_payload(cfg: dict):
    payload = fingerprint_payload(cfg, data_hash=DATA_HASH, versions=VERSIONS)
    text = json.dumps(payload)
    for key in ("model", "hardware", "cost", "storage", "archive_dir", "reuse"):
        assert key not in payload
    assert cfg["model"]["source"] not in text  # no target field hides inside another section


def test_sensitive_to_data_hash_and_each_library_version(cfg: dict):
    base = fp(cfg)
    assert fp(cfg, data_hash="cd" * 32) != base
    for lib, version in VERSIONS.items():
        assert fp(cfg, versions={**VERSIONS, lib: version + ".1"}) != base


def test_stage_order_and_parameter_order_matter(cfg: dict):
    order = cfg["stages"]["order"]
    assert fp(with_change(cfg, "stages.order", order[::-1], use=True)) != fp(cfg)
    assert fp(with_change(cfg, "stages.order", order[:-1], use=True)) != fp(cfg)
    params = cfg["stages"]["stage"]["multipliers"]["params"]
    swapped = dict(reversed(params.items()))
    assert fp(with_change(cfg, "stages.stage.multipliers.params", swapped, use=True)) != fp(cfg)


def test_stages_not_in_order_are_ignored(cfg: dict):
    extra = {"trials": 99, "params": {"lr": {"type": "float", "low": 0.1, "high": 1.0}}}
    assert fp(with_change(cfg, "stages.stage.unused", extra, use=True)) == fp(cfg)


def test_mapping_key_order_does_not_matter(cfg: dict):
    def reverse(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: reverse(obj[k]) for k in reversed(list(obj))}
        return obj

    shuffled = reverse(cfg)
    shuffled["stages"]["stage"] = reverse(cfg["stages"]["stage"])  # params keep their order
    for name, st in cfg["stages"]["stage"].items():
        shuffled["stages"]["stage"][name]["params"] = copy.deepcopy(st["params"])
    assert list(shuffled) != list(cfg)
    assert fp(shuffled) == fp(cfg)


def test_float_spellings_agree(cfg: dict):
    a = OmegaConf.to_container(OmegaConf.create("lr: 1e-2\nx: 0.30000000000000004"))
    b = OmegaConf.to_container(OmegaConf.create("lr: 0.01\nx: 0.3"))
    assert fp({**cfg, "train": {**cfg["train"], **a}}) == fp({**cfg, "train": {**cfg["train"], **b}})
    assert fp(with_change(cfg, "train.lr", 0.0101, use=True)) != fp(cfg)


def test_dictconfig_and_plain_dict_agree(cfg: dict):
    assert fp(OmegaConf.create(cfg)) == fp(cfg)


def test_stable_across_processes(cfg: dict):
    code = ("import json, sys; from transfer.archive import fingerprint; a = json.load(sys.stdin); "
            "print(fingerprint(a['cfg'], data_hash=a['h'], versions=a['v']))")
    arg = json.dumps({"cfg": cfg, "h": DATA_HASH, "v": VERSIONS})
    got = set()
    for seed in ("1", "2"):  # different str hashing, so dict/set iteration order can differ
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], input=arg, capture_output=True,
                             text=True, env=env, check=True, timeout=60)
        got.add(out.stdout.strip())
    assert got == {fp(cfg)}


def test_missing_inputs_are_rejected(cfg: dict):
    with pytest.raises(ValueError, match="data_hash"):
        fp(cfg, data_hash="")
    with pytest.raises(ValueError, match="mup"):
        fp(cfg, versions={k: v for k, v in VERSIONS.items() if k != "mup"})


def test_library_and_code_versions_are_strings():
    v = library_versions()
    assert set(v) == {"torch", "mup", "optuna", "python"}
    assert v["python"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert code_version()
