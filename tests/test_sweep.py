"""`python -m transfer.sweep` end to end: outputs, stages, resume after SIGKILL, workers, bad input.

Driven through `transfer.cli.sweep.sweep(cfg)` with composed configs and throwaway archives; a real
process only where one is needed (Hydra's own CLI error, a SIGKILL mid-stage).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pandas as pd
import pytest
import torch
import yaml
from helpers_sweep import (
    FINISHED,
    TINY,
    add_archived_run,
    compose_cfg,
    journal,
    n_finished,
    only_run,
    snapshot,
    stage_trials,
)
from optuna.trial import TrialState

from transfer.cli.sweep import sweep
from transfer.core.config import TUNABLE
from transfer.core.errors import EXIT_OK, EXIT_USER_ERROR, verdict_exit_code
from transfer.search import default_hparams, study_name, training
from transfer.search.storage import OWNER_ATTR, this_process

ORDER = ["lr", "batch_size", "warmup"]
TRIALS = {"lr": 3, "batch_size": 2, "warmup": 2}
SMOKE = [*TINY, *(f"stages.stage.{s}.trials={n}" for s, n in TRIALS.items()),
         "validation.coord_widths=[16,32]", "validation.coord_steps=2"]
NO_VALIDATION = [*TINY, "validation.enabled=false"]


# One torch thread: these models are too small to gain from two, and on shared cores a second
# spinning thread slows a trial down up to fifty-fold.
ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1"}


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """One thread here; and `workers=N` sets torch's thread count for the caller: restore it."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def run(overrides: list[str], archive: Path) -> int:
    return sweep(compose_cfg([*overrides, f"archive_dir={archive}"]))


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


# ---- smoke end to end ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> tuple[int, Path]:
    """One smoke sweep with validation, shared by the tests that read its outputs."""
    archive = tmp_path_factory.mktemp("smoke") / "sweeps"
    code = run(SMOKE, archive)
    return code, only_run(archive)


def test_the_readme_plumbing_check_cannot_tell(tmp_path):
    """`python -m transfer.sweep model=tiny budget=smoke`, as the README gives it: one seed and
    a curvature S/N under 3 cannot carry a rejection; it ends inconclusive (exit 4), and the
    reasons name what is missing (it ended REJECTED, exit 3, before issue 35)."""
    archive = tmp_path / "sweeps"
    code = sweep(compose_cfg(["model=tiny", "budget=smoke", f"archive_dir={archive}"]))
    verdict = json.loads((only_run(archive) / "validation.json").read_text())
    assert (code, verdict["outcome"], verdict["rejected_because"]) == (4, "inconclusive", [])
    assert any("seed" in r for r in verdict["inconclusive_because"])


def test_smoke_exit_code_is_the_verdict(smoke):
    code, run_dir = smoke
    verdict = json.loads((run_dir / "validation.json").read_text())
    target = yaml.safe_load((run_dir / "target.yaml").read_text())
    assert code == verdict_exit_code(verdict["outcome"])
    # budget=smoke never validates, and with its one seed it cannot reject on the lr curves
    # either (issue 35: a rejection needs the evidence a pass needs); the coordinate check is
    # its own measurement (here 16 → 32 wide, 2 steps) and may still reject
    assert verdict["outcome"] in ("inconclusive", "rejected") and code in (4, 3)
    assert all(r.startswith("coordinate check failed") for r in verdict["rejected_because"])
    assert target["provenance"]["validated"] is False
    assert target["provenance"]["verdict"]["outcome"] == verdict["outcome"]
    assert target["provenance"]["lr"]["tuned_by_stages"] > 0
    if "interval" in target["provenance"]["lr"]:  # what the emitted interval accounts for
        assert target["provenance"]["lr"]["interval_spans"].startswith("width")


