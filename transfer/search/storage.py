"""Where stage studies live: a journal file in the run folder, or PostgreSQL for many workers.

`make_storage` turns `storage.*` into an Optuna storage and turns every way a user can get the
database wrong into one-line `UserError`s. Trials record their owner process ("host:pid") so
that a resumed run can close trials left RUNNING by a dead process; PostgreSQL does that by
itself through heartbeats and re-queues the lost trial.
"""

from __future__ import annotations

import os
import socket
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import optuna
from optuna.exceptions import ExperimentalWarning
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from transfer.core.config import StorageConf
from transfer.core.errors import UserError

ENV_URL = "TRANSFER_STORAGE_URL"
JOURNAL_FILE = "study.journal"
OWNER_ATTR = "owner"
MAX_RETRY = 3  # a trial that kills its worker three times is a bug, not bad luck
CONNECT_TIMEOUT_S = 5  # fail fast on a firewalled host instead of hanging for minutes
URL_FORM = "postgresql://user[:password]@host[:port]/database"
_SCHEMES = ("postgresql", "postgresql+psycopg2", "postgresql+psycopg")

# Optuna 4.9 renamed the heartbeat retry callback and its argument; the old names warn and
# go away in 6.0, the new ones do not exist before 4.9.
if hasattr(optuna.storages, "RetryHeartbeatStaleTrialCallback"):
    _RetryCallback = optuna.storages.RetryHeartbeatStaleTrialCallback
    _CALLBACK_ARG = "heartbeat_stale_trial_callback"
else:
    _RetryCallback = optuna.storages.RetryFailedTrialCallback
    _CALLBACK_ARG = "failed_trial_callback"


def _get(storage: Mapping[str, Any] | StorageConf, name: str) -> Any:
    if isinstance(storage, Mapping):
        return storage.get(name, getattr(StorageConf, name))
    return getattr(storage, name)


def storage_url(storage: Mapping[str, Any] | StorageConf) -> str:
    """`storage.url`, else $TRANSFER_STORAGE_URL, checked to be a usable PostgreSQL URL."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    raw, source = _get(storage, "url"), "storage.url"
    if not raw:
        raw, source = os.environ.get(ENV_URL), f"storage.url (from ${ENV_URL})"
    if not raw:
        raise UserError(f"storage=postgres needs a database: set storage.url={URL_FORM} "
                        f"or export {ENV_URL}")
    try:
        url = make_url(raw)
    except (ArgumentError, ValueError):
        url = None
    if url is None or url.drivername not in _SCHEMES or not url.host or not url.database:
        # An unparsable URL may still hold a password: show only what follows the '@'.
        shown = url.render_as_string(hide_password=True) if url else \
            ("...@" if "@" in raw else "") + raw.rpartition("@")[2]
        raise UserError(f"{source}={shown!r} is not a PostgreSQL URL; expected {URL_FORM} "
                        "(host and database required)")
    return raw


def storage_description(storage: Mapping[str, Any] | StorageConf, *,
                        run_dir: Path | None = None) -> str:
    """What to print or archive about the storage: never a password."""
    if _get(storage, "kind") == "journal":
        where = run_dir / JOURNAL_FILE if run_dir is not None else JOURNAL_FILE
        return f"journal file {where}"
    from sqlalchemy.engine import make_url

    return make_url(storage_url(storage)).render_as_string(hide_password=True)


def make_storage(storage: Mapping[str, Any] | StorageConf, *,
                 run_dir: Path) -> optuna.storages.BaseStorage:
    """The Optuna storage for `storage.kind`. Journal: `run_dir/study.journal` (run_dir must
    exist). Postgres: connects now, so that a bad URL or a dead server fails before any work.

    Create one per process: a storage holds open connections that must not cross a fork.
    """
    kind = _get(storage, "kind")
    if kind == "journal":
        backend = JournalFileBackend(str(Path(run_dir) / JOURNAL_FILE))
        return optuna.storages.JournalStorage(backend)
    if kind == "postgres":
        return _postgres(storage)
    raise UserError(f"storage.kind={kind!r}; use storage=journal or storage=postgres")


def _postgres(storage: Mapping[str, Any] | StorageConf) -> optuna.storages.RDBStorage:
    from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

    url = _with_driver(storage_url(storage))
    beat, grace = int(_get(storage, "heartbeat_interval")), int(_get(storage, "grace_period"))
    if beat < 1:
        raise UserError(f"storage.heartbeat_interval must be >= 1 second, got {beat}")
    if grace <= beat:
        raise UserError(f"storage.grace_period={grace} must be larger than "
                        f"storage.heartbeat_interval={beat}, or live workers look dead")
    where = f"{url.host}:{url.port or 5432}/{url.database}"
    for attempt in range(3):
        try:
            return _rdb(url.render_as_string(hide_password=False), beat, grace)
        except (IntegrityError, ProgrammingError) as e:
            # N workers started at once on an empty database race to create Optuna's tables
            # and PostgreSQL fails the losers; the winner has committed them, so connect again.
            if _pgcode(e) in _RACE_CODES and attempt < 2:
                continue
            if isinstance(e, IntegrityError):
                raise
            raise UserError(f"PostgreSQL at {where} refused to set up Optuna's tables "
                            f"({_first_line(e)}): make the user the database's owner") from None
        except OperationalError as e:
            raise UserError(f"cannot reach PostgreSQL at {where} ({_first_line(e)}): start the "
                            "server or fix storage.url") from None
    raise AssertionError("unreachable")


# unique_violation, duplicate_table, duplicate_object: what a lost CREATE TABLE race raises.
_RACE_CODES = ("23505", "42P07", "42710")


def _with_driver(raw: str) -> Any:
    """Plain postgresql:// means psycopg (3) to SQLAlchemy 2.1 but psycopg2 to 2.0; pin the
    driver that the `postgres` extra installs."""
    import importlib.util

    from sqlalchemy.engine import make_url

    url = make_url(raw)
    driver = url.drivername.partition("+")[2] or "psycopg2"
    if importlib.util.find_spec(driver) is None:
        raise UserError(f"storage=postgres needs the {driver} module: "
                        "pip install 'transfer[postgres]'")
    return url.set(drivername=f"postgresql+{driver}")


def _rdb(url: str, beat: int, grace: int) -> optuna.storages.RDBStorage:
    with warnings.catch_warnings():
        # Heartbeats are "experimental" in Optuna since 2.9; the warning is noise to users.
        warnings.simplefilter("ignore", ExperimentalWarning)
        return optuna.storages.RDBStorage(
            url, heartbeat_interval=beat, grace_period=grace,
            engine_kwargs={"pool_pre_ping": True,
                           "connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}},
            **{_CALLBACK_ARG: _RetryCallback(max_retry=MAX_RETRY)})


def _pgcode(e: Exception) -> str | None:
    return getattr(getattr(e, "orig", None), "pgcode", None)


def _first_line(e: Exception) -> str:
    text = str(getattr(e, "orig", None) or e).strip()
    return text.splitlines()[0].strip() if text else type(e).__name__


def fail_stale(study: optuna.Study) -> None:
    """Fail trials whose heartbeat stopped (PostgreSQL) and re-queue them; no-op on journals."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


