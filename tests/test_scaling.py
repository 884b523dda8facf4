"""transfer.core.scaling: each rule against numbers worked from its paper's formula, and a
launchability check of the emitted train block for Llama 3.2 1B/3B and Llama 2 7B."""

from __future__ import annotations

import math

import pytest
from helpers_sweep import compose_cfg
from omegaconf import OmegaConf

from transfer.core import scaling
from transfer.outputs.emit import emit_target

# The proxies as the default budget runs them (stage width 64, 16 × 128 bytes, 150 steps).
PROXY = {"parametrization": "mup", "width": 64, "validation_width": 256, "n_layers": 2,
         "d_head": 16, "seq_len": 128, "vocab_size": 256, "data": "stdlib", "kv_group": 1,
         "tokens_per_trial": 16 * 128 * 150, "weight_decay_rule": "timescale"}
WINNERS = {"lr": 2 ** -6.88, "batch_size": 8, "warmup_fraction": 0.274, "input_mult": 1.0,
           "output_mult": 1.0, "init_std": 0.02, "attn_mult": 1.0, "weight_decay": 0.0,
           "schedule": "cosine", "min_lr_fraction": 0.1, "grad_clip": 1.0}


# ---- each rule by hand ---------------------------------------------------------------------
def test_step_law_batch_by_hand():
    # B(D) = 0.58 · D^0.571: at D = 1e11, 0.58 · 10^(11·0.571) = 0.58 · 10^6.281 = 1.10e6
    assert scaling.step_law_batch_tokens(1e11) == pytest.approx(0.58 * 10 ** 6.281, rel=1e-9)
    # independent of N by construction; doubling D multiplies B by 2^0.571 = 1.486
    assert scaling.step_law_batch_tokens(2e11) / scaling.step_law_batch_tokens(1e11) == (
        pytest.approx(2 ** 0.571))


def test_step_law_lr_by_hand():
    # η = 1.79 · N^-0.713 · D^0.307; the paper's 1B / 100B cell: 1.79 · 1e9^-0.713 · 1e11^0.307
    lr = scaling.step_law_lr(1e9, 1e11)
    assert lr == pytest.approx(1.79 * 10 ** (-9 * 0.713 + 11 * 0.307), rel=1e-9)
    assert 1e-4 < lr < 1e-2  # a plausible AdamW peak lr at that scale (≈ 1.9e-3)


def test_deepseek_laws_by_hand():
    # M = 72·n_layer·d² + 12·n_layer·d·l_seq; DeepSeek 7B shape (30 layers, 4096, 4096)
    m = scaling.deepseek_flops_per_token(30, 4096, 4096)
    assert m == 72 * 30 * 4096**2 + 12 * 30 * 4096 * 4096
    c = 1e20
    assert scaling.deepseek_batch_tokens(c) == pytest.approx(0.2920 * 1e20 ** 0.3271)
    assert scaling.deepseek_lr(c) == pytest.approx(0.3118 * 1e20 ** -0.125)
    assert scaling.deepseek_lr(c) == pytest.approx(0.3118 * 10 ** -2.5)  # 9.86e-4


def test_bjorck_horizon_and_adam_sqrt_by_hand():
    # 10× the tokens at a fixed batch: η × 10^-0.32 = 0.479
    assert scaling.bjorck_horizon_factor(1e10, 1e11) == pytest.approx(10 ** -0.32)
    assert scaling.bjorck_horizon_factor(1e10, 1e10) == 1.0
    # 4× the batch below the critical batch: η × 2
    assert scaling.adam_sqrt_batch_factor(1e6, 4e6) == pytest.approx(2.0)
    # Step Law read at a fixed batch: 0.307 − 0.571/2
    assert scaling.step_law_fixed_batch_exponent() == pytest.approx(0.0215)


def test_timescale_and_its_inverse():
    r = scaling.LLAMA2_7B_RECIPE  # 4e6 / (3e-4 · 0.1 · 2e12) = 1/15
    tau = scaling.adamw_timescale(r["batch_tokens"], r["lr"], r["weight_decay"], r["tokens"])
    assert tau == pytest.approx(1 / 15)
    assert scaling.weight_decay_for_timescale(tau, 4e6, 3e-4, 2e12) == pytest.approx(0.1)
    # λ ∝ B at fixed η, D (Power Lines' verified implication of a constant τ)
    assert scaling.weight_decay_for_timescale(tau, 8e6, 3e-4, 2e12) == pytest.approx(0.2)


def test_warmup_and_rounding():
    assert scaling.warmup_tokens_per_param(7e9) == 7e9
    assert scaling.round_batch_tokens(6.1e6, 4096, 256) == 6 * 4096 * 256
    assert scaling.round_batch_tokens(10.0, 4096, 256) == 4096 * 256  # never zero
    with pytest.raises(ValueError, match="n_gpus"):
        scaling.round_batch_tokens(1e6, 4096, 0)


