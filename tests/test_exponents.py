"""transfer.core.exponents: the lr rules' exponents as two-piece normals, their sources and the
spread they are widened to."""

from __future__ import annotations

import numpy as np
import pytest

from transfer.core import exponents
from transfer.core.exponents import ExponentDistribution, z_of
from transfer.core.scaling import step_law_fixed_batch_exponent


def dist(central=0.0, interval=(-1.0, 2.0)) -> ExponentDistribution:
    return ExponentDistribution(name="horizon", source="test", central=central, interval=interval)


def test_the_interval_is_the_central_90_percent_and_the_median_the_central_value():
    d = dist(0.0, (-1.0, 2.0))  # σ below 1/1.645, above 2/1.645
    assert d.quantile(0.05) == pytest.approx(-1.0) and d.quantile(0.95) == pytest.approx(2.0)
    assert d.quantile(0.5) == pytest.approx(0.0) and d.half_width() == pytest.approx(1.5)
    x = d.sample(np.random.default_rng(0), 400_000)
    assert np.quantile(x, [0.05, 0.5, 0.95]) == pytest.approx([-1.0, 0.0, 2.0], abs=0.02)


def test_a_symmetric_interval_is_a_normal():
    d = dist(0.5, (0.0, 1.0))
    below, above = d.sigmas
    assert below == pytest.approx(above) == pytest.approx(0.5 / 1.6448536, rel=1e-6)
    assert d.half_width(0.5) == pytest.approx(below * 0.6744898, rel=1e-6)


def test_the_same_seed_gives_the_same_draws_and_another_seed_others():
    d = dist()
    a, b = d.sample(np.random.default_rng(3), 10), d.sample(np.random.default_rng(3), 10)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, d.sample(np.random.default_rng(4), 10))


def test_a_central_value_outside_its_interval_is_refused():
    with pytest.raises(ValueError, match="must lie in its interval"):
        dist(3.0, (-1.0, 2.0))
    with pytest.raises(ValueError, match="form must be"):
        ExponentDistribution(name="batch", source="x", central=0.0, interval=(0, 0), form="uniform")


def test_a_measured_interval_at_another_confidence_is_restated_at_90_percent():
    # a normal with σ = 0.1: its 50 % interval is ±0.0674, its 90 % ±0.1645
    m = exponents.measured_exponent(-0.5, (-0.5 - 0.1 * z_of(0.5), -0.5 + 0.1 * z_of(0.5)), 0.5,
                                    label="m")
    assert m.interval == pytest.approx((-0.5 - 0.1 * z_of(0.9), -0.5 + 0.1 * z_of(0.9)))
    with pytest.raises(ValueError, match="finite estimate inside its interval"):
        exponents.measured_exponent(float("nan"), (-1.0, 1.0), 0.9, label="m")


def test_the_horizon_rule_is_the_median_and_the_published_values_its_spread():
    d = exponents.horizon_exponent_distribution("bjorck", 0.32)
    assert d.central == -0.32
    assert d.interval == pytest.approx((-0.70, step_law_fixed_batch_exponent()))
    assert {s.label[:15] for s in d.sources} == {"Bjorck et al. 2", "Step Law (Li et"}
    # another rule keeps the same spread but moves the median
    step = exponents.horizon_exponent_distribution("step_law")
    assert step.central == pytest.approx(0.0215) and step.interval == d.interval


def test_a_measurement_that_disagrees_widens_the_spread_and_a_used_one_replaces_it():
    m = exponents.measured_exponent(0.36, (0.18, 0.72), 0.9, label="the horizon check")
    wide = exponents.horizon_exponent_distribution("bjorck", measured=m)
    assert wide.central == -0.32 and wide.interval == pytest.approx((-0.70, 0.72))
    assert "this run's horizon check" in wide.source
    assert exponents.horizon_exponent_distribution("bjorck", measured=m, use_measured=True) is m
    with pytest.raises(ValueError, match="needs the measured exponent"):
        exponents.horizon_exponent_distribution("bjorck", use_measured=True)


def test_the_batch_rule_spans_no_rise_to_the_linear_rule():
    sqrt = exponents.batch_exponent("adam_sqrt")
    assert sqrt.central == 0.5 and sqrt.interval == (0.0, 1.0)
    assert sqrt.sigmas[0] == pytest.approx(sqrt.sigmas[1])  # a normal: σ = 0.5 / 1.645
    none = exponents.batch_exponent("none")
    assert none.central == 0.0 and none.interval == (0.0, 1.0)
    with pytest.raises(ValueError, match="use one of adam_sqrt, none"):
        exponents.batch_exponent("linear")