FINALIZE_CLAIM = "finalize"  # study user attr: which worker writes a run's results (verdict.checks)


def this_process() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def this_launch(environ: Mapping[str, str] | None = None) -> str | None:
    """The launch this process is one job of: its SLURM job array (every job of one
    `hydra/launcher=slurm` command shares it), else its SLURM job; None outside SLURM."""
    env = os.environ if environ is None else environ
    job = env.get("SLURM_ARRAY_JOB_ID") or env.get("SLURM_JOB_ID")
    return f"slurm:{job}" if job else None


def mark_owner(trial: optuna.Trial) -> None:
    """Record which process runs `trial`; call first thing in the objective. A user attr: the
    public API (and the dashboard shows it); `close_orphaned_trials` also reads a system attr."""
    trial.set_user_attr(OWNER_ATTR, this_process())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def owner_alive(owner: str, *, alive: Callable[[int], bool] | None = None) -> bool:
    """Whether the "host:pid" that owns a trial still runs. Another host cannot be checked
    from here, so it counts as alive (its trials are failed by heartbeats, if anything)."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    return (alive or _pid_alive)(int(pid))


def close_orphaned_trials(study: optuna.Study, *,
                          alive: Callable[[int], bool] | None = None) -> list[int]:
    """Mark FAIL the RUNNING trials whose owner process on this host is gone; return their
    numbers. Trials without an owner are left alone: their process may be about to mark them.

    `alive(pid)` defaults to a signal-0 probe. A recycled pid reads as alive (the trial stays
    RUNNING, nothing is lost); containers sharing a hostname but not a pid namespace would
    read as dead, so use PostgreSQL heartbeats there.
    """
    closed = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        owner = t.system_attrs.get(OWNER_ATTR) or t.user_attrs.get(OWNER_ATTR)
        if owner and not owner_alive(owner, alive=alive):
            study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
            closed.append(t.number)
    return closed
