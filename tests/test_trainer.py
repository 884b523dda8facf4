"""transfer.search.trainer: reproducible, honest proxy training."""

from __future__ import annotations

import math

import pytest
import torch

from proxies import TransformerFamily
from transfer.core.data import stdlib_corpus
from transfer.search.trainer import TrainSpec, lr_multiplier, train

FAMILY = TransformerFamily(n_layers=1, d_head=8, seq_len=32, base_width=32)
STEPS = 12


def spec(**changes) -> TrainSpec:
    base = dict(width=32, lr=1e-2, batch_size=8, tokens=8 * FAMILY.seq_len * STEPS, n_evals=2,
                eval_batches=2, eval_batch_size=8)
    return TrainSpec(**{**base, **changes})


@pytest.fixture(scope="module")
def corpus():
    return stdlib_corpus()


@pytest.fixture(scope="module")
def run(corpus):
    """One ordinary run, shared by the tests that only inspect its result."""
    state = torch.random.get_rng_state()
    result = train(FAMILY, spec(seed=0), corpus, device="cpu")
    return result, state


def test_same_seed_gives_an_identical_loss_curve(run, corpus):
    again = train(FAMILY, spec(seed=0), corpus, device="cpu")
    assert again.train_losses == run[0].train_losses
    assert again.curve == run[0].curve


def test_another_seed_gives_a_different_loss_curve(run, corpus):
    other = train(FAMILY, spec(seed=1), corpus, device="cpu")
    assert other.train_losses != run[0].train_losses


def test_training_leaves_the_global_rng_untouched(run):
    assert torch.equal(torch.random.get_rng_state(), run[1])


def test_training_learns_something(run):
    # Zero-initialised logits start at the uniform loss ln(vocab); a dozen steps beat it.
    result = run[0]
    assert result.train_losses[0] == pytest.approx(math.log(FAMILY.vocab_size), rel=1e-4)
    assert result.val_loss < math.log(FAMILY.vocab_size)


def test_result_accounts_for_every_step_and_evaluation(run):
    result = run[0]
    assert not result.diverged and not result.stopped and result.reason == "completed"
    assert result.steps == STEPS == len(result.train_losses)
    assert result.tokens == STEPS * 8 * FAMILY.seq_len
    assert [s for s, _ in result.curve] == [STEPS // 2, STEPS]
    assert result.val_loss == result.curve[-1][1]
    assert result.flops == pytest.approx(FAMILY.flops_per_token(32) * result.tokens)


def test_absurd_learning_rate_is_reported_as_diverged_not_raised(corpus):
    result = train(FAMILY, spec(lr=10.0, warmup_fraction=0.0), corpus, device="cpu")
    assert result.diverged
    assert "diverged" in result.reason
    assert result.val_loss == math.inf
    assert math.isfinite(result.last_finite_loss)
    assert result.steps < STEPS


def test_report_returning_true_stops_training_as_pruned(corpus):
    seen = []

    def report(index: int, loss: float) -> bool:
        seen.append((index, loss))
        return True

    result = train(FAMILY, spec(), corpus, device="cpu", report=report)
    assert result.stopped and not result.diverged
    assert "pruner" in result.reason
    assert result.val_loss == math.inf
    assert len(seen) == 1 and result.steps == STEPS // 2


@pytest.mark.parametrize("schedule", ["cosine", "linear"])
def test_lr_multiplier_warms_up_linearly_then_decays_to_the_floor(schedule):
    s = spec(warmup_fraction=0.1, schedule=schedule, min_lr_fraction=0.1)
    total = 100
    mults = [lr_multiplier(step, total, s) for step in range(total)]
    warmup = mults[:10]
    assert all(0 < m <= 1 for m in warmup)
    assert warmup == pytest.approx([(i + 1) / 10 for i in range(10)])  # linear from 0 to 1
    decay = mults[10:]
    assert decay[0] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(decay, decay[1:]))  # never increases after warmup
    assert decay[-1] == pytest.approx(0.1, abs=0.02)  # ends near min_lr_fraction


def test_cosine_is_halfway_at_mid_decay_and_linear_is_too():
    total, floor = 101, 0.2
    for schedule in ("cosine", "linear"):
        s = spec(warmup_fraction=0.0, schedule=schedule, min_lr_fraction=floor)
        assert lr_multiplier(50, total, s) == pytest.approx(floor + (1 - floor) * 0.5, rel=0.02)


def test_without_warmup_training_starts_at_full_learning_rate():
    assert lr_multiplier(0, 100, spec(warmup_fraction=0.0)) == 1.0


@pytest.mark.parametrize("changes, match", [
    (dict(tokens=10), "raise the token budget"),
    (dict(schedule="step"), "schedule must be one of"),
    (dict(lr=0.0), "lr must be > 0"),
    (dict(warmup_fraction=1.0), "use a fraction below 1"),
])
def test_untrainable_spec_raises_value_error_naming_the_field(changes, match, corpus):
    with pytest.raises(ValueError, match=match):
        train(FAMILY, spec(**changes), corpus, device="cpu")