def test_smoke_writes_every_output(smoke):
    _, run_dir = smoke
    for f in ("config.yaml", "study.journal", "trials.csv", "validation.json", "cost.json",
              "target.yaml", "report.md"):
        assert (run_dir / f).is_file() and (run_dir / f).stat().st_size > 0, f
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["model"]["name"] == "tiny" and config["budget"] == "smoke"
    assert {s: config["stages"]["stage"][s]["trials"] for s in ORDER} == TRIALS
    verdict = json.loads((run_dir / "validation.json").read_text())
    assert {"passed", "widths", "drift_log2", "loss_gap", "coord_check", "reasons"} <= set(verdict)
    assert verdict["widths"] == [32, 64]
    cost = json.loads((run_dir / "cost.json").read_text())
    assert {"target", "tuning", "saved_gpu_hours", "stages"} <= set(cost)
    assert [s["name"] for s in cost["stages"]] == ORDER
    # the host that measured its seconds: a CPU model, the cores this process may use
    assert isinstance(cost["host"]["cpu"], str) and cost["host"]["cpu"].strip()
    assert 1 <= cost["host"]["cores"] <= (os.cpu_count() or 1)
    assert run_dir.name in (run_dir / "report.md").read_text()


def test_smoke_trials_csv_has_one_row_per_trial(smoke):
    _, run_dir = smoke
    df = pd.read_csv(run_dir / "trials.csv")
    assert {"stage", "number", "width", "state", "value", "seconds", "tokens", "flops",
            *TUNABLE} <= set(df.columns)
    assert not df.duplicated(["stage", "number"]).any()
    studies = stage_trials(run_dir, ORDER)
    studies["validation"] = optuna.load_study(study_name=f"{run_dir.name}:validation",
                                              storage=journal(run_dir)).get_trials()
    expected = {(s, t.number, t.state.name) for s, ts in studies.items() for t in ts}
    assert set(zip(df.stage, df.number, df.state)) == expected and len(df) == len(expected)
    copied = {(s, t.number) for s, ts in studies.items() for t in ts
              if "copied_from_trial" in t.user_attrs}  # a later stage's incumbent: not retrained
    done = df[df.state.isin(["COMPLETE", "PRUNED"])]
    trained = done[[(s, n) not in copied for s, n in zip(done.stage, done.number)]]
    assert (trained.tokens > 0).all() and (trained.flops > 0).all()
    assert (trained.seconds > 0).all()
    assert (done.tokens[~done.index.isin(trained.index)] == 0).all()
    assert done[list(TUNABLE)].notna().all().all()  # every parameter of every finished trial


def test_smoke_each_stage_is_one_study_with_exact_count(smoke):
    _, run_dir = smoke
    names = set(optuna.get_all_study_names(journal(run_dir)))
    assert names == {f"{run_dir.name}:{i:02d}-{s}" for i, s in enumerate(ORDER)} | {
        f"{run_dir.name}:validation"}
    trials = stage_trials(run_dir, ORDER)
    assert {s: n_finished(ts) for s, ts in trials.items()} == TRIALS
    assert all(t.state in FINISHED for ts in trials.values() for t in ts)


def test_smoke_each_stage_freezes_previous_winners(smoke):
    """Stage k trains the defaults overwritten by the winners of stages 0..k-1, plus its own
    search; its first trial is exactly that incumbent."""
    _, run_dir = smoke
    trials = stage_trials(run_dir, ORDER)
    frozen = default_hparams(compose_cfg(SMOKE))
    for k, stage in enumerate(ORDER):
        for t in trials[stage]:
            assert t.user_attrs["hparams"] == frozen | t.params, (stage, t.number)
        if k > 0:
            first = min(trials[stage], key=lambda t: t.number)
            assert first.user_attrs.get("incumbent") is True
            assert first.user_attrs["hparams"] == frozen
        complete = [t for t in trials[stage] if t.state == TrialState.COMPLETE]
        frozen = frozen | min(complete, key=lambda t: (t.value, t.number)).params


