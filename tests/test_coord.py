"""transfer.verdict.coord: the numeric coordinate check separates μP from SP."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
import torch
from mup import MuReadout, set_base_shapes
from torch import nn

from proxies import TransformerFamily
from transfer.core.data import stdlib_corpus
from transfer.judge.verdict import Limits, judge
from transfer.outputs.plots import plot_coord
from transfer.verdict import coord as coord_module
from transfer.verdict.coord import (
    FINAL_RESIDUAL,
    INCONCLUSIVE,
    LOGITS,
    PASSED,
    REJECTED,
    coord_check,
    coord_status,
    depth_coord_check,
    module_kind,
    slope_interval,
    slopes_at,
)

WIDTHS = [32, 64, 128, 256]
MAX_SLOPE = 0.25  # |d log2(l1) / d log2(width)|: 0.25 allows ×1.19 per doubling of width
SP_MIN_LOGITS_SLOPE = 0.4  # SP+Adam at a fixed lr: logits grow with width (0.49 over seeds 0-3)
TINY = dict(n_layers=1, d_head=8, seq_len=32, base_width=32)
SEEDS = 4  # an interval over seeds: one seed's check is inconclusive by construction


@pytest.fixture(scope="module")
def corpus():
    return stdlib_corpus()


@pytest.fixture(scope="module")
def mup_result(corpus):
    fam = TransformerFamily(**TINY, parametrization="mup")
    return coord_check(fam, widths=WIDTHS, corpus=corpus, steps=4, max_slope=MAX_SLOPE,
                       seeds=SEEDS)


@pytest.fixture(scope="module")
def sp_result(corpus):
    fam = TransformerFamily(**TINY, parametrization="sp")
    return coord_check(fam, widths=WIDTHS, corpus=corpus, steps=4, max_slope=MAX_SLOPE,
                       seeds=SEEDS)


def test_mup_activation_sizes_stay_flat_with_width(mup_result):
    assert mup_result.passed and mup_result.status == PASSED, mup_result.slopes
    assert mup_result.max_abs_slope <= mup_result.slope_ci[1] <= MAX_SLOPE
    assert abs(mup_result.logits_slope) <= MAX_SLOPE


def test_mup_check_covers_embedding_blocks_and_logits(mup_result):
    kinds = set(mup_result.slopes)
    assert {"tok_emb", "blocks.*", "blocks.*.mlp.up", "readout", LOGITS} <= kinds


def test_sp_logits_grow_with_width_at_a_fixed_learning_rate(sp_result):
    assert sp_result.logits_slope >= SP_MIN_LOGITS_SLOPE
    assert not sp_result.passed and sp_result.status == REJECTED
    assert sp_result.slope_ci[0] > MAX_SLOPE  # the whole interval above the limit


def test_check_leaves_the_global_rng_untouched(corpus):
    state = torch.random.get_rng_state()
    coord_check(TransformerFamily(**TINY), widths=[32, 64], corpus=corpus, steps=2)
    assert torch.equal(torch.random.get_rng_state(), state)


def test_to_dict_is_json_ready_and_agrees_with_the_fields(mup_result):
    d = json.loads(json.dumps(mup_result.to_dict()))
    assert set(d) == {"passed", "status", "max_abs_slope", "max_abs_slope_ci", "confidence",
                      "max_slope", "logits_slope", "slopes", "widths", "steps", "seeds", "axis"}
    assert d["widths"] == WIDTHS and d["steps"] == 4 and d["seeds"] == SEEDS
    assert d["status"] == PASSED and d["passed"] and d["confidence"] == 0.9
    assert d["max_abs_slope"] == max(abs(s) for s in d["slopes"].values())


def test_plot_writes_a_png(sp_result, tmp_path):
    path = plot_coord(sp_result, tmp_path / "coord" / "sp.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_module_kinds_merge_layers():
    assert module_kind("blocks.11.attn.q") == "blocks.*.attn.q"
    assert module_kind("blocks.0") == "blocks.*"
    assert module_kind("") == LOGITS
    assert module_kind("tok_emb") == "tok_emb"


@pytest.mark.parametrize("kwargs, match", [
    (dict(widths=[64]), "at least two distinct widths"),
    (dict(widths=[32, 64], steps=0), "steps must be >= 1"),
    (dict(widths=[32, 36]), "multiple of 8"),
    (dict(widths=[32, 64], seeds=0), "seeds must be >= 1"),
])
def test_bad_arguments_raise_value_error(kwargs, match, corpus):
    with pytest.raises(ValueError, match=match):
        coord_check(TransformerFamily(**TINY), corpus=corpus, **kwargs)


class _TinyLM(nn.Module):
    """A user-defined μP model: embedding -> one hidden matrix -> MuReadout.

    The readout starts at zero, as μP recommends: a random readout gives logits that shrink
    ∝ 1/sqrt(width) at init, a (harmless) negative slope the check would report.
    """

    def __init__(self, width: int, vocab: int):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.hidden = nn.Linear(width, width, bias=False)
        self.readout = MuReadout(width, vocab, bias=False, readout_zero_init=True)

    def forward(self, tokens):  # (B, T) -> (B, T, V)
        return self.readout(torch.relu(self.hidden(self.emb(tokens))))


@dataclass(frozen=True)
class _CustomFamily:
    """Only what coord_check needs: build(width, seed=), parametrization, seq_len, vocab_size."""

    parametrization: str = "mup"
    seq_len: int = 16
    vocab_size: int = 256
    base_width: int = 32

    def build(self, width: int, *, seed: int = 0) -> nn.Module:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = _TinyLM(width, self.vocab_size)
            base = _TinyLM(self.base_width, self.vocab_size)
            delta = _TinyLM(2 * self.base_width, self.vocab_size)
            return set_base_shapes(model, base, delta=delta)


def test_any_family_with_build_and_shape_fields_can_be_checked(corpus):
    result = coord_check(_CustomFamily(), widths=[32, 64, 128], corpus=corpus, steps=3,
                         seeds=SEEDS)
    assert {"emb", "hidden", "readout", LOGITS} <= set(result.slopes)
    assert result.passed, result.slopes


# ---- across depth (CompleteP, Dey et al. 2025, Fig. 7) ---------------------------------------
DEPTHS = [1, 2, 4, 8]


def depth_result(corpus, alpha: float):
    fam = TransformerFamily(**TINY, depth_alpha=alpha)
    return depth_coord_check(fam, depths=DEPTHS, width=32, corpus=corpus, steps=4,
                             max_slope=MAX_SLOPE, seeds=SEEDS)


def test_width_only_mup_grows_the_final_residual_with_depth(corpus):
    r = depth_result(corpus, 0.0)  # measured: slope ≈ 0.8 (the paper's Fig. 7: ≈ 1)
    assert r.slopes[FINAL_RESIDUAL] >= 0.5
    assert not r.passed and r.axis == "depth"


@pytest.mark.parametrize("alpha", [0.5, 1.0])
def test_depth_rules_keep_the_final_residual_flat(corpus, alpha):
    r = depth_result(corpus, alpha)  # measured: |slope| ≤ 0.18
    assert r.passed, r.slopes
    assert r.to_dict()["depths"] == DEPTHS


def test_depth_check_leaves_the_global_rng_untouched(corpus, tmp_path):
    state = torch.random.get_rng_state()
    r = depth_coord_check(TransformerFamily(**TINY), depths=[1, 2], width=32, corpus=corpus,
                          steps=2)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert plot_coord(r, tmp_path / "depth.png").read_bytes()[:4] == b"\x89PNG"


def test_seeds_average_the_activation_sizes_of_each_seed_before_the_fit(corpus):
    """seeds=3 is seeds 5, 6, 7 each as a one-seed check (its own init and batch), their l1
    averaged per module kind and width before the slope: the records are the three checks'."""
    fam = TransformerFamily(**TINY)
    kw = dict(widths=[32, 64, 128], corpus=corpus, steps=2)
    three = coord_check(fam, seed=5, seeds=3, **kw)
    ones = [coord_check(fam, seed=s, **kw) for s in (5, 6, 7)]
    assert three.seeds == 3 and sorted(three.df["seed"].unique()) == [5, 6, 7]
    for one in ones:
        np.testing.assert_allclose(  # each seed's records are its one-seed check's
            three.df[three.df["seed"] == one.df["seed"].iloc[0]]["l1"].to_numpy(),
            one.df["l1"].to_numpy(), rtol=1.3e-6)
    assert three.slopes == slopes_at(pd.concat([o.df for o in ones]), 2)
    assert ones[0].slopes != ones[1].slopes  # the seeds differ, so the average is not one of them


