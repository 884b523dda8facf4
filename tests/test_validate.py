"""`python -m transfer.validate`: is a user's model μP? Audit, probe, then the sweep's validator.

Two architectures unlike the built-in family (tests/models_for_validate.py): an MLP language
model and a parallel-block transformer, each in a μP and an audit-clean SP version. The μP
versions pass, the SP versions are rejected numerically, and the broken builders stop with
exit code 2 before anything is trained.

CI size (see `CI`): widths 32 → 128, 60 steps of 16 × 32 tokens, 5 grid points an octave apart
around each family's measured optimum, 2 seeds; one thread. The margins measured over five
seeds are in the docstrings of the tests that depend on them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import models_for_validate as models
import pandas as pd
import pytest
import torch
import yaml
from mup import MuReadout
from torch import nn

from proxies.custom import CustomFamily
from transfer.cli.validate import compose_config, run, validate_model
from transfer.core.audit import AuditFailed, audit
from transfer.core.errors import EXIT_OK, EXIT_REJECTED, EXIT_USER_ERROR, UserError
from transfer.run.planner import plan_custom

# Grid centres: each family's optimum at width 32 and this budget, measured (the lr stage is
# skipped: stages.stage.lr.trials=1 trains train.lr only). A sweep would centre on its lr stage.
LR = {"mlp": 0.08, "parallel": 0.05}
# CI size: 60 steps of 16 × 32 tokens; widths 32 → 128; 5 one-octave points × 2 seeds; the
# coordinate check after one update at four widths (SP's logits already grow ∝ width there,
# while later steps add seed noise to μP's attention outputs at these widths).
CI = ["budget=smoke", "proxy.width=32", "proxy.validation_width=128", "proxy.seq_len=32",
      "train.tokens=30720", "validation.points=5", "validation.seeds=2",
      "validation.step_log2=1.0", "validation.coord_widths=[32,64,128,256]",
      "validation.coord_steps=2", "validation.can_pass=true", "validation.min_points=4",
      "stages.stage.lr.trials=1", "progress=off", "device=cpu"]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """These models are too small to gain from a second thread; on shared cores it spins."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def lr_for(target: str) -> float:
    return LR[target.split("_")[0]] if target.split("_")[0] in LR else LR["mlp"]


def cfg_for(target: str, archive: Path, *extra: str):
    return compose_config([f"proxy.builder._target_=models_for_validate.{target}", *CI,
                           f"train.lr={lr_for(target)}", f"archive_dir={archive}", *extra])