def test_rerun_of_finished_run_trains_nothing(smoke):
    code, run_dir = smoke
    before = {s: [(t.number, t.state, t.params) for t in ts]
              for s, ts in stage_trials(run_dir, ORDER).items()}
    again = run(SMOKE, run_dir.parent)
    after = {s: [(t.number, t.state, t.params) for t in ts]
             for s, ts in stage_trials(run_dir, ORDER).items()}
    assert again == code and after == before
    assert only_run(run_dir.parent) == run_dir


# ---- divergence ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def diverged(tmp_path_factory):
    """A stage whose whole lr range diverges at once."""
    archive = tmp_path_factory.mktemp("diverge") / "sweeps"
    cfg = compose_cfg([*NO_VALIDATION, "stages.order=[lr]", "stages.stage.lr.trials=2",
                       "stages.stage.lr.params.lr.low=4.0", "stages.stage.lr.params.lr.high=16.0",
                       f"archive_dir={archive}"])
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = sweep(cfg)
    return code, err.getvalue(), only_run(archive)


def test_diverged_trial_is_pruned_with_last_finite_loss(diverged):
    _, _, run_dir = diverged
    trials = stage_trials(run_dir, ["lr"])["lr"]
    assert len(trials) == 2
    initial = math.log(256)  # zero-initialised readout: uniform over the byte vocabulary
    for t in trials:
        assert t.state == TrialState.PRUNED and t.user_attrs["diverged"] is True
        assert t.intermediate_values, "the last finite loss is reported for the pruner and TPE"
        last = t.intermediate_values[max(t.intermediate_values)]
        assert math.isfinite(last) and last <= 1.5 * initial + 1e-6  # below the divergence limit
        assert t.user_attrs["tokens"] < 5120  # stopped at once, not trained to the end


def test_stage_with_no_complete_trial_is_a_user_error(diverged):
    code, err, _ = diverged
    errors = [line for line in lines(err) if line.startswith("error:")]
    assert code == EXIT_USER_ERROR
    assert len(errors) == 1 and "stages.stage.lr.params" in errors[0]
    assert "Traceback" not in err


# ---- determinism --------------------------------------------------------------------------
DETERMINISM = [*NO_VALIDATION, "train.tokens=2560", "stages.order=[lr,warmup]",
               "stages.stage.lr.trials=3", "stages.stage.warmup.trials=2"]


def _params(archive: Path) -> dict[str, list[dict]]:
    trials = stage_trials(only_run(archive), ["lr", "warmup"])
    return {s: [t.params for t in sorted(ts, key=lambda t: t.number)] for s, ts in trials.items()}


def test_same_seed_same_trials_other_seed_other_trials(tmp_path):
    for sub, seed in (("a", 0), ("b", 0), ("c", 1)):
        assert run([*DETERMINISM, f"proxy.seed={seed}"], tmp_path / sub) == EXIT_OK
    a, b, c = (_params(tmp_path / sub) for sub in "abc")
    assert a == b
    assert [p["lr"] for p in a["lr"]] != [p["lr"] for p in c["lr"]]
    assert len({p["lr"] for p in a["lr"]}) == 3  # sampled, not one value repeated