def test_depth_check_averages_seeds_too(corpus):
    fam = TransformerFamily(**TINY)
    kw = dict(depths=[1, 2, 4], width=32, corpus=corpus, steps=2)
    two = depth_coord_check(fam, seeds=2, **kw)
    one = depth_coord_check(fam, **kw)
    assert two.seeds == 2 and sorted(two.df["seed"].unique()) == [0, 1]
    np.testing.assert_allclose(two.df[two.df["seed"] == 0]["l1"].to_numpy(),
                               one.df["l1"].to_numpy(), rtol=1.3e-6)
    assert two.slopes != one.slopes


# ---- the check as a measurement: an interval over seeds, rejecting only above the limit ------
@pytest.mark.parametrize("ci, status", [
    ((0.05, 0.20), PASSED), ((0.30, 0.90), REJECTED), ((0.10, 0.40), INCONCLUSIVE),
    ((0.25, 0.26), INCONCLUSIVE), ((0.0, 0.25), PASSED),
    ((float("nan"), float("nan")), INCONCLUSIVE)])
def test_the_status_reads_the_whole_interval(ci, status):
    assert coord_status(ci, MAX_SLOPE) == status


def test_a_rejection_needs_three_sizes():
    """An interval wholly above the limit over two widths is one step between the smallest ones:
    it cannot tell, with the reason and the knob; over three it rejects; a pass needs no more."""
    above = (0.36, 1.46)
    assert coord_status(above, MAX_SLOPE, 2) == INCONCLUSIVE
    assert coord_status(above, MAX_SLOPE, 3) == REJECTED
    assert coord_status((0.05, 0.20), MAX_SLOPE, 2) == PASSED
    df = _records({s: {w: float(w) ** (0.8 + 0.01 * s) for w in (32, 64)} for s in range(4)})
    two = coord_module._result(df, 2, [32, 64], MAX_SLOPE, 4, "width", 0.9)
    assert two.slope_ci[0] > MAX_SLOPE and two.status == INCONCLUSIVE and not two.passed
    v = judge(_curves(-6.0), None, -6.0, Limits(min_curvature_snr=0.0), coord=two.to_dict())
    assert v.outcome == "inconclusive" and not v.rejected_because
    said = [r for r in v.inconclusive_because if r.startswith("coordinate check")]
    assert len(said) == 1 and "over 2 widths (32, 64), fewer than 3" in said[0], said
    assert "validation.coord_widths" in said[0]
    df3 = _records({s: {w: float(w) ** (0.8 + 0.01 * s) for w in (32, 64, 128)}
                    for s in range(4)})
    three = coord_module._result(df3, 2, [32, 64, 128], MAX_SLOPE, 4, "width", 0.9)
    assert three.status == REJECTED


