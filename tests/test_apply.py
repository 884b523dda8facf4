"""transfer.outputs.apply: the μP init and AdamW groups of target.yaml, on GraniteForCausalLM and on the
project's own family — where the proxy's own init and MuAdamW are the reference."""

from __future__ import annotations

import math

import pytest
import torch
from helpers_target import BASE_WIDTH, MODEL, WINNERS, group, small_target
from mup import MuAdamW
from torch import nn

from proxies import TransformerFamily
from transfer.outputs import apply, hf

HIDDEN_GROUPS = ("hidden_attn", "hidden_mlp_in", "hidden_mlp_down")
TOL = 0.05  # relative σ tolerance: ≥ 8k draws per group, so the standard error is < 1 %



def granite(transformers, target: dict, **overrides):
    return transformers.GraniteForCausalLM(hf.granite_config(target, **overrides))


def family(**changes) -> TransformerFamily:
    """The proxy family the small target was 'tuned' on, with the winners as its multipliers."""
    kw = {"vocab_size": 256, "seq_len": 32, "n_layers": 2, "d_head": 16, "kv_group": 2,
          "base_width": BASE_WIDTH, "init_std": WINNERS["init_std"],
          "input_mult": WINNERS["input_mult"], "output_mult": WINNERS["output_mult"],
          "attn_mult": WINNERS["attn_mult"]}
    return TransformerFamily(**{**kw, **changes})


def measured_std(model: nn.Module, target: dict, role_filter) -> float:
    xs = [a.param.detach().flatten() for a in apply.assign(model, target, strict=False)
          if role_filter(a.role)]
    return torch.cat(xs).std().item()


def covered_once(model: nn.Module, groups: list[dict]) -> None:
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)), "a parameter is in two groups"
    assert set(ids) == {id(p) for p in model.parameters()}, "a parameter is in no group"


# ---- init_ ------------------------------------------------------------------------------------
def test_granite_init_matches_target_sigma_per_group(transformers):
    t = small_target()
    model = apply.init_(granite(transformers, t), t, seed=1)
    for name in HIDDEN_GROUPS:  # each hidden group its own σ (its fan-in's)
        roles = apply.GROUP_ROLES[name] - {"attn_q"}
        assert measured_std(model, t, roles.__contains__) == pytest.approx(
            group(t, name)["init_std"], rel=TOL), name
    assert measured_std(model, t, {"embedding"}.__contains__) == pytest.approx(
        group(t, "embedding")["init_std"], rel=TOL)
    for layer in model.model.layers:  # zero_init: attention q, as on the proxy
        assert torch.count_nonzero(layer.self_attn.q_proj.weight) == 0
    assert torch.count_nonzero(model.lm_head.weight) == 0  # readout zero-init (untied)
    assert all(torch.all(n.weight == 1) for n in model.modules()
               if type(n).__name__ == "GraniteRMSNorm")


def test_reduced_granite_init_uses_target_values_when_not_strict(transformers):
    t = small_target()
    small = dict(hidden_size=64, intermediate_size=256, num_hidden_layers=1,
                 num_attention_heads=4, num_key_value_heads=2)
    with pytest.raises(ValueError, match="does not fit the target"):
        apply.init_(granite(transformers, t, **small), t)
    model = apply.init_(granite(transformers, t, **small), t, strict=False)
    assert measured_std(model, t, {"mlp_up", "mlp_gate"}.__contains__) == \
        pytest.approx(group(t, "hidden_mlp_in")["init_std"], rel=TOL)


def test_proxy_family_init_equals_the_proxys_own():
    """At the target width, target.yaml + init_ reproduce the family's μP init per group."""
    fam, t = family(), small_target()
    own = fam.build(MODEL["d_model"], seed=0)
    ours = apply.init_(fam.build(MODEL["d_model"], seed=0), t, seed=7)
    for roles in (("attn_k", "attn_v", "attn_o"), ("mlp_up", "mlp_gate", "mlp_down"),
                  ("embedding",)):
        assert measured_std(ours, t, set(roles).__contains__) == pytest.approx(
            measured_std(own, t, set(roles).__contains__), rel=TOL), roles
    for name, p in ours.named_parameters():
        if apply.role_of(name) in ("attn_q", "readout", "norm", "final_norm"):  # exact values
            torch.testing.assert_close(p, dict(own.named_parameters())[name], msg=name)


def test_init_is_deterministic_for_a_seed_and_leaves_global_rng_alone():
    t = small_target()
    fam = family()
    state = torch.get_rng_state()
    a = apply.init_(fam.build(128), t, seed=3)
    b = apply.init_(fam.build(128), t, seed=3)
    c = apply.init_(fam.build(128), t, seed=4)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a.blocks[0].mlp.up.weight, b.blocks[0].mlp.up.weight)
    assert not torch.equal(a.blocks[0].mlp.up.weight, c.blocks[0].mlp.up.weight)


def test_tied_embeddings_keep_the_embedding_sigma(transformers):
    t = small_target(tied_embeddings=True)
    model = apply.init_(granite(transformers, t), t)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert model.lm_head.weight.std().item() == pytest.approx(group(t, "embedding")["init_std"],
                                                              rel=TOL)


