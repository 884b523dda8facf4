"""transfer.core.params: one classification read by the proxy's init, its optimizer and the emitter."""

from __future__ import annotations

import pytest
import torch
from mup import MuAdamW

from proxies import TransformerFamily
from transfer.core import params, rules
from transfer.outputs import apply, emit

WIDTH, BASE = 128, 32
# ffn_ratio 3 and kv_group 2 so the down-projection and k/v have their own shapes; α = ½ and
# m_L = 2 so every depth factor differs from 1.
FAM = dict(vocab_size=256, seq_len=32, n_layers=2, d_head=16, kv_group=2, ffn_ratio=3.0,
           base_width=BASE, init_std=0.05, depth_alpha=0.5, base_depth=1)
WINNERS = {"lr": 3e-3, "init_std": 0.05, "weight_decay": 0.1, "eps": 1e-8, "input_mult": 1.0,
           "output_mult": 1.0, "attn_mult": 1.0}


def target_like_proxy(fam: TransformerFamily, width: int) -> dict:
    """The target's model block with exactly the proxy's shapes at `width`."""
    return {"name": "proxy-shaped", "d_model": width, "n_layers": fam.n_layers,
            "n_heads": width // fam.d_head, "n_kv_heads": width // fam.d_head // fam.kv_group,
            "d_ff": fam.d_ff(width), "vocab_size": fam.vocab_size, "seq_len": fam.seq_len,
            "tied_embeddings": fam.tied_embeddings, "mlp": fam.mlp, "positions": fam.positions}


def emitted_groups(fam: TransformerFamily, width: int) -> list[dict]:
    m = target_like_proxy(fam, width)
    proxy = {"ffn_ratio": fam.ffn_ratio, "depth_alpha": fam.depth_alpha,
             "base_depth": fam.base_depth, "n_layers": fam.n_layers}
    mup = emit._mup_block(m, fam.base_width, WINNERS, fam.parametrization, proxy, fam.d_head)
    return emit.param_groups(m, mup, WINNERS, None, proxy)


@pytest.mark.parametrize("changes", [{}, {"tied_embeddings": True}, {"mlp": "gelu"},
                                     {"depth_alpha": 1.0}, {"depth_alpha": 0.0}],
                         ids=["swiglu", "tied", "gelu", "completep", "mup"])
def test_emitting_at_a_proxy_shape_gives_the_proxys_own_groups(changes):
    fam = TransformerFamily(**{**FAM, **changes})
    model = fam.build(WIDTH, seed=0)
    own = fam.param_groups(model, lr=WINNERS["lr"], weight_decay=WINNERS["weight_decay"],
                           eps=WINNERS["eps"])
    target = {"model": target_like_proxy(fam, WIDTH), "param_groups": emitted_groups(fam, WIDTH)}
    by_apply = {g["name"]: g for g in apply.param_groups(model, target)}
    assert sorted(g["name"] for g in own) == sorted(by_apply)
    for g in own:
        e = by_apply[g["name"]]
        assert {id(p) for p in g["params"]} == {id(p) for p in e["params"]}, g["name"]
        for k in ("lr", "weight_decay", "eps"):
            assert g[k] == pytest.approx(e[k], rel=1e-12), (g["name"], k)


def test_emitting_at_a_proxy_shape_gives_the_proxys_measured_init_sigma():
    fam = TransformerFamily(**FAM)
    model = fam.build(512, seed=0)  # wide enough that each group's sample σ is within 2 %
    target = {"model": target_like_proxy(fam, 512), "param_groups": emitted_groups(fam, 512)}
    members: dict[str, list[torch.Tensor]] = {}
    for a in apply.assign(model, target):
        if a.role != "attn_q":  # zero-initialised on both sides (checked below)
            members.setdefault(a.group["name"], []).append(a.param.detach().flatten())
        else:
            assert a.group["zero_init"] == ["attention q"] and not a.param.any()
    groups = {g["name"]: g for g in target["param_groups"]}
    for name, xs in members.items():
        x, want = torch.cat(xs), groups[name]["init_std"]
        if want is None:
            assert torch.all(x == 1), name  # "ones"
        elif want == 0:
            assert not x.any(), name
        else:
            assert x.std().item() == pytest.approx(want, rel=0.02), name


