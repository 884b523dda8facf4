"""transfer.core.rules: the μP rules, checked against what mup and the proxy family actually do."""

from __future__ import annotations

import pytest
import torch

from proxies import TransformerFamily
from transfer.core import rules
from transfer.search.trainer import TrainSpec, make_optimizer

TINY = dict(n_layers=1, d_head=8, seq_len=32, base_width=32)


def hidden_names(fam: TransformerFamily, width: int) -> set[str]:
    """Matrix-like parameters: both dimensions change with width (judged against the base model,
    independently of mup's own bookkeeping)."""
    base = {n: p.shape for n, p in fam.build(fam.base_width).named_parameters()}
    return {n for n, p in fam.build(width).named_parameters()
            if p.ndim == 2 and p.shape[0] != base[n][0] and p.shape[1] != base[n][1]}


def group_of(opt: torch.optim.Optimizer) -> dict[int, dict]:
    return {id(p): g for g in opt.param_groups for p in g["params"]}


def test_muadamw_learning_rates_follow_hidden_and_vector_rules():
    fam, width, lr = TransformerFamily(**TINY), 128, 3e-3
    model = fam.build(width)
    opt = make_optimizer(model, TrainSpec(width=width, lr=lr), "mup")
    groups, hidden = group_of(opt), hidden_names(fam, width)
    mult = rules.width_mult(width, fam.base_width)
    assert mult != 1 and hidden  # the check would be vacuous otherwise
    for name, p in model.named_parameters():
        expected = rules.hidden_lr(lr, mult) if name in hidden else rules.vector_lr(lr)
        assert groups[id(p)]["lr"] == pytest.approx(expected), name


def test_muadamw_weight_decay_follows_hidden_and_vector_rules():
    fam, width, wd = TransformerFamily(**TINY), 128, 0.1
    model = fam.build(width)
    opt = make_optimizer(model, TrainSpec(width=width, lr=1e-3, weight_decay=wd), "mup")
    groups, hidden = group_of(opt), hidden_names(fam, width)
    mult = rules.width_mult(width, fam.base_width)
    for name, p in model.named_parameters():
        if p.ndim < 2:  # the trainer never decays norm gains
            assert groups[id(p)]["weight_decay"] == 0.0, name
            continue
        expected = (rules.hidden_weight_decay(wd, mult) if name in hidden
                    else rules.vector_weight_decay(wd))
        assert groups[id(p)]["weight_decay"] == pytest.approx(expected), name


def test_hidden_lr_times_weight_decay_is_width_independent():
    # AdamW shrinks weights by lr·wd per step; μP keeps that factor fixed across widths.
    products = {rules.hidden_lr(1e-3, m) * rules.hidden_weight_decay(0.1, m) for m in (1, 2, 8)}
    assert max(products) == pytest.approx(min(products))


def test_hidden_init_std_follows_the_rule_at_a_large_width():
    fam = TransformerFamily(**TINY, init_std=0.05)
    width = 1024  # 32× the base: millions of entries per matrix, so the empirical σ is tight
    base = dict(fam.build(fam.base_width).named_parameters())
    hidden = hidden_names(fam, width) - {"blocks.0.attn.q.weight"}  # zero-initialised query
    assert hidden
    for name, p in fam.build(width).named_parameters():
        if name in hidden:
            fanin_mult = p.shape[1] / base[name].shape[1]
            expected = rules.hidden_init_std(fam.init_std, fanin_mult)
            assert p.std().item() == pytest.approx(expected, rel=0.02), name


def test_embedding_init_std_is_constant_across_widths():
    fam = TransformerFamily(**TINY, init_std=0.05)
    for width in (32, 512):
        std = fam.build(width).tok_emb.weight.std().item()
        assert std == pytest.approx(rules.embedding_init_std(fam.init_std), rel=0.05)


def test_zero_init_query_and_readout_start_at_zero():
    model = TransformerFamily(**TINY).build(64)
    assert not model.blocks[0].attn.q.weight.any()
    assert not model.readout.weight.any()


@pytest.mark.parametrize("parametrization", ["mup", "sp"])
def test_model_scales_come_from_the_rules(parametrization):
    fam = TransformerFamily(**TINY, parametrization=parametrization, attn_mult=2.0, output_mult=3.0)
    width = 128
    model = fam.build(width)
    mult = rules.width_mult(width, fam.base_width)
    assert model.readout.logit_scale == pytest.approx(
        rules.logits_scale(fam.output_mult, mult, parametrization))
    assert model.blocks[0].attn.scale == pytest.approx(
        rules.attn_scale(fam.attn_mult, fam.d_head, parametrization))


def test_mup_rules_are_the_identity_at_base_width():
    lr, std, wd = 1e-3, 0.02, 0.1
    assert rules.hidden_lr(lr, 1.0) == rules.vector_lr(lr) == lr
    assert rules.hidden_init_std(std, 1.0) == std
    assert rules.hidden_weight_decay(wd, 1.0) == wd
    assert rules.logits_scale(2.0, 1.0, "mup") == rules.logits_scale(2.0, 1.0, "sp")


# ---- depth (CompleteP, Dey et al. 2025, Table 1) ---------------------------------------------
@pytest.mark.parametrize("alpha", [0.5, 1.0])
def test_depth_rules_follow_table_1(alpha):
    m_l = rules.depth_mult(32, 2)
    assert m_l == 16
    assert rules.residual_mult(m_l, alpha) == pytest.approx(16 ** -alpha)  # (L_base / L)^α
    assert rules.hidden_depth_lr_factor(m_l, alpha) == pytest.approx(16 ** (alpha - 1))
    assert rules.block_vector_lr_factor(m_l, alpha) == pytest.approx(16 ** (alpha - 1))
    assert rules.matrix_eps(1e-8, 4.0, m_l, alpha) == pytest.approx(1e-8 / 4 * 16 ** -alpha)
    assert rules.vector_eps(1e-8, m_l, alpha) == pytest.approx(1e-8 * 16 ** -alpha)


def test_completep_keeps_the_lr_and_only_scales_the_branches():
    # α = 1: "only the first code block is required" (nanoGPT-mup, completep README)
    assert rules.hidden_depth_lr_factor(8.0, 1.0) == rules.block_vector_lr_factor(8.0, 1.0) == 1
    assert rules.residual_mult(8.0, 1.0) == 1 / 8


def test_alpha_zero_is_width_only_mup_at_every_depth():
    for m_l in (0.5, 1.0, 16.0):
        assert rules.residual_mult(m_l, 0.0) == 1.0
        assert rules.hidden_depth_lr_factor(m_l, 0.0) == rules.block_vector_lr_factor(m_l, 0) == 1
        assert rules.matrix_eps(1e-8, 4.0, m_l, 0.0) == rules.matrix_eps(1e-8, 4.0)
        assert rules.vector_eps(1e-8, m_l, 0.0) == 1e-8


def test_depth_rules_are_the_identity_at_base_depth():
    for alpha in (0.0, 0.5, 1.0):
        m_l = rules.depth_mult(4, 4)
        assert rules.residual_mult(m_l, alpha) == rules.hidden_depth_lr_factor(m_l, alpha) == 1
        assert rules.eps_depth_factor(m_l, alpha) == 1
