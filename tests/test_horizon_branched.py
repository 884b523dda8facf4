"""The branched horizon check (validation.horizon_method=branched): its config checks, the
schedule it emits, and a tiny sweep end to end."""

from __future__ import annotations

import json
import math

import pytest
import torch
import yaml
from helpers_sweep import TINY, compose_cfg, only_run

from transfer.cli.sweep import sweep
from transfer.core.compose import as_config
from transfer.core.config import check_config
from transfer.core.errors import UserError
from transfer.search.training import horizon_tokens
from transfer.verdict import horizon_branched

BRANCHED = ["scaling.schedule=wsd", "validation.horizon_enabled=true",
            "validation.horizon_method=branched"]


@pytest.mark.parametrize("overrides, match", [
    (["scaling.schedule=step"], "scaling.schedule='step'; use one of cosine, linear, wsd"),
    (["scaling.wsd_cooldown_fraction=1.0"], "scaling.wsd_cooldown_fraction=1.0 must be in"),
    (["validation.horizon_method=many"], "validation.horizon_method='many'"),
    ([*BRANCHED, "scaling.schedule=cosine"], "set scaling.schedule=wsd"),
    ([*BRANCHED, "validation.horizon_multiples=[0.25,0.5,1.0]"], ">= 4 distinct"),
    ([*BRANCHED, "validation.horizon_multiples=[0.5,1.0,2.0,4.0]"], "spanning >= 16×"),
    ([*BRANCHED, "train.weight_decay_rule=timescale"], "one λ"),
])
def test_bad_settings_are_one_line_naming_the_fix(overrides, match):
    with pytest.raises(UserError, match=match.replace("(", r"\(").replace("[", r"\[")) as e:
        check_config(as_config(compose_cfg([*TINY, *overrides])))
    assert "\n" not in str(e.value)


def test_a_bad_schedule_exits_2_with_one_line(capsys):
    assert sweep(compose_cfg([*TINY, "scaling.schedule=wsdd"])) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "scaling.schedule='wsdd'" in err


def test_thorough_measures_by_branches_and_trains_and_emits_wsd_default_does_not():
    t = as_config(compose_cfg(["budget=thorough"]))
    check_config(t)
    assert (t.validation.horizon_method, t.scaling.schedule) == ("branched", "wsd")
    assert horizon_tokens(t) == [t.train.tokens // 2 ** k for k in range(4, -1, -1)]
    d = as_config(compose_cfg(["budget=default"]))
    assert (d.validation.horizon_method, d.scaling.schedule) == ("two_budgets", "cosine")


def test_one_branched_run_costs_the_trunk_plus_every_cooldown():
    cfg = as_config(compose_cfg([*TINY, *BRANCHED, "train.tokens=10240",
                                 "validation.horizon_multiples=[0.25,0.5,1,2,4]"]))
    # 5, 10, 20, 40, 80 steps of 512 tokens; cooldowns 1, 2, 4, 8, 16; trunk to step 64
    assert horizon_branched.run_tokens(cfg, 16, 32) == (64 + 1 + 2 + 4 + 8 + 16) * 512


# ---- a tiny sweep end to end ---------------------------------------------------------------
SWEEP = [*TINY, *BRANCHED, "train.tokens=10240", "stages.stage.lr.trials=2",
         "stages.stage.batch_size.trials=1", "stages.stage.warmup.trials=1",
         "validation.points=3", "validation.seeds=2", "validation.max_extend=0",
         "validation.coord_widths=[16,32]", "validation.coord_steps=2",
         "validation.horizon_multiples=[0.25,0.5,1,2,4]"]


@pytest.fixture(scope="module")
def branched_run(tmp_path_factory):
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        archive = tmp_path_factory.mktemp("branched") / "sweeps"
        sweep(compose_cfg([*SWEEP, f"archive_dir={archive}"]))
    finally:
        torch.set_num_threads(n)
    return only_run(archive)


def test_a_branched_sweep_writes_every_horizon_and_emits_the_schedule_it_measured(branched_run):
    h = json.loads((branched_run / "horizon.json").read_text())
    t = yaml.safe_load((branched_run / "target.yaml").read_text())["train"]
    assert h["method"] == "branched" and h["schedule"] == "wsd"
    assert h["tokens"] == [2560, 5120, 10240, 20480, 40960] and h["ratio"] == 16
    assert set(h["optima_log2"]) == {str(k) for k in h["tokens"]}
    assert h["fit"]["widths"] == h["tokens"]
    assert math.isfinite(h["exponent"]) or h["used"] == "rule"
    assert t["schedule"] == "wsd" and t["cooldown_fraction"] == 0.2
    assert "branched wsd cooldowns" in t["provenance"]["schedule"]
    assert "Hägele" in t["provenance"]["cooldown_fraction"]
    assert t["lr_factor_terms"]["horizon_exponent_source"] == (
        "measured" if h["used"] == "measured" else "rule")
    trials = (branched_run / "trials.csv").read_text().splitlines()
    assert sum("validation_horizon" in r for r in trials) == 3 * 2  # one run per (lr, seed)
    assert (branched_run / "plots" / "lr_horizon.png").is_file()