def test_the_down_projection_has_its_own_group_and_multiplier():
    fam = TransformerFamily(**FAM)
    classes = fam.param_classes(WIDTH)
    down = classes["blocks.0.mlp.down.weight"]
    assert down.kind == "hidden" and down.fan_in == fam.d_ff(WIDTH)
    assert down.width_mult == fam.d_ff(WIDTH) / fam.d_ff(BASE)
    names = params.group_names(classes)
    assert names[down.key] == "hidden_mlp_down"
    assert names[classes["blocks.0.attn.o.weight"].key] == "hidden_attn"
    assert classes["norm.weight"].depth_mult == 1.0  # the final norm is outside every block
    assert classes["blocks.1.norm2.weight"].depth_mult == 2.0


def test_at_alpha_zero_the_groups_are_muadamws():
    """Width-only μP is what MuAdamW does: lr and weight decay per parameter agree exactly."""
    fam = TransformerFamily(**{**FAM, "depth_alpha": 0.0, "n_layers": 3})
    model = fam.build(WIDTH)
    ours = {id(p): g for g in fam.param_groups(model, lr=1e-3, weight_decay=0.1)
            for p in g["params"]}
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    mu = MuAdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                 lr=1e-3)
    theirs = {id(p): g for g in mu.param_groups for p in g["params"]}
    for name, p in model.named_parameters():
        assert ours[id(p)]["lr"] == pytest.approx(theirs[id(p)]["lr"]), name
        assert ours[id(p)]["weight_decay"] == pytest.approx(theirs[id(p)]["weight_decay"]), name


def test_depth_factors_reach_the_optimizer_groups():
    fam = TransformerFamily(**{**FAM, "n_layers": 4})  # m_L = 4, α = ½
    groups = {g["name"]: g for g in fam.param_groups(fam.build(WIDTH), lr=1e-3, eps=1e-8)}
    mult = WIDTH / BASE
    assert groups["hidden_attn"]["lr"] == pytest.approx(1e-3 / mult * 4 ** -0.5)
    assert groups["hidden_attn"]["eps"] == pytest.approx(1e-8 / mult * 4 ** -0.5)
    assert groups["vector_block"]["lr"] == pytest.approx(1e-3 * 4 ** -0.5)
    assert groups["vector_final"]["lr"] == groups["embedding"]["lr"] == 1e-3
    assert groups["embedding"]["eps"] == pytest.approx(1e-8 / mult)


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0])
def test_the_residual_branches_carry_the_rule_multiplier(alpha):
    fam = TransformerFamily(**{**FAM, "depth_alpha": alpha, "n_layers": 4, "base_depth": 2,
                               "zero_init_query": False})
    model = fam.build(64)
    assert all(b.residual_mult == rules.residual_mult(2.0, alpha) for b in model.blocks)
    block, x = model.blocks[0], torch.randn(2, fam.seq_len, 64)
    with torch.no_grad():  # x + r·attn(norm1 x), then + r·mlp(norm2 ·): by hand
        h = x + block.residual_mult * block.attn(block.norm1(x), model.rope_cos, model.rope_sin)
        want = h + block.residual_mult * block.mlp(block.norm2(h))
        torch.testing.assert_close(block(x, model.rope_cos, model.rope_sin), want)


def test_sp_has_no_depth_rule():
    fam = TransformerFamily(**{**FAM, "parametrization": "sp", "n_layers": 4})
    assert fam.residual_mult == 1.0
    groups = fam.param_groups(fam.build(WIDTH), lr=1e-3)
    assert {g["lr"] for g in groups} == {1e-3}


def test_an_unknown_parameter_is_named():
    with pytest.raises(ValueError, match="'adapter.weight' has no μP role"):
        params.role_of("adapter.weight")
