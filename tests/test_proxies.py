"""proxies.transformer: the μP/SP transformer family."""

from __future__ import annotations

import math

import mup
import pytest
import torch
import torch.nn.functional as F

from proxies import TransformerFamily
from transfer.core import rules
from transfer.search.trainer import TrainSpec, make_optimizer

# d_head=16 makes the SP attention multiplier below exact in floating point (1/4 / 4 = 1/16).
TINY = dict(n_layers=1, d_head=16, seq_len=32, base_width=32)


def tokens(fam: TransformerFamily, batch: int = 2, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, fam.vocab_size, (batch, fam.seq_len), generator=gen)  # (B, T)


def mup_and_matching_sp(**changes) -> tuple[TransformerFamily, TransformerFamily]:
    """A μP family and the SP family that coincides with it at base width: SP's attention
    multiplier is chosen so both use the same attention scale (μP 1/d_head, SP 1/sqrt(d_head))."""
    mu = TransformerFamily(**TINY, parametrization="mup", **changes)
    sp_attn_mult = mu.attn_mult / math.sqrt(mu.d_head)
    sp = mu.replace(parametrization="sp", attn_mult=sp_attn_mult)
    assert rules.attn_scale(sp.attn_mult, sp.d_head, "sp") == rules.attn_scale(
        mu.attn_mult, mu.d_head, "mup")
    return mu, sp


def one_adam_step(model, fam, x) -> torch.Tensor:
    """One AdamW step (MuAdamW for μP) on next-token loss; returns the logits after it."""
    opt = make_optimizer(model, TrainSpec(width=model.width, lr=1e-2), fam.parametrization)
    logits = model(x[:, :-1])  # (B, T-1, V)
    F.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten()).backward()
    opt.step()
    with torch.no_grad():
        return model(x[:, :-1])


# Non-zero readout/query init so the comparison is not between two all-zero outputs.
EQUALITY_CASES = [dict(), dict(readout_zero_init=False, zero_init_query=False),
                  dict(readout_zero_init=False, tied_embeddings=True, kv_group=2)]


@pytest.mark.parametrize("changes", EQUALITY_CASES, ids=["default", "nonzero-init", "tied-gqa"])
def test_mup_equals_sp_at_base_width_forward(changes):
    mu, sp = mup_and_matching_sp(**changes)
    x = tokens(mu)
    with torch.no_grad():
        torch.testing.assert_close(mu.build(mu.base_width)(x), sp.build(sp.base_width)(x))


@pytest.mark.parametrize("changes", EQUALITY_CASES, ids=["default", "nonzero-init", "tied-gqa"])
def test_mup_equals_sp_at_base_width_after_first_optimizer_step(changes):
    mu, sp = mup_and_matching_sp(**changes)
    mu_model, sp_model = mu.build(mu.base_width), sp.build(sp.base_width)
    x = tokens(mu)
    torch.testing.assert_close(one_adam_step(mu_model, mu, x), one_adam_step(sp_model, sp, x))
    for (name, p), q in zip(mu_model.named_parameters(), sp_model.parameters()):
        torch.testing.assert_close(p, q, msg=lambda m, name=name: f"{name}: {m}")


def test_mup_differs_from_sp_away_from_base_width():
    # The equality above is not vacuous: at twice the base width the two parametrizations differ.
    mu, sp = mup_and_matching_sp(readout_zero_init=False)
    x = tokens(mu)
    width = 2 * mu.base_width
    assert not torch.allclose(one_adam_step(mu.build(width), mu, x),
                              one_adam_step(sp.build(width), sp, x))


VARIANTS = [dict(kv_group=2), dict(tied_embeddings=True), dict(positions="learned"),
            dict(norm="layernorm", mlp="gelu")]


@pytest.mark.parametrize("parametrization", ["mup", "sp"])
@pytest.mark.parametrize("changes", VARIANTS, ids=["gqa", "tied", "learned-pos", "ln-gelu"])
def test_variants_build_train_and_produce_finite_logits(changes, parametrization):
    fam = TransformerFamily(**TINY, parametrization=parametrization, **changes)
    model = fam.build(2 * fam.base_width)
    x = tokens(fam)
    after = one_adam_step(model, fam, x)
    assert after.shape == (x.shape[0], fam.seq_len - 1, fam.vocab_size)
    assert torch.isfinite(after).all()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())


def test_tied_embeddings_share_one_tensor():
    for parametrization in ("mup", "sp"):
        model = TransformerFamily(**TINY, tied_embeddings=True,
                                  parametrization=parametrization).build(64)
        assert model.readout.weight is model.tok_emb.weight


