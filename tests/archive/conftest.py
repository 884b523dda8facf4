"""Fixtures shared by the archive tests: a throwaway archive with finished runs in it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from transfer.archive import Archive

TRIALS_CSV = "number,stage,state,value,lr\n0,lr,COMPLETE,3.2,0.01\n1,lr,COMPLETE,3.1,0.02\n"


@pytest.fixture
def archive(tmp_path: Path) -> Archive:
    return Archive(tmp_path / "sweeps")


@pytest.fixture
def add_run(archive: Archive) -> Callable[..., str]:
    """Archive one finished run with every data file; keyword arguments override its contents."""

    def add(name: str, *, fingerprint: str = "0123456789abcdef", lr: float = 0.02,
            created: str | None = None, validated: bool = True) -> str:
        archive.create_run(name, fingerprint=fingerprint, model="3b", parametrization="mup",
                           proxy_widths=[64, 256], **({"created": created} if created else {}))
        archive.write_yaml(name, "config.yaml", {"model": {"name": "3b"},
                                                  "train": {"lr": 0.01, "tokens": 1000},
                                                  "proxy": {"width": 64}})
        archive.write_json(name, "validation.json", {"validated": validated, "drift_log2": 0.1,
                                                     "grid": [1.0, 2.0]})
        archive.write_json(name, "cost.json", {"saved_gpu_hours": 1200.0})
        archive.write_yaml(name, "target.yaml", {"lr": lr})
        archive.write_text(name, "trials.csv", TRIALS_CSV)
        archive.record({"name": name, "status": "finished", "winners": {"lr": lr},
                        "validated": validated, "drift_log2": 0.1, "saved_gpu_hours": 1200.0,
                        "code_version": "test"})
        return name

    return add