def _records(l1_by_seed: dict[int, dict[int, float]]) -> pd.DataFrame:
    """get_coord_data-like records: one module ("h") and the logits, at step 2."""
    return pd.DataFrame([{"seed": s, "width": w, "module": m, "t": 2, "l1": v * k}
                         for s, by_w in l1_by_seed.items() for w, v in by_w.items()
                         for m, k in (("h", 1.0), ("", 1.0))])


def test_the_interval_spans_the_seeds_spread_and_holds_the_mean_slope():
    """Four seeds whose slopes are 0.1, 0.2, 0.3, 0.4: the mean curve's slope is inside the
    interval, which lies within the seeds' range; identical seeds give a zero-width one."""
    widths = [32, 64, 128, 256]
    seeds = {i: {w: float(w) ** b for w in widths} for i, b in enumerate([0.1, 0.2, 0.3, 0.4])}
    df = _records(seeds)
    lo, hi = slope_interval(df, 2)
    point = max(abs(v) for v in slopes_at(df, 2).values())
    assert 0.1 <= lo <= point <= hi <= 0.4 and hi - lo > 0.05
    same = _records({i: seeds[1] for i in range(4)})
    np.testing.assert_allclose(slope_interval(same, 2), (0.2, 0.2), atol=1e-9)
    assert all(np.isnan(slope_interval(_records({0: seeds[0]}), 2)))  # one seed: no interval


def _curves(opt: float, widths=(64, 128, 256), seeds=4):
    """Clean parabolas around `opt` at every width, a little seed noise."""
    rng = np.random.default_rng(0)
    xs = opt + np.arange(-3, 3.5, 0.5)
    return {w: [(float(x), list(3.0 + 0.05 * (x - opt) ** 2 + rng.normal(0, 2e-3, seeds)))
                for x in xs] for w in widths}


@pytest.mark.parametrize("coord, outcome, says", [
    ({"status": PASSED, "passed": True, "max_abs_slope": 0.1, "max_abs_slope_ci": [0.05, 0.2],
      "seeds": 8}, "passed", None),
    ({"status": INCONCLUSIVE, "passed": False, "max_abs_slope": 0.28,
      "max_abs_slope_ci": [0.12, 0.41], "seeds": 2}, "inconclusive", "straddles the limit"),
    ({"status": REJECTED, "passed": False, "max_abs_slope": 2.7,
      "max_abs_slope_ci": [2.4, 3.0], "seeds": 8}, "rejected", "coordinate check failed"),
    ({"passed": False, "max_abs_slope": 0.9}, "rejected", "coordinate check failed"),  # old
    ({"status": INCONCLUSIVE, "passed": False, "max_abs_slope": 0.3,
      "max_abs_slope_ci": [None, None], "seeds": 1}, "inconclusive", "no interval"),  # JSON
])
def test_the_verdict_rejects_only_on_an_interval_above_the_limit(coord, outcome, says):
    v = judge(_curves(-6.0), None, -6.0, Limits(min_curvature_snr=0.0), coord=coord)
    assert v.outcome == outcome, (v.rejected_because, v.inconclusive_because)
    if says:
        assert any(says in r for r in v.rejected_because + v.inconclusive_because)