# ---- bad input: exit 2, one line, archive untouched ---------------------------------------
BAD = [
    pytest.param(["proxy.validation_width=32"], "proxy.validation_width", id="widths-not-increasing"),
    pytest.param(["proxy.width=36", "proxy.validation_width=72"], "proxy.width=36",
                 id="width-not-multiple-of-head-dim"),
    pytest.param(["model.n_kv_heads=3"], "model.n_kv_heads", id="heads-vs-kv-heads"),
    pytest.param(["stages.stage.lr.params.lr.low=0.01", "stages.stage.lr.params.lr.high=0.01"],
                 "stages.stage.lr.params.lr", id="empty-range"),
    pytest.param(["stages.stage.lr.params.lr.low=0.1", "stages.stage.lr.params.lr.high=0.001"],
                 "stages.stage.lr.params.lr", id="inverted-range"),
    pytest.param(["stages.stage.batch_size.params.batch_size.choices=[]"],
                 "stages.stage.batch_size.params.batch_size.choices", id="empty-choices"),
    pytest.param(["train.warmup_fraction=1.0"], "train.warmup_fraction", id="warmup-ge-steps"),
    pytest.param(["stages.stage.warmup.params.warmup_fraction.high=1.0"],
                 "stages.stage.warmup.params.warmup_fraction.high", id="warmup-space-ge-steps"),
    pytest.param(["stages.stage.lr.trials=0"], "stages.stage.lr.trials", id="trials-zero"),
    pytest.param(["hydra.searchpath=[file://{tmp}]", "stages=typo"],
                 "stages.stage.lr.params.learning_rate", id="unknown-stage-parameter"),
    pytest.param(["archive_dir={tmp}/a-file/sweeps"], "archive_dir", id="archive-under-a-file"),
    pytest.param(["data=tokens", "data.path={tmp}/missing.npy", "data.vocab_size=256"],
                 "data.path", id="missing-token-file"),
    pytest.param(["data=tokens"], "data.path", id="no-token-file-given"),
    pytest.param(["data.root={tmp}/no-stdlib-here"], "data.root", id="missing-stdlib-root"),
    # each trained, or wrote the archive, before it failed (a traceback, or exit 2 too late)
    pytest.param(["validation.step_log2=0"], "validation.step_log2", id="step-zero"),
    pytest.param(["validation.tolerance_log2=-1"], "validation.tolerance_log2",
                 id="tolerance-negative"),
    pytest.param(["train.batch_size=0"], "train.batch_size", id="batch-zero"),
    pytest.param(["train.n_evals=0"], "train.n_evals", id="evals-zero"),
    pytest.param(["train.eval_batches=0"], "train.eval_batches", id="eval-batches-zero"),
    pytest.param(["validation.coord_widths=[16]"], "validation.coord_widths", id="coord-one"),
    pytest.param(["validation.enabled=true", "validation.coord_widths=[16,17]"],
                 "validation.coord_widths", id="coord-unbuildable"),
]


@pytest.fixture
def archive_with_a_run(tmp_path: Path) -> Path:
    archive = tmp_path / "sweeps"
    add_archived_run(archive)
    (tmp_path / "a-file").write_text("not a folder\n")
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages" / "typo.yaml").write_text(
        "order: [lr]\nstage:\n  lr:\n    trials: 2\n    params:\n"
        "      learning_rate: {type: float, low: 1.0e-3, high: 0.1, log: true}\n")
    return archive


@pytest.mark.parametrize(("overrides", "field"), BAD)
def test_bad_input_exits_2_with_one_line_and_archive_untouched(overrides, field, tmp_path,
                                                              archive_with_a_run, capsys):
    before = snapshot(tmp_path)
    cfg = compose_cfg([*NO_VALIDATION, f"archive_dir={archive_with_a_run}",
                       *(o.format(tmp=tmp_path) for o in overrides)])
    code = sweep(cfg)
    err = capsys.readouterr().err
    assert code == EXIT_USER_ERROR
    assert len(lines(err)) == 1 and lines(err)[0].startswith("error: "), err
    assert field in err and "Traceback" not in err
    assert snapshot(tmp_path) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only folders")
def test_read_only_archive_exits_2(tmp_path, archive_with_a_run, capsys):
    archive_with_a_run.chmod(0o555)
    try:
        before = snapshot(tmp_path)
        code = run(NO_VALIDATION, archive_with_a_run)
        after = snapshot(tmp_path)
    finally:
        archive_with_a_run.chmod(0o755)
    err = capsys.readouterr().err
    assert code == EXIT_USER_ERROR and len(lines(err)) == 1 and "archive_dir" in err
    assert after == before