@pytest.mark.parametrize("width", [32, 64, 128])
def test_heads_grow_with_width_at_fixed_head_dim_and_other_ratios_are_kept(width):
    fam = TransformerFamily(**{**TINY, "n_layers": 2}, kv_group=2, ffn_ratio=3.0)
    model = fam.build(width)
    assert len(model.blocks) == fam.n_layers
    for block in model.blocks:
        assert block.attn.d_head == fam.d_head
        assert block.attn.n_heads == width // fam.d_head
        assert block.attn.n_heads == fam.kv_group * block.attn.n_kv
        assert block.mlp.up.out_features == round(fam.ffn_ratio * width)


@pytest.mark.parametrize("changes, width, fix", [
    (dict(), 40, "use a multiple of 16"),
    (dict(kv_group=2), 48, "multiple of 32"),  # 3 heads cannot share kv heads in pairs
])
def test_bad_width_raises_value_error_naming_the_fix(changes, width, fix):
    fam = TransformerFamily(**TINY, **changes)
    with pytest.raises(ValueError, match=fix):
        fam.build(width)


def test_bad_base_width_is_rejected_at_construction():
    with pytest.raises(ValueError, match="proxy.base_width=24.*multiple of 16"):
        TransformerFamily(**{**TINY, "base_width": 24})


@pytest.mark.parametrize("field, value", [("norm", "batchnorm"), ("parametrization", "ntk")])
def test_unknown_choice_lists_the_valid_ones(field, value):
    with pytest.raises(ValueError, match=f"proxy.{field} must be one of"):
        TransformerFamily(**TINY, **{field: value})


def test_same_seed_same_weights_other_seed_different_and_global_rng_untouched():
    fam = TransformerFamily(**TINY, zero_init_query=False)
    state = torch.random.get_rng_state()
    a, b, c = fam.build(64, seed=1), fam.build(64, seed=1), fam.build(64, seed=2)
    assert torch.equal(torch.random.get_rng_state(), state)
    for p, q, r in zip(a.parameters(), b.parameters(), c.parameters()):
        assert torch.equal(p, q)
        if p.ndim == 2 and p.abs().sum() > 0:
            assert not torch.equal(p, r)


def test_saved_base_shapes_reproduce_the_family_infshapes(tmp_path):
    fam = TransformerFamily(**TINY)
    path = tmp_path / "tiny.bsh"
    fam.save_base_shapes(path)
    model = fam.build(128)
    reloaded = mup.set_base_shapes(fam._skeleton(128), str(path), rescale_params=False)
    for (name, p), q in zip(model.named_parameters(), reloaded.parameters()):
        assert p.infshape.width_mult() == q.infshape.width_mult(), name
        assert p.infshape.ninf() == q.infshape.ninf(), name


def test_flops_per_token_grow_with_width_and_cover_the_matmul_params():
    fam = TransformerFamily(**TINY)
    widths = [32, 64, 128]
    flops = [fam.flops_per_token(w) for w in widths]
    assert flops == sorted(flops) and len(set(flops)) == len(flops)
    for w, f in zip(widths, flops):  # at least 6 FLOPs per non-embedding parameter
        assert f >= 6 * (fam.n_params(w) - fam.vocab_size * w)


def test_rope_theta_and_norm_eps_are_the_targets():
    fam = TransformerFamily(rope_theta=500000.0, norm_eps=1e-5)
    model = fam.build(64)
    assert model.blocks[0].norm1.eps == 1e-5 and model.norm.eps == 1e-5
    # the slowest rotary frequency at position 1 is 1 / θ^((d_head-2)/d_head)
    slowest = float(model.rope_sin[1, -1])  # sin x ≈ x for this small angle
    assert slowest == pytest.approx(500000.0 ** -(14 / 16), rel=1e-3)
    default = TransformerFamily().build(64)
    assert not torch.allclose(default.rope_cos, model.rope_cos)


def test_plan_passes_the_targets_rope_theta_and_norm_eps():
    from helpers_sweep import compose_cfg

    from transfer.search.family import plan_proxies

    d3 = plan_proxies(compose_cfg(["model=3b"])).derived
    d7 = plan_proxies(compose_cfg(["model=7b"])).derived
    assert (d3["rope_theta"], d3["norm_eps"]) == (500000.0, 1e-5)  # Llama 3.2
    assert (d7["rope_theta"], d7["norm_eps"]) == (10000.0, 1e-5)  # Llama 2
