"""transfer.outputs.emit: every emitted value against the μP formulas (Tensor Programs V, Table 3, Adam)
for two target sizes, the train block's arithmetic, provenance honesty and the YAML file."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import yaml

from transfer.core import cost
from transfer.core.compose import CONF_DIR
from transfer.outputs import emit

CONF = CONF_DIR
BASE_WIDTH = 128
# Deliberately unlike each other and unlike the defaults, so a swapped field shows up.
WINNERS = {"lr": 3e-3, "batch_size": 32, "warmup_fraction": 0.07, "input_mult": 0.5,
           "output_mult": 2.0, "init_std": 0.03, "attn_mult": 1.5, "weight_decay": 0.1,
           "schedule": "cosine", "min_lr_fraction": 0.1, "grad_clip": 1.0}
PROXY = {"parametrization": "mup", "width": 128, "validation_width": 512, "n_layers": 2,
         "d_head": 16, "seq_len": 128, "vocab_size": 256, "data": "stdlib", "kv_group": 1,
         "tokens_per_trial": 307200, "weight_decay_rule": "timescale"}


def load_model(name: str) -> dict:
    """conf/model/<name>.yaml as composed (an alias such as 3b resolves to its preset)."""
    import dataclasses

    from transfer.core.compose import as_config, compose

    return dataclasses.asdict(as_config(compose([f"model={name}"])).model)


def make(name: str = "7b", *, validated: bool = True, proxy: dict | None = None,
         **kw) -> dict:
    return emit.emit_target(load_model(name), base_width=BASE_WIDTH, winners=WINNERS,
                            proxy=proxy or PROXY, validated=validated, drift_log2=0.12,
                            fingerprint="f00d", budget={"gpu_hours": 1.0},
                            created="2025-01-01T00:00:00+00:00", **kw)


def groups(t: dict) -> dict:
    return {g["name"]: g for g in t["param_groups"]}


# ---- μP values at the target, for two sizes -------------------------------------------------
@pytest.mark.parametrize("name", ["3b", "7b"])
def test_mup_block_follows_the_formulas(name):
    m, t = load_model(name), make(name)
    mult = m["d_model"] / BASE_WIDTH  # 3b: 24, 7b: 32
    d_head = m["d_model"] // m["n_heads"]  # 128 for both
    mup = t["mup"]
    assert mup["base_width"] == BASE_WIDTH and mup["target_width"] == m["d_model"]
    assert mup["width_mult"] == pytest.approx(mult)
    assert mup["input_mult"] == 0.5 and mup["output_mult"] == 2.0
    assert mup["logits_scale"] == pytest.approx(2.0 / mult)
    assert mup["d_head"] == d_head
    assert mup["attn_scale"] == pytest.approx(1.5 / d_head)  # 1/d, not 1/sqrt(d), and target's


HIDDEN = ("hidden_attn", "hidden_mlp_in", "hidden_mlp_down")
VECTOR = ("vector_block", "vector_final")


def hidden_mults(m: dict, ffn_ratio: float | None = None) -> dict[str, float]:
    """Each hidden group's fan-in multiplier against the proxy's base model (its d_ff is
    round(ffn_ratio × base_width), the proxy's own)."""
    ffn = ffn_ratio or m["d_ff"] / m["d_model"]
    mult = m["d_model"] / BASE_WIDTH
    return {"hidden_attn": mult, "hidden_mlp_in": mult,
            "hidden_mlp_down": m["d_ff"] / round(ffn * BASE_WIDTH)}


@pytest.mark.parametrize("name", ["3b", "7b"])
def test_param_groups_follow_the_adam_table(name):
    m = load_model(name)
    mult = m["d_model"] / BASE_WIDTH
    t = make(name)
    g, tr = groups(t), t["train"]
    lr, wd = tr["lr"], tr["weight_decay"]  # base lr after the horizon/batch rules; wd from τ
    assert list(g) == [*HIDDEN, "embedding", "readout", *VECTOR]
    for k, hm in hidden_mults(m).items():
        assert g[k]["lr_transferred"] == pytest.approx(3e-3 / hm)  # μP, as tuned
        assert g[k]["lr"] == pytest.approx(lr / hm)  # the same rule on the launch lr
        assert g[k]["init_std"] == pytest.approx(0.03 / math.sqrt(hm))
        assert g[k]["weight_decay"] == pytest.approx(wd * hm)
        # decoupled AdamW shrinks by lr·wd per step: width-independent for hidden matrices
        assert g[k]["lr"] * g[k]["weight_decay"] == pytest.approx(lr * wd)
        assert g[k]["eps"] == pytest.approx(tr["eps"] / hm)
    for k in ("embedding", "readout", *VECTOR):
        assert g[k]["lr"] == lr and g[k]["lr_transferred"] == 3e-3  # unchanged with width
    assert g["embedding"]["init_std"] == 0.03 and g["embedding"]["weight_decay"] == wd
    assert g["readout"]["weight_decay"] == wd
    # Adam ε: matrix-like groups ε / width_mult, vector groups ε
    for k in ("embedding", "readout"):
        assert g[k]["eps"] == pytest.approx(tr["eps"] / mult)
    for k in VECTOR:
        assert g[k]["eps"] == tr["eps"]
        assert g[k]["init"] == "ones" and g[k]["init_std"] is None
        assert g[k]["weight_decay"] == 0.0
    assert g["readout"]["logits_scale"] == pytest.approx(2.0 / mult)


def test_a_pinned_proxy_ffn_ratio_gives_the_down_projection_its_own_multiplier():
    # The proxy trained SwiGLU at ffn_ratio 4 while the 7b target has 11008/4096 = 2.6875: the
    # down-projection's fan-in grew 11008/512, not 4096/128 (the bug one d_model ratio had).
    m = load_model("7b")
    g = groups(make("7b", proxy=dict(PROXY, ffn_ratio=4.0)))
    down = m["d_ff"] / (4 * BASE_WIDTH)
    assert g["hidden_mlp_down"]["lr_transferred"] == pytest.approx(3e-3 / down)
    assert g["hidden_mlp_down"]["init_std"] == pytest.approx(0.03 / math.sqrt(down))
    assert g["hidden_attn"]["lr_transferred"] == pytest.approx(3e-3 / (m["d_model"] / BASE_WIDTH))
    assert g["hidden_mlp_down"]["fan_in"] == m["d_ff"]


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_depth_rules_at_the_target_depth(alpha):
    m = load_model("7b")  # 32 layers; proxies tuned at base depth 2: m_L = 16
    t = make("7b", proxy=dict(PROXY, depth_alpha=alpha, base_depth=2))
    mup, g, tr = t["mup"], groups(t), t["train"]
    m_l = m["n_layers"] / 2
    lr_factor = m_l ** (alpha - 1) if alpha else 1.0  # α = 0 is μP: no depth rule at all
    assert mup["depth_mult"] == m_l and mup["residual_mult"] == pytest.approx(m_l ** -alpha)
    hm = hidden_mults(m)
    for k in HIDDEN:
        assert g[k]["lr_transferred"] == pytest.approx(3e-3 / hm[k] * lr_factor)
        assert g[k]["eps"] == pytest.approx(tr["eps"] / hm[k] * m_l ** -alpha)
        assert g[k]["depth_mult"] == m_l
    assert g["vector_block"]["lr_transferred"] == pytest.approx(3e-3 * lr_factor)
    assert g["vector_block"]["eps"] == pytest.approx(tr["eps"] * m_l ** -alpha)
    for k in ("embedding", "readout", "vector_final"):  # outside every residual block
        assert g[k]["lr_transferred"] == 3e-3 and g[k]["depth_mult"] == 1.0


def test_depth_is_transferred_only_when_the_depth_check_passed():
    proxy = dict(PROXY, depth_alpha=1.0, base_depth=2)
    names = {x["name"] for x in make("7b", proxy=proxy)["provenance"]["not_transferred"]}
    assert "depth" in names  # the check did not run
    failed = {"outcome": "rejected", "depths": [2, 8], "reasons": ["drift"]}
    nt = {x["name"]: x for x in make("7b", proxy=proxy, depth=failed)["provenance"][
        "not_transferred"]}
    assert "rejected" in nt["depth"]["reason"]
    t = make("7b", proxy=proxy, depth=dict(failed, outcome="passed", reasons=[]))
    assert "depth" not in {x["name"] for x in t["provenance"]["not_transferred"]}
    assert "depth" in {x["name"] for x in t["provenance"]["transferred"]}


def test_untied_readout_is_zero_initialised_by_default():
    g = groups(make("7b"))
    assert g["readout"]["init_std"] == 0.0 and "tied_to" not in g["readout"]


def test_untied_readout_without_zero_init_keeps_base_sigma_under_mup():
    g = groups(make("7b", proxy=dict(PROXY, readout_zero_init=False)))
    assert g["readout"]["init_std"] == 0.03  # μP: constant; the 1/width_mult is in logits_scale


def test_tied_readout_shares_the_embedding_table():
    g = groups(make("3b"))  # Llama 3.2 3B ties its embeddings
    assert g["readout"]["tied_to"] == "embedding"
    assert g["readout"]["init_std"] == g["embedding"]["init_std"]


def test_zero_init_query_is_stated_when_the_proxy_used_it():
    assert groups(make())["hidden_attn"]["zero_init"] == ["attention q"]
    assert "zero_init" not in groups(make(proxy=dict(PROXY, zero_init_query=False)))[
        "hidden_attn"]
    assert "zero_init" not in groups(make())["hidden_mlp_in"]


def test_at_base_width_mup_values_equal_the_tuned_ones():
    tiny = load_model("tiny")  # d_model 256
    t = emit.emit_target(tiny, base_width=256, winners=WINNERS, proxy=PROXY, validated=True,
                         drift_log2=0.0, fingerprint="x", budget={}, created="now")
    g = groups(t)
    for k in ("hidden_attn", "hidden_mlp_in"):
        assert g[k]["lr_transferred"] == 3e-3 and g[k]["init_std"] == 0.03
        assert g[k]["lr"] == t["train"]["lr"] and g[k]["eps"] == t["train"]["eps"]
    assert t["mup"]["logits_scale"] == 2.0


# ---- SP and validation ---------------------------------------------------------------------
def test_sp_proxy_emits_naive_values_and_is_never_validated():
    t = make("7b", proxy=dict(PROXY, parametrization="sp"), validated=True)
    assert t["provenance"]["validated"] is False
    assert "sp" in t["provenance"]["warning"] and "do not transfer" in t["provenance"]["warning"]
    assert list(t["provenance"])[:2] == ["validated", "warning"]
    g = groups(t)
    assert g["hidden_attn"]["lr_transferred"] == 3e-3  # plain AdamW: no width scaling
    assert g["hidden_attn"]["lr"] == g["vector_block"]["lr"]
    assert g["hidden_mlp_down"]["eps"] == g["vector_block"]["eps"]
    assert t["mup"]["attn_scale"] == pytest.approx(1.5 / math.sqrt(128))
    assert t["mup"]["logits_scale"] == 2.0


def test_unvalidated_transfer_is_flagged_at_the_top_of_provenance():
    t = make(validated=False)
    assert list(t["provenance"])[:2] == ["validated", "warning"]
    assert t["provenance"]["validated"] is False and "not validated" in t["provenance"]["warning"]
    ok = make(validated=True)["provenance"]
    assert ok["validated"] is True and ok["warning"] is None


# ---- train block ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["3b", "7b"])
def test_train_block_arithmetic(name):
    m, tr = load_model(name), make(name)["train"]
    assert tr["lr_transferred"] == 3e-3  # base lr as tuned
    assert tr["lr"] == pytest.approx(3e-3 * tr["lr_factor"])
    terms = tr["lr_factor_terms"]
    assert tr["lr_factor"] == pytest.approx(terms["horizon"] * terms["batch"])
    assert tr["batch_tokens"] == tr["batch_size"] * m["seq_len"]
    assert tr["batch_size"] != 32  # the proxies' batch-stage winner is never copied
    assert tr["total_tokens"] == float(m["train_tokens"])
    assert abs(tr["total_steps"] * tr["batch_tokens"] - tr["total_tokens"]) <= tr["batch_tokens"]
    assert tr["warmup_tokens"] == tr["warmup_steps"] * tr["batch_tokens"]
    assert tr["warmup_fraction"] != 0.07  # the proxies' fraction is never copied
    assert tr["schedule"] == "cosine" and tr["min_lr_fraction"] == 0.1


def test_7b_train_block_by_hand():
    tr = make("7b")["train"]  # n_gpus=1: the batch is a whole number of 4096-token sequences
    # Step Law: B = 0.58 · (2e12)^0.571 = 6,127,6xx tokens → 1496 sequences of 4096
    assert tr["batch_size"] == round(0.58 * 2e12 ** 0.571 / 4096) == 1496
    assert tr["batch_tokens"] == 1496 * 4096 == 6_127_616
    assert tr["total_steps"] == round(2e12 / 6_127_616) == 326_391
    # lr: (2e12 / 307,200)^-0.32 at the proxies' 32 × 128 tokens, then √(6,127,616 / 4096)
    assert tr["lr_factor"] == pytest.approx((2e12 / 307200) ** -0.32 * (6_127_616 / 4096) ** 0.5)
    # warmup: N = 6,738,415,616 tokens (k = 1) / 6,127,616 per step = 1099.7 → 1100 steps
    assert tr["warmup_steps"] == 1100
    # τ of Llama 2 7B = 4e6 / (3e-4 · 0.1 · 2e12) = 1/15; λ = B / (τ·η·D)
    assert tr["tau"] == pytest.approx(1 / 15)
    assert tr["weight_decay"] == pytest.approx(6_127_616 * 15 / (tr["lr"] * 2e12))


def test_batch_is_a_multiple_of_what_the_gpus_can_use():
    t = emit.emit_target(load_model("3b"), base_width=BASE_WIDTH, winners=WINNERS, proxy=PROXY,
                         validated=True, drift_log2=0.0, fingerprint="x", budget={},
                         created="now", n_gpus=256)
    assert t["train"]["batch_tokens"] % (256 * 8192) == 0 and t["train"]["n_gpus"] == 256


def test_every_train_value_has_a_provenance_label():
    tr = make("7b")["train"]
    prov = tr["provenance"]
    assert set(prov) == set(tr) - {"provenance"}
    assert prov["lr_transferred"].startswith("μP-transferred (validated)")
    assert prov["proxy_reference"] == "measured on proxies"
    assert all(v.startswith(("rule: ", "μP-transferred", "measured on proxies"))
               for v in prov.values())
    assert make("7b", validated=False)["train"]["provenance"]["lr_transferred"] == (
        "μP-transferred (not validated): the stages' pick at the proxy width, no trajectory")


# ---- model block and provenance ------------------------------------------------------------
@pytest.mark.parametrize("name", ["3b", "7b"])
def test_model_block_counts_parameters(name):
    m, t = load_model(name), make(name)
    counts = cost.target_params(m)
    assert t["model"]["n_params"] == counts["n_params"]
    assert t["model"]["d_model"] == m["d_model"] and t["model"]["n_layers"] == m["n_layers"]


def test_not_transferred_names_every_caveat():
    names = [i["name"] for i in make()["provenance"]["not_transferred"]]
    for required in ("weight_decay", "batch_size", "warmup_fraction", "token_horizon", "data",
                     "depth", "seq_len", "attn_scale"):
        assert required in names
    reasons = " ".join(i["reason"] for i in make()["provenance"]["not_transferred"])
    assert "not a μP quantity" in reasons and "only empirically" in reasons


def test_not_transferred_extra_is_appended():
    t = make(not_transferred_extra=[{"name": "proxy_shape", "value": None, "reason": "r1"}, "r2"])
    items = t["provenance"]["not_transferred"]
    assert items[-2]["reason"] == "r1" and items[-1]["reason"] == "r2"


def test_provenance_records_the_proxy_and_run():
    p = make()["provenance"]
    assert p["fingerprint"] == "f00d" and p["drift_log2"] == 0.12
    assert p["proxy"]["width"] == 128 and p["proxy"]["base_width"] == BASE_WIDTH
    assert [x["name"] for x in p["transferred"]] == ["lr", "init_std", "input_mult",
                                                      "output_mult", "attn_mult"]


def test_missing_winner_names_the_key():
    w = {k: v for k, v in WINNERS.items() if k != "attn_mult"}
    with pytest.raises(ValueError, match="attn_mult"):
        emit.emit_target(load_model("7b"), base_width=64, winners=w, proxy=PROXY,
                         validated=True, drift_log2=None, fingerprint="x", budget={},
                         created="now")


# ---- the YAML file -------------------------------------------------------------------------
def test_dump_yaml_round_trips_in_key_order(tmp_path):
    t = make()
    path = tmp_path / "target.yaml"
    emit.dump_yaml(t, path)
    text = path.read_text()
    assert text.startswith("# ")
    back = yaml.safe_load(text)
    assert back == t
    assert list(back) == ["model", "mup", "param_groups", "train", "budget", "provenance"]


def test_dump_yaml_warns_in_the_header_when_not_validated():
    s = io.StringIO()
    emit.dump_yaml(make(validated=False), s)
    header = [line for line in s.getvalue().splitlines() if line.startswith("#")]
    assert any("WARNING" in line and "validated is false" in line for line in header)
    s = io.StringIO()
    emit.dump_yaml(make(validated=True), s)
    assert "WARNING" not in s.getvalue()


def test_dump_yaml_writes_a_missing_estimate_as_null_and_keeps_an_unbounded_side():
    """NaN (a depth curve without an optimum) is null, as the run's JSON files write it, not
    YAML's .nan; ±inf (an interval open on that side) stays ±.inf."""
    t = make()
    t["provenance"]["depth"] = {"optima_log2": [-3.0, float("nan"), np.float64("nan")],
                                "optima_ci": [[-3.5, -2.5], [float("-inf"), float("inf")]]}
    s = io.StringIO()
    emit.dump_yaml(t, s)
    assert ".nan" not in s.getvalue()
    back = yaml.safe_load(s.getvalue())["provenance"]["depth"]
    assert back["optima_log2"] == [-3.0, None, None]
    assert back["optima_ci"][1] == [float("-inf"), float("inf")]


def test_dump_yaml_is_stable():
    a, b = io.StringIO(), io.StringIO()
    emit.dump_yaml(make(), a)
    emit.dump_yaml(make(), b)
    assert a.getvalue() == b.getvalue()


def test_the_target_takes_the_proxies_weight_decay_rule():
    """One rule for both: `fixed` emits the proxies' λ (scaled per group by μP), no τ; the
    timescale rule emits λ = B/(τ·η·D) at the target's batch, lr and horizon."""
    fixed = make(proxy=dict(PROXY, weight_decay_rule="fixed"))
    assert fixed["train"]["weight_decay"] == WINNERS["weight_decay"]
    assert fixed["train"]["tau"] is None
    assert "weight_decay_rule=fixed" in fixed["train"]["provenance"]["weight_decay"]
    g = groups(fixed)
    assert g["hidden_attn"]["weight_decay"] * g["hidden_attn"]["lr"] == pytest.approx(
        g["embedding"]["weight_decay"] * g["embedding"]["lr"])  # lr·λ the same in each group
    timed = make(proxy=dict(PROXY, weight_decay_rule="timescale"))["train"]
    assert timed["batch_tokens"] / (timed["lr"] * timed["weight_decay"] * timed["total_tokens"]
                                    ) == pytest.approx(timed["tau"])


def test_the_emitted_lr_carries_the_trajectorys_interval():
    traj = {"interval": [1e-3, 4e-3], "interval_log2": [-9.97, -7.97], "confidence": 0.9,
            "model": "converging", "model_form": "x_inf + c·(w/w0)^-1/2", "widths": [64, 128, 256],
            "optima_log2": [-8.0, -8.1, -8.2], "target_width": 4096}
    t = make(lr_trajectory=traj)["train"]
    assert t["lr_transferred_interval"] == [1e-3, 4e-3]
    # the launch interval carries the rules' exponents too: wider than the transferred one × the
    # factor on both sides (tests/test_launch.py: zero-width rules give that interval back)
    lo, hi = t["lr_interval"]
    assert lo < 1e-3 * t["lr_factor"] and hi > 4e-3 * t["lr_factor"] and lo < t["lr"] < hi
    assert {"width", "horizon", "batch"} <= set(t["lr_interval_parts"])
    assert t["lr_trajectory"]["widths"] == [64, 128, 256]
    assert "trajectory over proxy widths [64, 128, 256]" in t["provenance"]["lr_transferred"]
    assert set(t["provenance"]) == set(t) - {"provenance"}
