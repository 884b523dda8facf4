"""Reuse of archived sweeps: same fingerprint → no retraining; partial → warm start."""

from __future__ import annotations

import json
import time
from pathlib import Path

import optuna
import pytest
import yaml

from transfer.archive import Archive
from transfer.cli.sweep import sweep
from transfer.core.compose import compose
from transfer.search import BudgetStop, training, trial
from transfer.search.storage import make_storage

# Small enough for CI: 1-layer proxies at widths 16 → 32, a few steps per trial.
SMALL = ["model=tiny", "budget=smoke", "proxy.width=16", "proxy.validation_width=32",
         "train.tokens=8192", "train.n_evals=2", "stages.stage.lr.trials=3",
         "stages.stage.batch_size.trials=2", "stages.stage.warmup.trials=1",
         "validation.coord_widths=[16,32]", "validation.coord_steps=2", "progress=off",
         "workers=1"]


def _cfg(archive: Path, *extra: str):
    return compose([*SMALL, f"archive_dir={archive}", *extra])


def _winners(run_dir: Path) -> dict:
    """The proxies' winners (target.yaml's train block is rebuilt per target by the rules)."""
    w = json.loads((run_dir / "run.json").read_text())["winners"]
    return {k: w[k] for k in ("lr", "batch_size", "warmup_fraction")}


def _trials(run_dir: Path, name: str, stage: str) -> list[optuna.trial.FrozenTrial]:
    storage = make_storage({"kind": "journal"}, run_dir=run_dir)
    return optuna.load_study(study_name=f"{name}:{stage}", storage=storage).get_trials()


@pytest.fixture(scope="module")
def archived(tmp_path_factory):
    """One finished sweep in an archive, shared by the tests that reuse it."""
    root = tmp_path_factory.mktemp("archive")
    t = time.perf_counter()
    code = sweep(_cfg(root, "name=a"))
    return root, code, time.perf_counter() - t, _winners(root / "a")


@pytest.fixture
def trainings(monkeypatch) -> list:
    """Every proxy training started during the test (trials, probes, the validation grid)."""
    calls = []
    real = training.run_training

    def counted(*args, **kwargs):
        calls.append(kwargs.get("width"))
        return real(*args, **kwargs)

    monkeypatch.setattr(training, "run_training", counted)
    return calls


def test_identical_run_trains_nothing_and_has_identical_winners(archived, trainings):
    """The speed-up itself (12-16× at this size) is a timing, measured in benchmarks; here:
    the re-run trains nothing at all."""
    root, first, _, winners = archived
    (root / "a" / "target.yaml").unlink()  # must be written again, identically
    second = sweep(_cfg(root, "name=a"))
    assert first == second and first in (3, 4)
    assert trainings == []
    assert _winners(root / "a") == winners
    assert len(_trials(root / "a", "a", "00-lr")) == 3  # nothing re-run


def test_other_target_same_proxies_reemits_without_training(archived, trainings):
    root, _, _, winners = archived
    # The proxies are derived from the target; pinning tiny's proxy shape makes them identical.
    same_proxies = ["proxy.ffn_ratio=4.0", "proxy.tied_embeddings=false", "proxy.kv_group=2"]
    assert sweep(_cfg(root, "name=for7b", "model=7b", *same_proxies)) in (3, 4)
    assert trainings == []
    runs = Archive(root).runs().set_index("name")
    assert runs.loc["a", "fingerprint"] == runs.loc["for7b", "fingerprint"]
    assert _winners(root / "for7b") == winners
    old = {t.number: t.params for t in _trials(root / "a", "a", "00-lr")}
    new = {t.number: t.params for t in _trials(root / "for7b", "for7b", "00-lr")}
    assert old == new
    target = yaml.safe_load((root / "for7b" / "target.yaml").read_text())
    assert target["model"]["d_model"] == 4096  # emitted for the new target


def test_reuse_off_trains_again(tmp_path):
    assert sweep(_cfg(tmp_path, "name=x")) in (3, 4)
    assert sweep(_cfg(tmp_path, "name=y", "reuse=off", "validation.enabled=false")) == 0
    old = _trials(tmp_path / "x", "x", "00-lr")
    new = _trials(tmp_path / "y", "y", "00-lr")
    assert min(t.datetime_start for t in new) > max(t.datetime_complete for t in old)