def test_outside_says_how_far_and_when_it_cannot():
    fit = scaling.FitRange(d_min=1e9, d_max=1e11)
    assert scaling.outside(fit, d=1e10) == {"d": 1.0}
    assert scaling.outside(fit, d=1e12) == {"d": pytest.approx(10.0)}
    assert scaling.outside(fit, d=1e7) == {"d": pytest.approx(100.0)}
    assert scaling.outside(scaling.FitRange(d_max=1e11), d=1e10) == {"d": None}  # no d_min


def test_unknown_rule_names_the_choices():
    with pytest.raises(ValueError, match="step_law, deepseek, fixed"):
        scaling.batch_rule("linear", d=1e12)
    with pytest.raises(ValueError, match="bjorck"):
        scaling.horizon_exponent("kaplan")


# ---- launchability: the train block for the three published targets ------------------------
def emitted(model: str, scaling_set: str = "default") -> dict:
    cfg = compose_cfg([f"model={model}", f"scaling={scaling_set}"])
    return emit_target(OmegaConf.to_container(cfg.model, resolve=True), base_width=64,
                       winners=WINNERS, proxy=PROXY, validated=True, drift_log2=0.25,
                       fingerprint="f", budget={}, created="now", n_gpus=int(cfg.cost.n_gpus),
                       scaling=OmegaConf.to_container(cfg.scaling, resolve=True))


@pytest.mark.parametrize("model", ["1b", "3b", "7b"])
@pytest.mark.parametrize("scaling_set", ["default", "deepseek"])
def test_batch_is_within_the_laws_for_this_target(model, scaling_set):
    t = emitted(model, scaling_set)
    tr, m = t["train"], t["model"]
    d = tr["total_tokens"]
    c = scaling.deepseek_flops_per_token(m["n_layers"], m["d_model"], m["seq_len"]) * d
    laws = [scaling.step_law_batch_tokens(d), scaling.deepseek_batch_tokens(c)]
    unit = tr["n_gpus"] * tr["seq_len"]
    # within the published laws' spread, allowing one rounding unit either side
    assert min(laws) - unit <= tr["batch_tokens"] <= max(laws) + unit
    assert tr["batch_tokens"] % unit == 0
    assert tr["batch_size"] != WINNERS["batch_size"]  # never the proxies' batch winner


@pytest.mark.parametrize("model", ["1b", "3b", "7b"])
def test_train_block_is_launchable(model):
    t = emitted(model)
    tr = t["train"]
    # steps consistent with tokens and batch
    assert abs(tr["total_steps"] * tr["batch_tokens"] - tr["total_tokens"]) <= tr["batch_tokens"]
    # warmup: longer than Adam's β2 memory (1/(1−β2) steps), at most 5 % of the run
    assert tr["warmup_steps"] > 1 / (1 - tr["betas"][1])
    assert 0 < tr["warmup_fraction"] <= 0.05
    assert tr["warmup_fraction"] != WINNERS["warmup_fraction"]
    # optimizer settings present
    assert len(tr["betas"]) == 2 and 0 < tr["betas"][0] < tr["betas"][1] < 1
    assert tr["eps"] > 0 and tr["grad_clip"] > 0 and tr["weight_decay"] > 0
    for g in t["param_groups"]:
        assert g["eps"] > 0 and g["betas"] == tr["betas"] and g["lr"] > 0
    # a peak lr a team would recognise for Adam at this scale (vector groups; hidden / mult)
    assert 1e-4 < tr["lr"] < 3e-2
    # every train value has a provenance label of the three kinds
    prov = tr["provenance"]
    assert set(prov) == set(tr) - {"provenance"}
    assert all(v.startswith(("rule: ", "μP-transferred", "measured on proxies"))
               for v in prov.values())


def test_model_block_carries_what_a_launch_needs():
    m3, m7 = emitted("3b")["model"], emitted("7b")["model"]
    assert m3["rope_theta"] == 500000.0 and m3["rope_scaling"]["rope_type"] == "llama3"
    assert m3["rope_scaling"]["factor"] == 32.0 and m3["tied_embeddings"] is True
    assert m7["rope_theta"] == 10000.0 and m7["rope_scaling"] is None
    assert m3["norm_eps"] == m7["norm_eps"] == 1e-5
    assert (m3["vocab_size"], m7["vocab_size"]) == (128256, 32000)


def test_lr_factor_is_the_product_of_the_stated_rules():
    tr = emitted("7b")["train"]
    terms = tr["lr_factor_terms"]
    assert terms["horizon"] == pytest.approx((2e12 / PROXY["tokens_per_trial"]) ** -0.32)
    assert terms["batch"] == pytest.approx(math.sqrt(tr["batch_tokens"] / (8 * 128)))
    assert tr["lr"] == pytest.approx(WINNERS["lr"] * terms["horizon"] * terms["batch"])


def test_check_config_refuses_an_unknown_rule_and_a_fixed_batch_without_tokens():
    from transfer.core.config import check_config
    from transfer.core.errors import UserError

    check_config(compose_cfg(["scaling=fixed"]))
    with pytest.raises(UserError, match="scaling.batch_rule='linear'; use one of step_law"):
        check_config(compose_cfg(["scaling.batch_rule=linear"]))
    with pytest.raises(UserError, match="needs scaling.batch_tokens"):
        check_config(compose_cfg(["scaling=fixed", "scaling.batch_tokens=null"]))