def test_unknown_group_option_is_exit_2_and_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "transfer.cli.sweep", "model=nope",
                           f"archive_dir={tmp_path}/sweeps"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=ONE_THREAD)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "unknown model 'nope'; available: 1b, 3b, 7b, gemma2-2b, gemma3-4b, hf, llama3.2-3b, "
        "qwen2.5-3b, qwen3-4b, tiny (pass model=<one of them>)"]
    assert list(tmp_path.iterdir()) == []  # no archive, no Hydra outputs/


# ---- resume after SIGKILL -----------------------------------------------------------------
# 30 steps a trial: long enough that the poll below sees a trial RUNNING.
RESUME = [*NO_VALIDATION, "train.tokens=15360", "stages.stage.lr.trials=4",
          "stages.stage.batch_size.trials=1", "stages.stage.warmup.trials=1"]
RESUME_TRIALS = {"lr": 4, "batch_size": 1, "warmup": 1}


def _start(archive: Path, log: Path) -> subprocess.Popen:
    with log.open("a") as f:
        return subprocess.Popen([sys.executable, "-m", "transfer.cli.sweep", *RESUME,
                                 f"archive_dir={archive}"], cwd=archive.parent, stdout=f,
                                stderr=subprocess.STDOUT, env=ONE_THREAD)


def _first_stage(archive: Path) -> list:
    journals = list(archive.glob("*/study.journal"))
    if not journals:
        return []
    try:
        return stage_trials(journals[0].parent, ["lr"])["lr"]
    except KeyError:  # the study is not created yet
        return []


def _kill_mid_first_stage(archive: Path, log: Path):
    """SIGKILL the sweep once a first-stage trial finished and another one trains; return the
    trial the kill left RUNNING (None if the journal shows none: a trial ended just then)."""
    proc = _start(archive, log)
    deadline = time.monotonic() + 240
    while True:
        trials = _first_stage(archive)
        if n_finished(trials) >= 1 and any(t.state == TrialState.RUNNING and t.params
                                           for t in trials):
            os.kill(proc.pid, signal.SIGKILL)
            break
        assert proc.poll() is None, f"finished before it could be killed:\n{log.read_text()}"
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    proc.wait()  # reaped: its pid no longer answers
    running = [t for t in _first_stage(archive) if t.state == TrialState.RUNNING]
    assert len(running) <= 1, running
    return running[0] if running else None


def _describe(trials: list) -> str:
    return "; ".join(f"{t.number}:{t.state.name}:{t.params}:{t.user_attrs.get('retry_of')}"
                     for t in trials)


def test_resume_after_sigkill_mid_stage(tmp_path):
    log = tmp_path / "sweep.log"
    for attempt in range(3):  # the kill can land between two trials; then kill another run
        archive = tmp_path / f"sweeps{attempt}"
        dead = _kill_mid_first_stage(archive, log)
        if dead is not None:
            break
    assert dead is not None, log.read_text()
    run_dir = only_run(archive)
    kept = {t.number: (t.state, t.value, t.params) for t in stage_trials(run_dir, ["lr"])["lr"]
            if t.state in FINISHED}
    assert kept

    second = _start(archive, log)
    assert second.wait(timeout=300) == EXIT_OK, log.read_text()

    assert only_run(archive) == run_dir  # the same command continued the same run
    trials = stage_trials(run_dir, ORDER)
    lr = {t.number: t for t in trials["lr"]}
    why = _describe(trials["lr"])
    assert {s: n_finished(ts) for s, ts in trials.items()} == RESUME_TRIALS, why
    assert len(lr) == len(trials["lr"]), why  # no duplicate numbers
    finished = [tuple(sorted(t.params.items())) for t in lr.values() if t.state in FINISHED]
    assert len(set(finished)) == len(finished), why  # nothing trained twice
    for n, (state, value, params) in kept.items():  # finished trials kept as they were
        assert (lr[n].state, lr[n].value, lr[n].params) == (state, value, params), why
    assert lr[dead.number].state == TrialState.FAIL, why
    retries = [t for t in lr.values() if t.user_attrs.get("retry_of") == dead.number]
    assert len(retries) == 1 and retries[0].params == dead.params, why
    assert retries[0].state in FINISHED, why
    assert [t.state for t in lr.values()].count(TrialState.FAIL) == 1, why
    df = pd.read_csv(run_dir / "trials.csv")
    assert not df.duplicated(["stage", "number"]).any() and len(df) == sum(map(len,
                                                                              trials.values()))