def test_partial_match_warm_starts(tmp_path, monkeypatch):
    calls = {"n": 0}
    real = trial.enforce_cap

    def stop_after_two(ctx):
        calls["n"] += 1
        if calls["n"] > 2:
            raise BudgetStop("stopped: test cap")
        real(ctx)

    monkeypatch.setattr(trial, "enforce_cap", stop_after_two)
    assert sweep(_cfg(tmp_path, "name=part")) == 2
    monkeypatch.setattr(trial, "enforce_cap", real)
    archived = [t for t in _trials(tmp_path / "part", "part", "00-lr")
                if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(archived) == 2
    resumed_at = time.time()
    assert sweep(_cfg(tmp_path, "name=warm")) in (3, 4)
    trials = _trials(tmp_path / "warm", "warm", "00-lr")
    finished = [t for t in trials if t.state.is_finished()]
    assert len(finished) == 3  # the stage's count, archived trials included
    copied = [t for t in finished if t.datetime_complete.timestamp() < resumed_at]
    assert [t.params for t in copied] == [t.params for t in archived]


def test_archived_config_is_data_not_code(archived):
    root = archived[0]
    cfg_file = root / "a" / "config.yaml"
    marker = root / "pwned"
    cfg = yaml.safe_load(cfg_file.read_text())
    cfg["proxy"]["builder"] = {"_target_": "os.system", "command": f"touch {marker}"}
    cfg_file.write_text(yaml.safe_dump(cfg))
    # same fingerprint as the archived run → reuse reads that run; nothing in it may execute
    assert sweep(_cfg(root, "name=again")) in (3, 4)
    assert not marker.exists()
    # the copy is on record, so that the ETA's history does not read its wall as a run's
    row = json.loads((root / "again" / "run.json").read_text())
    src = row["reused_from"]["run"]  # the latest archived run with this fingerprint
    runs = Archive(root).runs().set_index("name")
    assert src != "again" and runs.loc[src, "fingerprint"] == row["fingerprint"]
    assert row["reused_from"]["forced"] is False and row["reused_from"]["changed"] == []
    assert row["reused_from"]["trials"] > 0


def test_a_code_change_is_never_reused_silently(archived, trainings, monkeypatch, capsys):
    """Same config, other trainer code: a new run (its own fingerprint) that says in one line
    why it did not copy the archived trials; reuse=force copies them and records it."""
    root, _, _, _ = archived
    from transfer.archive import code_hashes
    from transfer.run import planner

    real = code_hashes()
    monkeypatch.setattr(planner, "code_hashes", lambda: dict(real, trainer="0" * 16))
    sweep(_cfg(root, "name=b", "progress=lines"))
    cap = capsys.readouterr()
    out = cap.out + cap.err
    assert "not reusing archived run '" in out and "trainer code changed" in out
    assert "reuse=force" in out and trainings  # trained afresh
    row_b = json.loads((root / "b" / "run.json").read_text())
    assert row_b["code"]["trainer"] == "0" * 16 and row_b["fingerprint"] != json.loads(
        (root / "a" / "run.json").read_text())["fingerprint"]
    trainings.clear()
    monkeypatch.setattr(planner, "code_hashes", lambda: dict(real, trainer="1" * 16))
    forced = sweep(_cfg(root, "reuse=force", "name=forced", "progress=lines"))
    cap = capsys.readouterr()
    out = cap.out + cap.err
    assert forced in (3, 4) and "reuse=force" in out
    row = json.loads((root / "forced" / "run.json").read_text())
    assert row["reused_from"] == {"run": "b", "forced": True, "changed": ["trainer"],
                                  "trials": row["reused_from"]["trials"]}
    assert row["reused_from"]["trials"] > 0


def test_a_run_finalized_by_another_live_process_is_reused_and_written(archived, tmp_path,
                                                                       trainings):
    """The archived run's finalize claim names its own writer (here: a process on another host,
    which always reads as alive). Copied with the trials, it made the new run's only worker wait
    for that writer: exit 0, no target.yaml. The claim is the old run's, not copied."""
    import shutil

    from transfer.search.storage import FINALIZE_CLAIM

    root = tmp_path / "sweeps"
    shutil.copytree(archived[0], root)
    storage = make_storage({"kind": "journal"}, run_dir=root / "a")
    claimed = 0
    for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        if FINALIZE_CLAIM in study.user_attrs:
            study.set_user_attr(FINALIZE_CLAIM, {"owner": "another-host:1", "time": 0.0,
                                                 "done": True})
            claimed += 1
    assert claimed
    assert sweep(_cfg(root, "name=elsewhere")) in (3, 4)
    assert trainings == [] and (root / "elsewhere" / "target.yaml").exists()
