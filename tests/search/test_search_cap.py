"""transfer.search.cap.enforce_cap: a running sweep stops once what it spent crosses the cap."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from transfer.search import BudgetStop
from transfer.search.cap import enforce_cap


def _ctx(spent, **caps):
    cost = OmegaConf.create({"max_tuning_gpu_hours": None, "max_wall_seconds": None, **caps})
    return SimpleNamespace(cfg=SimpleNamespace(cost=cost), spent=spent)


def test_stops_over_the_wall_cap_naming_it():
    with pytest.raises(BudgetStop, match="max_wall_seconds=60") as e:
        enforce_cap(_ctx(lambda: (61.0, 0.0), max_wall_seconds=60))
    assert "re-run the same command" in str(e.value)


def test_stops_over_the_device_hours_cap():
    with pytest.raises(BudgetStop, match="max_tuning_gpu_hours=1"):
        enforce_cap(_ctx(lambda: (1.0, 1.5), max_tuning_gpu_hours=1.0))


def test_within_the_cap_goes_on():
    enforce_cap(_ctx(lambda: (60.0, 1.0), max_wall_seconds=60, max_tuning_gpu_hours=1.0))


def test_no_cap_does_not_read_the_spending():
    def spent():
        raise AssertionError("spent() reads every study; not needed without a cap")

    enforce_cap(_ctx(spent))
