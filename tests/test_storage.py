"""transfer.search.storage against a real PostgreSQL server (tests/conftest.py) and a journal file."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from transfer.core.errors import UserError
from transfer.search.storage import (
    ENV_URL,
    JOURNAL_FILE,
    close_orphaned_trials,
    fail_stale,
    make_storage,
    owner_alive,
    storage_description,
    this_process,
)

HEARTBEAT, GRACE = 1, 2  # seconds: a killed worker's trial is stale 2 s after its last beat

# One worker process: the same call a sweep worker makes, minus the training.
WORKER = """
import json, sys, time
from pathlib import Path
import optuna
from transfer.search.storage import make_storage, mark_owner

a = json.loads(sys.argv[1])
optuna.logging.set_verbosity(optuna.logging.WARNING)
storage = make_storage({"kind": "postgres", "url": a["url"], "heartbeat_interval": a["beat"],
                        "grace_period": a["grace"]}, run_dir=Path("."))
study = optuna.create_study(study_name=a["study"], storage=storage, load_if_exists=True,
                            sampler=optuna.samplers.RandomSampler(seed=a["seed"]))

def objective(trial):
    mark_owner(trial)
    x = trial.suggest_float("x", 0.0, 1.0)
    time.sleep(a["sleep"])
    return x

study.optimize(objective, n_trials=a["n"])
"""


def _worker(url: str, study: str, *, n: int, sleep: float, seed: int) -> subprocess.Popen:
    args = {"url": url, "study": study, "n": n, "sleep": sleep, "seed": seed,
            "beat": HEARTBEAT, "grace": GRACE}
    return subprocess.Popen([sys.executable, "-c", WORKER, json.dumps(args)],
                            stderr=subprocess.PIPE, text=True)


def _finish(p: subprocess.Popen, timeout: float = 60) -> None:
    _, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err


def _pg(url: str) -> dict:
    return {"kind": "postgres", "url": url, "heartbeat_interval": HEARTBEAT,
            "grace_period": GRACE}


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_postgres_binaries_present_when_required(postgres_bin: Path | None) -> None:
    if os.environ.get("CI_REQUIRE_POSTGRES") != "1":
        pytest.skip("CI_REQUIRE_POSTGRES is not set")
    assert postgres_bin is not None, "CI must install PostgreSQL: apt-get install -y postgresql"


def test_make_storage_creates_and_reloads_a_study(postgres_url: str, tmp_path: Path) -> None:
    study = optuna.create_study(study_name="reload", storage=make_storage(
        _pg(postgres_url), run_dir=tmp_path))
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    again = optuna.load_study(study_name="reload", storage=make_storage(
        _pg(postgres_url), run_dir=tmp_path))
    assert [t.state for t in again.trials] == [TrialState.COMPLETE] * 3
    assert list(tmp_path.iterdir()) == []  # postgres writes nothing into the run folder


def test_url_falls_back_to_environment(postgres_url: str, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_URL, postgres_url)
    storage = make_storage({"kind": "postgres", "url": None}, run_dir=tmp_path)
    optuna.create_study(study_name="from-env", storage=storage)
    assert "from-env" in optuna.get_all_study_names(storage)


def test_two_workers_on_a_fresh_database_share_one_study(make_postgres_db,
                                                         tmp_path: Path) -> None:
    # Both start at once on an empty database: they also race to create Optuna's tables.
    url = make_postgres_db("two_workers")
    a = _worker(url, "shared", n=5, sleep=0.05, seed=1)
    b = _worker(url, "shared", n=7, sleep=0.05, seed=2)
    _finish(a)
    _finish(b)
    study = optuna.load_study(study_name="shared", storage=make_storage(_pg(url),
                                                                       run_dir=tmp_path))
    assert sorted(t.number for t in study.trials) == list(range(12))
    assert all(t.state == TrialState.COMPLETE for t in study.trials)
    host = socket.gethostname()
    owners = Counter(t.user_attrs["owner"] for t in study.trials)
    assert owners == {f"{host}:{a.pid}": 5, f"{host}:{b.pid}": 7}


def test_killed_worker_trial_is_failed_and_retried(postgres_url: str, tmp_path: Path) -> None:
    study = optuna.create_study(study_name="killed", storage=make_storage(
        _pg(postgres_url), run_dir=tmp_path))
    doomed = _worker(postgres_url, "killed", n=1, sleep=120, seed=1)
    deadline = time.monotonic() + 30
    while not [t for t in study.get_trials(states=(TrialState.RUNNING,)) if "owner" in
               t.user_attrs]:
        assert time.monotonic() < deadline, "worker never started its trial"
        time.sleep(0.2)
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.wait()
    time.sleep(GRACE + 0.5)  # its last heartbeat is now older than the grace period
    survivor = _worker(postgres_url, "killed", n=3, sleep=0.05, seed=2)
    _finish(survivor)

    trials = study.get_trials()
    failed = [t for t in trials if t.state == TrialState.FAIL]
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(failed) == 1 and len(complete) == 3 and len(trials) == 4
    (retried,) = [t for t in complete if "failed_trial" in t.system_attrs]
    assert retried.system_attrs["failed_trial"] == failed[0].number
    assert retried.params == failed[0].params
    assert retried.user_attrs["owner"] == f"{socket.gethostname()}:{survivor.pid}"


@pytest.mark.parametrize("url", ["nonsense", "mysql://u@h/db", "postgres://u@h/db",
                                 "postgresql:///db", "postgresql://u:s3cret@h"])
def test_malformed_url_is_a_user_error(url: str, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"storage\.url") as e:
        make_storage({"kind": "postgres", "url": url}, run_dir=tmp_path)
    assert "\n" not in str(e.value) and "s3cret" not in str(e.value)


def test_unreachable_server_is_a_quick_user_error(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(UserError, match=f"cannot reach PostgreSQL at 127.0.0.1:{port}/db") as e:
        make_storage(_pg(f"postgresql://u:s3cret@127.0.0.1:{port}/db"), run_dir=tmp_path)
    assert time.monotonic() - start < 10
    assert "\n" not in str(e.value) and "s3cret" not in str(e.value)
    assert e.value.__cause__ is None and e.value.__suppress_context__  # no chained traceback
    assert list(tmp_path.iterdir()) == []


def test_missing_database_is_a_user_error(postgres_url: str, tmp_path: Path) -> None:
    url = postgres_url.rpartition("/")[0] + "/no_such_db"
    with pytest.raises(UserError, match="no_such_db"):
        make_storage(_pg(url), run_dir=tmp_path)


def test_grace_period_must_exceed_heartbeat(tmp_path: Path) -> None:
    conf = {"kind": "postgres", "url": "postgresql://u@h/db", "heartbeat_interval": 10,
            "grace_period": 10}
    with pytest.raises(UserError, match="storage.grace_period"):
        make_storage(conf, run_dir=tmp_path)


def test_description_masks_the_password(tmp_path: Path) -> None:
    text = storage_description({"kind": "postgres", "url": "postgresql://u:s3cret@h:5/db"})
    assert "s3cret" not in text and "u:***@h:5/db" in text
    assert storage_description({"kind": "journal"}, run_dir=tmp_path).endswith(JOURNAL_FILE)


def test_journal_is_readable_by_load_study(tmp_path: Path) -> None:
    storage = make_storage({"kind": "journal"}, run_dir=tmp_path)
    optuna.create_study(study_name="j", storage=storage).optimize(
        lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    reader = JournalStorage(JournalFileBackend(str(tmp_path / JOURNAL_FILE)))
    assert len(optuna.load_study(study_name="j", storage=reader).trials) == 3


def test_owner_alive() -> None:
    host = socket.gethostname()
    assert owner_alive(this_process())
    assert not owner_alive(f"{host}:{_dead_pid()}")
    assert owner_alive(f"another-{host}:{_dead_pid()}")  # cannot check: assume alive


def _running(study: optuna.Study, owner: str | None, *, system: bool = False) -> int:
    trial = study.ask()
    if owner is not None and system:
        study._storage.set_trial_system_attr(trial._trial_id, "owner", owner)
    elif owner is not None:
        trial.set_user_attr("owner", owner)
    return trial.number


def test_close_orphaned_trials_fails_only_dead_local_owners(tmp_path: Path) -> None:
    study = optuna.create_study(storage=make_storage({"kind": "journal"}, run_dir=tmp_path))
    host = socket.gethostname()
    dead = _running(study, f"{host}:{_dead_pid()}")
    dead_system = _running(study, f"{host}:{_dead_pid()}", system=True)
    mine = _running(study, this_process())
    remote = _running(study, f"another-{host}:1")
    unowned = _running(study, None)
    done = _running(study, f"{host}:{_dead_pid()}")
    study.tell(done, 1.0)

    assert close_orphaned_trials(study) == [dead, dead_system]
    states = {t.number: t.state for t in study.trials}
    assert states == {dead: TrialState.FAIL, dead_system: TrialState.FAIL,
                      mine: TrialState.RUNNING,
                      remote: TrialState.RUNNING, unowned: TrialState.RUNNING,
                      done: TrialState.COMPLETE}
    fail_stale(study)  # no heartbeats in a journal: changes nothing
    assert {t.number: t.state for t in study.trials} == states


def test_close_orphaned_trials_asks_alive_about_local_pids(tmp_path: Path) -> None:
    study = optuna.create_study(storage=make_storage({"kind": "journal"}, run_dir=tmp_path))
    mine = _running(study, this_process())
    _running(study, f"another-{socket.gethostname()}:1")
    asked = []
    assert close_orphaned_trials(study, alive=lambda pid: asked.append(pid) or False) == [mine]
    assert asked == [os.getpid()]