def only_run(archive: Path) -> Path:
    runs = [p for p in archive.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def validated(tmp_path_factory, target: str) -> tuple[int, Path]:
    archive = tmp_path_factory.mktemp(target)
    code = run(cfg_for(target, archive))
    return code, only_run(archive)


# ---- the numeric verdict ------------------------------------------------------------------
@pytest.fixture(scope="module")
def mlp_mup(tmp_path_factory):
    return validated(tmp_path_factory, "mlp_mup")


@pytest.fixture(scope="module")
def mlp_sp(tmp_path_factory):
    return validated(tmp_path_factory, "mlp_sp")


@pytest.fixture(scope="module")
def parallel_mup(tmp_path_factory):
    """Through the Python entry point with the builder itself, not its dotted path."""
    archive = tmp_path_factory.mktemp("parallel_mup")
    code = validate_model(models.parallel_mup, overrides=[*CI, f"train.lr={LR['parallel']}",
                                                          f"archive_dir={archive}"])
    return code, only_run(archive)


@pytest.fixture(scope="module")
def parallel_sp(tmp_path_factory):
    return validated(tmp_path_factory, "parallel_sp")


def verdict(run_dir: Path) -> dict:
    return json.loads((run_dir / "validation.json").read_text())


@pytest.mark.parametrize("case", ["mlp_mup", "parallel_mup"])
def test_mup_versions_pass(case, request):
    """Measured at this size (proxy.seed 0, fresh validation seeds): MLP drift +0.14 with 90 %
    interval [+0.01, +0.27], parallel -0.02 [-0.21, +0.17]; gap ≤ 0.2 % at the interval's top;
    curvature S/N 19 and 10. Limits ±0.5 octave, 1 %, S/N 3, coordinate slope 0.25."""
    code, run_dir = request.getfixturevalue(case)
    v = verdict(run_dir)
    assert (code, v["outcome"], v["reasons"]) == (EXIT_OK, "passed", [])
    assert -0.5 <= v["drift_ci"][0] <= v["drift_ci"][1] <= 0.5 and v["coord_check"]["passed"]


@pytest.mark.parametrize("case", ["mlp_sp", "parallel_sp"])
def test_sp_versions_are_rejected(case, request):
    """The readout without 1/width shows in the logits: slope 0.85-0.95 in log2 l1 vs log2
    width (limit 0.25) over proxy.seed 0-4. The lr drift usually rejects too (MLP -0.58/-0.68/
    -0.17/-0.67/-0.50, parallel -0.75/-0.75/-0.82/-0.88/diverged), but not always at this size,
    so it is not asserted (measured with the current seeds: MLP -0.60 [-0.79, -0.42], parallel
    -0.60 [-0.77, -0.44]: straddling the tolerance, so "cannot tell" on the drift alone)."""
    code, run_dir = request.getfixturevalue(case)
    v = verdict(run_dir)
    assert (code, v["outcome"]) == (EXIT_REJECTED, "rejected")
    assert any("coordinate check failed" in r for r in v["reasons"])
    assert v["coord_check"]["logits_slope"] > 0.5  # SP logits grow ∝ width after one update


def test_result_is_archived_like_a_sweep(mlp_mup, mlp_sp):
    for (code, run_dir), status in ((mlp_mup, "finished"), (mlp_sp, "rejected")):
        row = json.loads((run_dir / "run.json").read_text())
        assert (row["status"], row["validated"]) == (status, code == EXIT_OK)
        assert row["model"].startswith("models_for_validate.mlp_")
        for f in ("config.yaml", "trials.csv", "validation.json", "report.md", "base_shapes.bsh",
                  "plots/lr_transfer.png", "plots/coord_check.png"):
            assert (run_dir / f).is_file(), f
        index = pd.read_csv(run_dir.parent / "index.csv")
        assert list(index["status"]) == [status]


def test_grid_is_centred_on_train_lr_when_the_lr_stage_has_one_trial(mlp_mup):
    _, run_dir = mlp_mup
    trials = pd.read_csv(run_dir / "trials.csv")
    lr = LR["mlp"]
    assert list(trials[trials.stage == "lr"]["lr"]) == [lr]
    grid = sorted(trials[trials.stage == "validation"]["lr"].unique())
    assert len(grid) == 5 and grid[2] == pytest.approx(lr, rel=1e-5)
    assert verdict(run_dir)["tuned_log2_lr"] == pytest.approx(math.log2(lr), abs=1e-6)


def test_config_and_base_shapes_record_the_builder(mlp_mup):
    _, run_dir = mlp_mup
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert cfg["proxy"]["builder"]["_target_"] == "models_for_validate.mlp_mup"
    assert cfg["stages"]["order"] == ["lr"]
    shapes = yaml.safe_load((run_dir / "base_shapes.bsh").read_text())
    assert shapes["hidden.0.weight"] == [32, 32] and shapes["readout.weight"] == [None, 32]
    assert shapes["tok.weight"] == [None, 32]


# ---- exit 2 before any training -----------------------------------------------------------
def test_plain_linear_readout_is_caught_by_the_audit_naming_the_layer(tmp_path, capsys):
    code = run(cfg_for("mlp_plain_readout", tmp_path / "archive"))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USER_ERROR
    assert len(err) == 2  # the headline, then one line per finding
    assert err[1].strip().startswith("readout.weight: plain nn.Linear readout 'readout'")
    assert "mup.MuReadout" in err[1]
    assert not (tmp_path / "archive").exists()  # nothing trained, nothing archived


@pytest.mark.parametrize("target, expected", [
    ("no_such_package.build", "does not import: ModuleNotFoundError"),
    ("models_for_validate.no_such_builder", "does not import"),
    ("models_for_validate.VOCAB", "names an object of type int, not a function"),
    ("models_for_validate.two_arguments", "cannot be called as build(width)"),
    ("models_for_validate.not_a_module", "returned a dict, not a torch.nn.Module"),
    ("models_for_validate.last_token_only", "returned shape (2, 256), expected (2, 32, 256)"),
])
def test_bad_builders_are_one_line_errors(target, expected, tmp_path, capsys):
    cfg = compose_config([f"proxy.builder._target_={target}", *CI,
                          f"archive_dir={tmp_path / 'archive'}"])
    code = run(cfg)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USER_ERROR
    assert len(err) == 1 and expected in err[0], err
    assert not (tmp_path / "archive").exists()


def test_missing_target_says_how_to_set_it(tmp_path, capsys):
    assert run(compose_config([*CI, f"archive_dir={tmp_path}"])) == EXIT_USER_ERROR
    assert "proxy.builder._target_=my_pkg.models.build" in capsys.readouterr().err


def test_the_built_in_family_is_pointed_to_proxy_custom(tmp_path, capsys):
    cfg = compose_config([*CI, f"archive_dir={tmp_path}", "proxy=default"])
    assert run(cfg) == EXIT_USER_ERROR
    assert "pass proxy=custom" in capsys.readouterr().err


def test_multiplier_overrides_are_refused(tmp_path):
    with pytest.raises(UserError, match="proxy.output_mult=2.0 has no effect with proxy=custom"):
        plan_custom(cfg_for("mlp_mup", tmp_path, "proxy.output_mult=2.0"))


def test_extra_builder_keys_are_keyword_arguments(tmp_path):
    plan = plan_custom(cfg_for("two_arguments", tmp_path, "+proxy.builder.depth=3"))
    assert "hidden.2.weight" in plan.proxies.derived["base_shapes"]


def test_plan_custom_touches_nothing_on_disk(tmp_path):
    plan = plan_custom(cfg_for("parallel_mup", tmp_path / "archive"))
    assert plan.proxies.family.parametrization == "mup"
    assert (plan.proxies.width, plan.proxies.validation_width) == (32, 128)
    assert not (tmp_path / "archive").exists()


# ---- the audit, unit by unit --------------------------------------------------------------
def names(findings) -> list[str]:
    return [f.name for f in findings]


@pytest.mark.parametrize("build", [models.mlp_mup, models.parallel_mup, models.mlp_sp])
def test_audit_is_clean_for_mup_shaped_models(build):
    assert audit(build, base_width=32, delta_width=64, vocab_size=256) == []


class Readout(nn.Module):
    """An embedding → `body` → MuReadout model for one audit case."""

    def __init__(self, width: int, body: nn.Module, fan_in: int | None = None):
        super().__init__()
        self.emb = nn.Embedding(256, width)
        self.body = body
        self.readout = MuReadout(fan_in or width, 256)


def test_audit_names_parameters_whose_names_change_with_width():
    def build(width):
        return Readout(width, nn.Sequential(*[nn.Linear(width, width) for _ in range(width // 32)]))

    found = audit(build, base_width=32, delta_width=64, vocab_size=256)
    assert found and all("different parameter names" in f.problem for f in found)
    assert "body.1.weight" in names(found)


def test_audit_rejects_three_width_dimensions():
    class Cube(Readout):
        def __init__(self, width):
            super().__init__(width, nn.Identity())
            self.mix = nn.Parameter(torch.zeros(width, width, width))

    found = audit(Cube, base_width=8, delta_width=16, vocab_size=256)
    assert names(found) == ["mix"] and "μP cannot classify" in found[0].problem


def test_audit_flags_a_hidden_size_that_does_not_change_with_width():
    def build(width):  # a hard-coded 64-wide bottleneck between width-sized layers
        return Readout(width, nn.Sequential(nn.Linear(width, 64), nn.Linear(64, width)))

    found = audit(build, base_width=32, delta_width=64, vocab_size=256)
    assert names(found) == ["body.0.weight"]
    assert "does not change with width" in found[0].problem


def test_audit_flags_a_hard_coded_base_width():
    class Fixed(Readout):
        def __init__(self, width):
            super().__init__(width, nn.Identity())
            self.gate = nn.Parameter(torch.ones(32, 32))  # written for width 32 only

    found = audit(Fixed, base_width=32, delta_width=64, vocab_size=256)
    assert names(found) == ["gate"] and "does not change with width" in found[0].problem
    assert audit(Fixed, base_width=48, delta_width=96, vocab_size=256) == []


def test_audit_flags_a_dimension_that_grows_out_of_step_with_width():
    def build(width):
        side = int(8 * width ** 0.5)  # ∝ sqrt(width)
        return Readout(width, nn.Sequential(nn.Linear(width, side, bias=False),
                                            nn.Linear(side, width, bias=False)))

    found = audit(build, base_width=16, delta_width=64, vocab_size=256)
    assert set(names(found)) == {"body.0.weight", "body.1.weight"}
    assert all("in proportion to width" in f.problem for f in found)


def test_audit_flags_a_model_without_any_mu_readout():
    class Tied(nn.Module):  # logits = F.linear(h, emb.weight): no layer μP can rescale
        def __init__(self, width):
            super().__init__()
            self.emb = nn.Embedding(256, width)

    found = audit(Tied, base_width=32, delta_width=64, vocab_size=256)
    assert names(found) == ["(model)"] and "MuSharedReadout" in found[0].fix


def test_audit_flags_a_mu_readout_fed_a_fixed_size():
    def build(width):
        return Readout(width, nn.Linear(width, 64), fan_in=64)

    found = audit(build, base_width=32, delta_width=64, vocab_size=256)
    assert "readout.weight" in names(found)
    assert any("1/width multiplier is always 1" in f.problem for f in found)


def test_audit_failed_lists_every_finding_on_its_own_line():
    def build(width):
        return nn.Sequential(nn.Embedding(256, width), nn.Linear(width, 256),
                             nn.Linear(width, 64))

    found = audit(build, base_width=32, delta_width=64, vocab_size=256)
    text = str(AuditFailed("my.build", found))
    assert len(found) == 2 and len(text.splitlines()) == 3
    assert "plain nn.Linear readout '1'" in text and "'2' takes the width-sized input" in text


# ---- the family ---------------------------------------------------------------------------
def family(build=models.mlp_mup, **kw) -> CustomFamily:
    args = dict(seq_len=32, vocab_size=256, base_width=32, target="test.build",
                fixed={"input_mult": 1.0})
    return CustomFamily(build, **{**args, **kw})


def test_build_is_seeded_and_leaves_the_global_rng_alone():
    fam = family()
    state = torch.random.get_rng_state()
    a, b, c = fam.build(64, seed=1), fam.build(64, seed=1), fam.build(64, seed=2)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(a.hidden[0].weight, b.hidden[0].weight)
    assert not torch.equal(a.hidden[0].weight, c.hidden[0].weight)


def test_build_sets_base_shapes_and_rescales_the_readout_to_constant_std():
    def build(width):  # non-zero readout init, so its σ can be measured
        return models.MLPLM(width, MuReadout(width, 256))

    fam = family(build)
    narrow, wide = fam.build(32), fam.build(512)
    assert wide.readout.weight.infshape.width_mult() == 16
    assert wide.hidden[0].weight.infshape.ninf() == 2
    # PyTorch's init shrinks σ by sqrt(16) = 4; set_base_shapes' rescale undoes it (μP).
    ratio = wide.readout.weight.std() / narrow.readout.weight.std()
    assert 0.9 < ratio < 1.1


def test_parametrization_follows_the_readout():
    assert family().parametrization == "mup"
    assert family(models.mlp_plain_readout).parametrization == "sp"


def test_replace_accepts_the_config_values_and_refuses_tuning():
    fam = family()
    assert fam.replace(input_mult=1.0) is fam
    with pytest.raises(UserError, match="input_mult=2.0 cannot be tuned"):
        fam.replace(input_mult=2.0)
    with pytest.raises(UserError, match="no hyperparameter 'attn_mult'"):
        fam.replace(attn_mult=1.0)


def test_flops_per_token_is_six_times_the_non_embedding_parameters():
    w = 64
    hidden, norm, readout = 2 * (w * w + w), 2 * w, 256 * w + 256  # not the two 256×w tables
    assert family().flops_per_token(w) == 6 * (hidden + norm + readout)


def test_check_width_names_the_field_when_the_builder_refuses():
    def build(width):
        if width % 16:
            raise ValueError("width must be a multiple of 16")
        return models.mlp_mup(width)

    fam = family(build)
    fam.check_width(48)
    with pytest.raises(ValueError, match="proxy.width=40: .*multiple of 16"):
        fam.check_width(40, field="proxy.width")


def test_a_builder_that_sets_its_own_base_shapes_keeps_them(tmp_path):
    from mup import set_base_shapes

    def build(width):  # the builder's own μP set-up, with base width 16
        return set_base_shapes(models.mlp_mup(width), models.mlp_mup(16),
                               delta=models.mlp_mup(24))

    fam = family(build)  # our base would be 32
    assert fam.build(64).hidden[0].weight.infshape.width_mult() == 4
    fam.save_base_shapes(tmp_path / "b.bsh")
    assert yaml.safe_load((tmp_path / "b.bsh").read_text())["hidden.0.weight"] == [16, 16]


def test_judge_rejects_a_wide_model_that_diverges_almost_everywhere():
    """Regression: an SP model that diverged at 3 of 5 points of the wide width crashed the
    shared-curvature fit (KeyError) instead of being rejected; seen with parallel_sp, seed 4."""
    from transfer.judge.curves import grid
    from transfer.judge.verdict import Limits, judge

    xs = grid(-4.3, 5, 1.0)
    curves = {w: [(x, [y, y + 0.01]) for x, y in zip(xs, losses)] for w, losses in
              ((32, [2.7, 2.6, 2.5, 2.6, 2.8]), (128, [2.5, 2.4] + [math.nan] * 3))}
    v = judge(curves, None, -4.3, Limits(fit_window=5), {"passed": True, "max_abs_slope": 0.1})
    assert v.outcome == "rejected"
    assert any("width 128: fewer than 3 grid points" in r for r in v.reasons)