# ---- two workers --------------------------------------------------------------------------
class _Hung(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: int):
    """Fail instead of hanging: a sweep that waits for a trial nobody runs never returns."""
    def hung(*_):
        raise _Hung(f"the sweep was still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _on_worker_trial(monkeypatch, action=None) -> list:
    """Hold this process's first training after the worker is spawned (the timing probes come
    before) until the spawned worker trains a first-stage trial
    (a spawned process needs seconds to import; alone, this process could finish first), then
    call `action(trial)` on it. The worker itself trains unpatched. Returns the seen trials."""
    real, me, seen = training.run_training, this_process(), []

    def gated(ctx, *args, **kwargs):
        if not mp.active_children():  # the timing probes, before the worker is spawned
            return real(ctx, *args, **kwargs)
        deadline = time.monotonic() + 180
        while not seen and time.monotonic() < deadline:
            study = optuna.load_study(study_name=study_name(ctx.run_name, 0, "lr"),
                                      storage=ctx.storage)
            theirs = [t for t in study.get_trials() if t.state == TrialState.RUNNING
                      and t.params and t.user_attrs.get(OWNER_ATTR, me) != me]
            if theirs:
                seen.append(theirs[0])
                if action:
                    action(theirs[0])
                break
            time.sleep(0.2)
        return real(ctx, *args, **kwargs)

    monkeypatch.setattr(training, "run_training", gated)
    return seen


def test_two_workers_exact_counts(tmp_path, monkeypatch):
    seen = _on_worker_trial(monkeypatch)
    counts = {"lr": 5, "batch_size": 3, "warmup": 3}
    with _deadline(150):
        code = run([*NO_VALIDATION, "workers=2",
                    *(f"stages.stage.{s}.trials={n}" for s, n in counts.items())],
                   tmp_path / "sweeps")
    assert code == EXIT_OK and seen
    trials = stage_trials(only_run(tmp_path / "sweeps"), ORDER)
    why = {s: _describe(ts) for s, ts in trials.items()}
    assert {s: n_finished(ts) for s, ts in trials.items()} == counts, why
    assert {s: len(ts) for s, ts in trials.items()} == counts, why  # nothing failed or extra
    owners = {t.user_attrs.get(OWNER_ATTR) for ts in trials.values() for t in ts}
    assert len(owners) == 2, owners


def test_local_worker_killed_mid_trial_is_rerun(tmp_path, monkeypatch):
    """`workers=2`, and the spawned worker is SIGKILLed while it trains: this process fails its
    trial, re-runs the same parameters and still finishes every stage with exact counts."""
    kill = lambda t: os.kill(int(t.user_attrs[OWNER_ATTR].rsplit(":", 1)[1]), signal.SIGKILL)
    seen = _on_worker_trial(monkeypatch, kill)
    with _deadline(150):
        code = run([*NO_VALIDATION, "workers=2", "stages.stage.lr.trials=4",
                    "stages.stage.batch_size.trials=1", "stages.stage.warmup.trials=1"],
                   tmp_path / "sweeps")
    assert code == EXIT_OK and seen
    lr = stage_trials(only_run(tmp_path / "sweeps"), ["lr"])["lr"]
    why = _describe(lr)
    assert n_finished(lr) == 4, why
    dead = next(t for t in lr if t.number == seen[0].number)
    assert dead.state == TrialState.FAIL, why
    retry = [t for t in lr if t.user_attrs.get("retry_of") == dead.number]
    assert len(retry) == 1 and retry[0].params == dead.params and retry[0].state in FINISHED, why
