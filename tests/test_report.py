"""transfer.outputs.report: every section is there and shows the numbers it was given."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from transfer.core import cost
from transfer.core.compose import CONF_DIR
from transfer.outputs import emit, report

CONF = CONF_DIR
SECTIONS = ("## What was swept", "## Winners per stage", "## Verdict", "## Plots",
            "## Emitted values", "## Budget", "## Not transferred")


def load(group: str, name: str) -> dict:
    return yaml.safe_load((CONF / group / f"{name}.yaml").read_text())


CFG = {"model": {"name": "7b"}, "budget": "default", "data": {"kind": "stdlib"},
       "proxy": {"parametrization": "mup", "width": 64, "validation_width": 256,
                 "size": "cpu"},
       "train": {"tokens": 307200},
       "stages": {"stage": {
           "lr": {"trials": 8, "params": {"lr": {"type": "float", "low": 3e-4, "high": 0.1,
                                                 "log": True}}},
           "batch_size": {"trials": 4, "params": {"batch_size": {
               "type": "categorical", "choices": [8, 16, 32, 64]}}}}},
       "validation": {"max_gap": 0.01, "coord_max_slope": 0.25}}
STAGES = [{"name": "lr", "trials": 8, "complete": 6, "pruned": 2, "failed": 0,
           "best_value": 2.3456, "best_params": {"lr": 0.0123}, "seconds": 310.0,
           "predicted_seconds": 300.0, "measured_seconds": 310.0},
          {"name": "batch_size", "trials": 4, "complete": 4, "pruned": 0, "failed": 0,
           "best_value": 2.2222, "best_params": {"batch_size": 32}, "seconds": 160.0,
           "predicted_seconds": 150.0, "measured_seconds": 160.0}]
VALIDATION = {"outcome": "passed", "passed": True, "widths": [64, 256], "n_seeds": 2,
              "confidence": 0.9, "best_log2_lr": {64: -6.25, 256: -6.0},
              "drift_log2": 0.25, "drift_ci": [0.1, 0.4], "tolerance_log2": 0.5,
              "loss_at_transferred": 2.101, "loss_best_w1": 2.099, "loss_gap": 0.00095,
              "loss_gap_ci": [0.0001, 0.004], "max_gap": 0.01, "curvature_snr": 12.5,
              "min_curvature_snr": 3.0, "noise": {"residual_std": 0.0031, "seed_std": 0.05},
              "bracketed": {64: True, 256: True},
              "extrapolation": {"measured_octaves": 2.0, "target_width": 4096,
                                "extrapolated_octaves": 4.0},
              "trajectory": {"widths": [64, 128, 256], "vertices": [-6.25, -6.1, -6.0],
                             "target_width": 4096, "model": "converging", "estimate": -5.8,
                             "interval": [-6.1, -5.5], "disagreement": 0.4,
                             "models": {"converging": {"form": "x_inf + c·(w/w0)^-1/2",
                                                       "estimate": -5.8,
                                                       "interval": [-6.1, -5.5]},
                                        "log_linear": {"form": "a + b·log2(w/w0)",
                                                       "estimate": -5.4,
                                                       "interval": [-6.0, -4.8]}}},
              "coord_check": {"passed": True, "max_abs_slope": 0.0734, "max_slope": 0.25},
              "rejected_because": [], "inconclusive_because": [], "reasons": []}
WINNERS = {"lr": 0.0123, "batch_size": 32, "warmup_fraction": 0.05, "input_mult": 1.0,
           "output_mult": 1.0, "init_std": 0.02, "attn_mult": 1.0, "weight_decay": 0.0,
           "schedule": "cosine"}
PROXY = {"parametrization": "mup", "width": 64, "validation_width": 256, "n_layers": 2,
         "weight_decay_rule": "timescale",
         "d_head": 16, "seq_len": 128, "vocab_size": 256, "data": "stdlib", "kv_group": 1}


def _cost() -> dict:
    conf = {"n_gpus": 256, "buffer": 0.3, "naive_token_fraction": 0.01,
            "max_tuning_gpu_hours": 2.0, "max_wall_seconds": None}
    measured = {"device": "cpu", "sweep": {"seconds": 470.0, "flops": 2e14},
                "validation": {"seconds": 300.0, "flops": 1e14}}
    return cost.cost_report(load("model", "7b"), load("hardware", "h100"), conf,
                            measured=measured, stages=STAGES)


def render(validation=VALIDATION, validated=True) -> str:
    c = _cost()
    target = emit.emit_target(load("model", "7b"), base_width=64, winners=WINNERS, proxy=PROXY,
                              validated=validated, drift_log2=0.25, fingerprint="abc123",
                              budget=cost.budget_summary(c), created="2025-01-01")
    return report.render_report(name="7b-mup-abc", cfg=CFG, stages=STAGES,
                                validation=validation, target=target, cost=c,
                                plots=["plots/lr_transfer.png", "plots/coord_check.png"])


@pytest.fixture(scope="module")
def md() -> str:
    return render()


def test_every_section_in_order(md):
    positions = [md.index(s) for s in SECTIONS]
    assert positions == sorted(positions)
    assert md.startswith("# Sweep `7b-mup-abc`")


def test_what_was_swept(md):
    assert "lr ∈ [0.0003, 0.1], log" in md
    assert "batch_size ∈ {8, 16, 32, 64}" in md
    assert "| lr | lr ∈ [0.0003, 0.1], log | 8 | 6 | 2 | 0 | 310 |" in md
    assert "stages at width 64, validation at width 256" in md


def test_winners_per_stage(md):
    assert "| lr | 2.35 | lr=0.0123 |" in md
    assert "| batch_size | 2.22 | batch_size=32 |" in md


def test_verdict_numbers(md):
    assert "**PASSED** at widths 64, 256, 2 seeds" in md
    assert "| lr drift (log2) | 0.25 | [0.1, 0.4] | ±0.5 |" in md
    assert "| loss gap at the narrow optimum | 0.00095 | [0.0001, 0.004] | ≤ 0.01 |" in md
    assert "| curvature S/N | 12.5 | — | ≥ 3 |" in md
    assert "| coord check max abs slope | 0.0734 | — | 0.25 |" in md
    assert "| 256 | -6 | 0.0156 |" in md  # 2^-6
    assert "the target (width 4,096) is 4 octaves past the widest proxy" in md
    assert "| converging (emitted) | x_inf + c·(w/w0)^-1/2 | -5.8 | [-6.1, -5.5] | 0.0179 |" in md
    assert "| log_linear | a + b·log2(w/w0) | -5.4 | [-6, -4.8] |" in md


def test_plots_are_relative_links(md):
    assert "![lr_transfer.png](plots/lr_transfer.png)" in md
    assert "![coord_check.png](plots/coord_check.png)" in md


def test_emitted_param_groups(md):
    # 7b over base 64: width_mult 64, hidden lr 0.0123/64, hidden σ 0.02/8 (PROXY has no trial
    # tokens, so no horizon/batch factor); weight decay from the AdamW-timescale rule, ×64 hidden
    assert "| hidden_attn | 0.000192 | 0.0025 | 0.239 | zero_init=attention q |" in md
    assert "| readout | 0.0123 | 0 | 0.00374 | logits_scale=0.0156 |" in md
    assert "| width_mult | 64 |" in md and "| attn_scale | 0.00781 |" in md


def test_budget_table(md):
    assert "| target pretraining: h100 GPU-hours | 60,197 |" in md  # attention causal
    assert "| target pretraining: h100 GPU-hours with buffer | 78,256 |" in md
    assert "| tuning as run: seconds on cpu | 770 |" in md
    assert "naive search on the target: 12 trials" in md
    assert "fitting own lr/batch laws at smaller scales, h100 GPU-hours | 1,221 |" in md
    # cost_report was not told the run was validated: no saving is claimed
    assert "| saved h100 GPU-hours (baseline − tuning device-hours; validated runs only) | — |" in md
    assert "| lr | 8 | 300 | 310 | -3.23 % |" in md
    assert "Spending cap: 2 device-hours" in md and "exceeded: no" in md


def test_not_transferred(md):
    section = md[md.index("## Not transferred"):]
    for name in ("weight_decay", "batch_size", "warmup_fraction", "token_horizon", "depth"):
        assert f"**{name}**" in section
    assert "not a μP quantity" in section


def test_an_sp_run_does_not_say_mup_leaves_only_these_untransferred(md):
    assert "but μP does not carry them across width" in md
    c = _cost()
    target = emit.emit_target(load("model", "7b"), base_width=64, winners=WINNERS,
                              proxy=dict(PROXY, parametrization="sp"), validated=False,
                              drift_log2=0.25, fingerprint="abc123",
                              budget=cost.budget_summary(c), created="2025-01-01")
    sp = report.render_report(name="7b-sp-abc", cfg=CFG, stages=STAGES, validation=VALIDATION,
                              target=target, cost=c, plots=[])
    section = sp[sp.index("## Not transferred"):]
    assert "the proxies are SP, so no value is μP-transferred" in section
    assert "μP does not carry them" not in section


def test_rejected_and_unvalidated_runs_say_so():
    rejected = render(dict(VALIDATION, outcome="rejected", passed=False,
                           rejected_because=["drift 0.9 > 0.5"]), validated=False)
    assert "**REJECTED**" in rejected and "Evidence against transfer:\n\n- drift 0.9" in rejected
    assert "> **validated: false**" in rejected
    unsure = render(dict(VALIDATION, outcome="inconclusive", passed=False,
                         inconclusive_because=["too flat"], decide_with="budget=thorough"),
                    validated=False)
    assert "**INCONCLUSIVE**" in unsure and "Why it cannot tell:\n\n- too flat" in unsure
    assert "To decide it: budget=thorough." in unsure
    missing = render(None, validated=False)
    assert "Validation did not run" in missing and "verdict **NOT VALIDATED**" in missing


def test_table_cells_cannot_break_the_table():
    assert report._table(["a"], [("x | y",)]).splitlines()[-1] == "| x \\| y |"


def test_numbers_read_as_a_persons_report():
    """numpy booleans and per-width maps render as words, floats to 3 significant digits."""
    assert report.fmt({"64": np.True_, "256": np.False_}) == "64: yes, 256: no"
    assert report.fmt(np.float64(0.123456)) == "0.123" and report.fmt(np.int64(12345)) == "12,345"
