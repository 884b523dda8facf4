"""transfer.search.branched: one constant-lr run branched into cooldowns gives, at every horizon,
the loss of a plain warmup-stable-decay run of that horizon."""

from __future__ import annotations

import math

import pytest

from proxies import TransformerFamily
from transfer.core.data import stdlib_corpus
from transfer.search.branched import branch_specs, train_branched
from transfer.search.trainer import TrainSpec, cooldown_start, lr_multiplier, train

FAMILY = TransformerFamily(n_layers=1, d_head=8, seq_len=32, base_width=32)
BATCH = 8
STEP_TOKENS = BATCH * FAMILY.seq_len
HORIZONS = [STEP_TOKENS * n for n in (10, 20, 40)]


def spec(**changes) -> TrainSpec:
    base = dict(width=32, lr=1e-2, batch_size=BATCH, tokens=HORIZONS[-1], schedule="wsd",
                cooldown_fraction=0.2, warmup_steps=3, min_lr_fraction=0.1, n_evals=2,
                eval_batches=2, eval_batch_size=8, seed=0)
    return TrainSpec(**{**base, **changes})


@pytest.fixture(scope="module")
def corpus():
    return stdlib_corpus()


@pytest.fixture(scope="module")
def branched(corpus):
    return train_branched(FAMILY, spec(), corpus, HORIZONS, device="cpu")


def test_each_branch_equals_a_plain_wsd_run_of_its_horizon(branched, corpus):
    for b, s in zip(branched.branches, branch_specs(spec(), HORIZONS, FAMILY.seq_len)):
        plain = train(FAMILY, s, corpus, device="cpu")
        assert b.tokens == s.tokens and b.steps == plain.steps
        assert not b.diverged and b.reason == "completed"
        assert b.val_loss == pytest.approx(plain.val_loss, rel=1e-6, abs=1e-7)


def test_the_branches_differ_and_cost_the_trunk_plus_the_cooldowns(branched):
    losses = [b.val_loss for b in branched.branches]
    assert losses[0] > losses[-1]  # 4× the tokens learns more
    assert len(set(losses)) == 3
    trunk = cooldown_start(40, 0.2)
    assert branched.steps == trunk + sum(n - cooldown_start(n, 0.2) for n in (10, 20, 40))
    assert branched.tokens == branched.steps * STEP_TOKENS


def test_a_horizon_off_whole_steps_keeps_its_asked_tokens_as_its_key(corpus):
    """37.5 steps' tokens train 37 steps, and the loss is found under the tokens asked for
    (the check's curves look it up by train.tokens × multiple)."""
    asked = [HORIZONS[0] + STEP_TOKENS // 2, HORIZONS[1]]
    out = train_branched(FAMILY, spec(), corpus, asked, device="cpu")
    assert list(out.losses()) == asked and out.branches[0].steps == 10
    assert all(math.isfinite(v) for v in out.losses().values())


def test_another_seed_gives_other_losses(branched, corpus):
    other = train_branched(FAMILY, spec(seed=1), corpus, HORIZONS[:1], device="cpu")
    assert other.branches[0].val_loss != branched.branches[0].val_loss


def test_a_diverging_trunk_diverges_every_horizon_it_had_not_reached(corpus):
    out = train_branched(FAMILY, spec(lr=30.0, warmup_steps=1), corpus, HORIZONS, device="cpu")
    assert all(b.diverged and b.val_loss == math.inf for b in out.branches)
    assert "diverged" in out.branches[-1].reason


def test_wsd_holds_the_peak_then_decays_linearly_to_the_floor():
    s = spec(warmup_steps=10, cooldown_fraction=0.2, min_lr_fraction=0.1)
    mults = [lr_multiplier(step, 100, s) for step in range(100)]
    assert mults[:10] == pytest.approx([(i + 1) / 10 for i in range(10)])
    assert mults[10:80] == [1.0] * 70  # stable until the last 20 %
    assert mults[79] == 1.0 > mults[80]
    assert mults[-1] == pytest.approx(0.1)
    steps = [a - b for a, b in zip(mults[80:], mults[81:])]
    assert steps == pytest.approx([steps[0]] * len(steps))  # linear


@pytest.mark.parametrize("changes, match", [
    (dict(schedule="cosine"), "schedule='wsd'"),
    (dict(warmup_steps=None), "warmup_steps"),
    (dict(warmup_steps=9), "runs into the cooldown"),
    (dict(cooldown_fraction=0.0), "cooldown_fraction must be in"),
])
def test_unbranchable_specs_raise_naming_the_field(changes, match, corpus):
    with pytest.raises(ValueError, match=match):
        train_branched(FAMILY, spec(**changes), corpus, HORIZONS, device="cpu")