# ---- param_groups -----------------------------------------------------------------------------
@pytest.mark.parametrize("tied", [False, True])
def test_granite_groups_cover_every_parameter_once(transformers, tied):
    t = small_target(tied_embeddings=tied)
    model = granite(transformers, t)
    groups = apply.param_groups(model, t)
    covered_once(model, groups)
    names = [g["name"] for g in groups]
    assert names == [*HIDDEN_GROUPS, "embedding", *([] if tied else ["readout"]),
                     "vector_block", "vector_final"]
    by = {g["name"]: g for g in groups}
    assert len(by["hidden_attn"]["params"]) == 4 * 2  # q k v o × 2 layers
    assert len(by["hidden_mlp_in"]["params"]) == 2 * 2  # gate up × 2 layers
    assert len(by["vector_block"]["params"]) == 2 * 2  # two pre-branch norms × 2 layers
    assert by["vector_block"]["weight_decay"] == 0.0
    for g in groups:
        assert g["lr"] == group(t, g["name"])["lr"]
        assert g["weight_decay"] == group(t, g["name"])["weight_decay"]


def test_proxy_groups_match_muadamw_per_parameter():
    """The emitted groups give every proxy parameter MuAdamW's lr relative to the vector lr
    (hidden: / width_mult); the absolute lr may carry the emitter's horizon/batch factor."""
    t, fam = small_target(), family()
    model = fam.build(MODEL["d_model"])
    groups = apply.param_groups(model, t)
    covered_once(model, groups)
    base = group(t, "vector_final")["lr"]
    ours = {id(p): g["lr"] / base for g in groups for p in g["params"]}
    mu = MuAdamW(model.parameters(), lr=WINNERS["lr"])
    theirs = {id(p): g["lr"] / WINNERS["lr"] for g in mu.param_groups for p in g["params"]}
    for name, p in model.named_parameters():
        assert ours[id(p)] == pytest.approx(theirs[id(p)]), name
    assert math.isclose(group(t, "hidden_attn")["lr"], base / 4)  # width_mult 128 / 32


def test_groups_drive_a_real_adamw_step(transformers):
    t = small_target()
    for g in t["param_groups"]:
        g["eps"] = 1e-12 if g["name"].startswith("hidden") else 1e-8
    model = apply.init_(granite(transformers, t), t)
    opt = torch.optim.AdamW(apply.param_groups(model, t), betas=(0.9, 0.95))
    assert [g["eps"] for g in opt.param_groups] == [1e-12] * 3 + [1e-8] * 4
    tokens = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    before = model.lm_head.weight.detach().clone()
    model(tokens, labels=tokens).loss.backward()
    opt.step()
    assert not torch.equal(model.lm_head.weight, before)  # the zero-init readout learns


def test_a_split_hidden_group_takes_its_matrices():
    t = small_target()  # as an older file: one `hidden` group, and a split-off down-projection
    hidden = group(t, "hidden_attn")
    t["param_groups"] = [{**hidden, "name": "hidden"}, {**hidden, "name": "hidden_mlp_down",
                                                         "lr": 1e-4}] + [
        g for g in t["param_groups"] if not g["name"].startswith("hidden")]
    model = family().build(128)
    by = {g["name"]: g for g in apply.param_groups(model, t)}
    assert {id(p) for p in by["hidden_mlp_down"]["params"]} == {
        id(b.mlp.down.weight) for b in model.blocks}
    assert len(by["hidden"]["params"]) == 6 * 2
    covered_once(model, list(by.values()))


# ---- errors that name the problem ---------------------------------------------------------
def test_unknown_parameter_is_named():
    model = family().build(128)
    model.adapter = nn.Linear(128, 128)
    with pytest.raises(ValueError, match=r"'adapter\.weight' has no μP role"):
        apply.param_groups(model, small_target())


def test_unknown_group_name_is_refused():
    t = small_target()
    group(t, "vector_final")["name"] = "gains"
    with pytest.raises(ValueError, match="'gains' is unknown.*known: hidden"):
        apply.param_groups(family().build(128), t)


def test_two_equally_specific_groups_for_one_role_are_refused():
    t = small_target()
    t["param_groups"].append({**group(t, "vector_block"), "name": "vector_block"})
    with pytest.raises(ValueError, match="both claim"):
        apply.param_groups(family().build(128), t)


def test_a_parameter_without_a_group_is_refused():
    t = small_target()
    t["param_groups"] = [g for g in t["param_groups"] if g["name"] != "vector_block"]
    with pytest.raises(ValueError, match="in no target.yaml param group"):
        apply.param_groups(family().build(128), t)


def test_tying_mismatch_is_refused():
    with pytest.raises(ValueError, match="untied but target.yaml's are tied"):
        apply.param_groups(family().build(128), small_target(tied_embeddings=True))


def test_unknown_zero_init_entry_is_refused():
    t = small_target()
    group(t, "hidden_attn")["zero_init"] = ["attention k"]
    with pytest.raises(ValueError, match="zero_init entry 'attention k'"):
        apply.init_(family().build(128), t)
