"""The ETA's calibration (transfer.run.history): each phase's measured ÷ probe-predicted seconds,
read from the archive's runs of the same budget and parametrization and mixed with the budget's
prior; written into real archive folders through the archive's own API."""

import math

import pytest
from helpers_sweep import compose_cfg

from transfer.archive.store import Archive
from transfer.run.history import HISTORY, Calibration, calibration, combine, run_ratios

PRED = {"stages": 50.0, "validation": 400.0, "depth": 300.0, "coord": 10.0, "finalize": 4.0}


def _cost(measured: dict[str, float], pred: dict[str, float] = PRED) -> dict:
    after = {k: 2 * v for k, v in pred.items() if k != "stages"}  # a smaller batch won
    return {"prediction": {"phases": pred, "seconds": sum(pred.values()),
                           "after_stages": {"phases": after}},
            "phases": measured, "measured_seconds": sum(measured.values())}


def _add(archive: Archive, name: str, measured: dict, *, status: str = "finished",
         budget: str = "default", parametrization: str = "mup", **row) -> None:
    archive.create_run(name, fingerprint=name, parametrization=parametrization)
    archive.write_yaml(name, "config.yaml", {"budget": budget,
                                             "proxy": {"parametrization": parametrization}})
    archive.write_json(name, "cost.json", _cost(measured))
    archive.record({"name": name, "status": status, **row})


def test_a_skipped_phase_counts_zero_and_an_unpredicted_one_is_left_out():
    r = run_ratios(_cost({"stages": 75.0, "validation": 400.0, "coord": 20.0, "finalize": 14.0,
                          "probes": 30.0}))
    assert r == {"stages": 1.5, "validation": 1.0, "depth": 0.0, "coord": 2.0, "finalize": 3.5}
    after = run_ratios(_cost({"validation": 400.0, "depth": 300.0}), after_stages=True)
    assert after == {"validation": 0.5, "depth": 0.5, "coord": 0.0, "finalize": 0.0}
    assert run_ratios({"phases": {"stages": 1.0}}) == {}  # no prediction recorded
    copied = _cost({"finalize": 12.0}, pred={"finalize": 4.0})  # trials copied: no stages left
    assert run_ratios(copied) == {} == run_ratios(copied, after_stages=True)


def test_the_prior_counts_as_its_runs():
    got = combine([{"depth": 2.0}, {"depth": 1.0, "coord": 2.0}], {"depth": 1.5, "stages": 1.2},
                  prior_runs=2)
    assert math.isclose(got["depth"], (2 * 1.5 + 2.0 + 1.0) / 4)
    assert math.isclose(got["stages"], 1.2) and math.isclose(got["coord"], 2.0)
    assert "validation" not in got


def test_calibration_reads_the_archives_runs_of_this_budget_and_parametrization(tmp_path):
    archive = Archive(tmp_path / "sweeps")
    cfg = compose_cfg(["model=tiny"])  # budget default, μP: the budget's prior applies
    prior = cfg.cost.eta_prior["mup"]
    empty = calibration(archive, cfg)  # no archive folder yet: the prior alone
    assert empty.runs == [] and empty.prior_runs == cfg.cost.eta_prior_runs > 0
    assert empty.ratios == pytest.approx(prior)
    assert f"budget's {cfg.cost.eta_prior_runs} measured runs" in empty.describe()
    _add(archive, "a", {**PRED, "depth": 600.0})  # a seed round doubled the depth grid
    _add(archive, "b", {**PRED, "depth": 300.0}, status="inconclusive")
    _add(archive, "smoke", {**PRED, "depth": 3000.0}, budget="smoke")
    _add(archive, "sp", {**PRED, "depth": 3000.0}, parametrization="sp")
    _add(archive, "failed", {**PRED, "depth": 3000.0}, status="failed")
    _add(archive, "copied", {**PRED, "depth": 3000.0}, reused_from="a")
    cal = calibration(archive, cfg)
    assert sorted(cal.runs) == ["a", "b"]
    n = cfg.cost.eta_prior_runs
    assert math.isclose(cal.ratios["depth"], (n * prior["depth"] + 2.0 + 1.0) / (n + 2))
    after = cfg.cost.eta_prior_after_stages["mup"]  # the re-prediction's, from its own ratios
    assert math.isclose(cal.after["depth"], (n * after["depth"] + 1.0 + 0.5) / (n + 2))
    assert math.isclose(cal.apply({"depth": 10.0}, after_stages=True)["depth"],
                        10 * cal.after["depth"])
    assert "and 2 archived runs" in cal.describe()
    sp = calibration(archive, compose_cfg(["model=tiny", "proxy.parametrization=sp"]))
    assert sp.runs == ["sp"] and sp.prior_runs == 0 and sp.ratios["depth"] == 10.0
    smoke = calibration(archive, compose_cfg(["model=tiny", "budget=smoke"]))
    assert smoke.runs == ["smoke"] and smoke.prior_runs == 0  # the smoke budget ships no prior


def test_only_the_newest_runs_are_read(tmp_path):
    archive = Archive(tmp_path / "sweeps")
    for i in range(HISTORY + 2):
        _add(archive, f"r{i:02d}", PRED, budget="smoke", created=f"2026-12-06T10:{i:02d}:00+00:00")
    cal = calibration(archive, compose_cfg(["model=tiny", "budget=smoke"]))
    assert len(cal.runs) == HISTORY and "r00" not in cal.runs and "r21" in cal.runs
    assert Calibration().apply({"depth": 3.0}) == {"depth": 3.0}
