"""Shared test infrastructure: a real, throwaway PostgreSQL server for the storage tests.

Fixtures for one module's tests live in that module; only what several modules share is here.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread() -> Iterator[None]:
    """Tiny models on shared cores: one intra-op thread each, in-process and in subprocesses.

    With two threads, OpenMP's spin-waiting made a 10-step trial 20-50x slower whenever another
    process held a core (measured while tests, workers and benchmarks shared 2 cores).
    """
    import torch

    before, env = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"
    yield
    torch.set_num_threads(before)
    if env is None:
        os.environ.pop("OMP_NUM_THREADS", None)
    else:
        os.environ["OMP_NUM_THREADS"] = env


PG_USER = "transfer"  # database superuser inside the throwaway cluster
PG_OS_USER = "transfer_pg"  # initdb refuses to run as root; as root we run the server as this


def find_postgres_bin() -> Path | None:
    """The folder holding `initdb` and `pg_ctl`: on PATH, else Debian's versioned folders."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(os.path.realpath(on_path)).parent
    # Debian/Ubuntu keep server binaries off PATH; prefer the newest major version.
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_major_version)
    return Path(found[-1]).parent if found else None


def _major_version(initdb: str) -> int:
    name = Path(initdb).parents[1].name  # /usr/lib/postgresql/<major>/bin/initdb
    return int(name) if name.isdigit() else 0


def postgres_required() -> bool:
    """CI sets CI_REQUIRE_POSTGRES=1 so that missing binaries fail instead of skipping."""
    return os.environ.get("CI_REQUIRE_POSTGRES") == "1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user() -> list[str]:
    """Command prefix that runs a server binary as an unprivileged user when we are root."""
    if os.geteuid() != 0:
        return []
    if subprocess.run(["id", "-u", PG_OS_USER], check=False,
                      capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        PG_OS_USER], check=True, capture_output=True)
    return ["runuser", "-u", PG_OS_USER, "--"]


def _run(cmd: list[str], cwd: Path) -> None:
    done = subprocess.run(cmd, check=False, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}"
                           f"{done.stderr}")


@pytest.fixture(scope="session")
def postgres_bin() -> Path | None:
    return find_postgres_bin()


@pytest.fixture(scope="session")
def postgres_server(postgres_bin: Path | None) -> Iterator[tuple[Path, int]]:
    """Start PostgreSQL on 127.0.0.1:<free port> in a temp folder; yield (bin dir, port)."""
    if postgres_bin is None:
        msg = ("PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or in "
               "/usr/lib/postgresql/*/bin: apt-get install -y postgresql")
        if postgres_required():
            pytest.fail(msg + " (required: CI_REQUIRE_POSTGRES=1)")
        pytest.skip(msg)
    # Not pytest's tmp_path: its parents are 0700 root and the server user must reach the folder.
    root = Path(tempfile.mkdtemp(prefix="transfer-pg-"))
    prefix = _as_server_user()
    if prefix:
        shutil.chown(root, user=PG_OS_USER)
    data, port = root / "data", _free_port()
    _run(prefix + [str(postgres_bin / "initdb"), "-D", str(data), "-U", PG_USER,
                   "--auth=trust", "--no-sync", "-E", "UTF8"], cwd=root)
    # Durability off: the cluster dies with the test session, speed is all that matters.
    opts = (f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off")
    _run(prefix + [str(postgres_bin / "pg_ctl"), "-D", str(data), "-l", str(root / "log"),
                   "-o", opts, "-w", "-t", "30", "start"], cwd=root)
    try:
        yield postgres_bin, port
    finally:
        subprocess.run(prefix + [str(postgres_bin / "pg_ctl"), "-D", str(data), "-m",
                                 "immediate", "-w", "stop"], check=False, cwd=root,
                       capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def make_postgres_db(postgres_server: tuple[Path, int]) -> Callable[[str], str]:
    """Create an empty database by name on the session server; return its URL."""
    bin_dir, port = postgres_server

    def create(name: str) -> str:
        _run([str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", PG_USER,
              name], cwd=Path(tempfile.gettempdir()))
        return f"postgresql://{PG_USER}@127.0.0.1:{port}/{name}"

    return create


@pytest.fixture(scope="session")
def postgres_url(make_postgres_db: Callable[[str], str]) -> str:
    """postgresql://transfer@127.0.0.1:<port>/transfer_test on a real, throwaway server."""
    return make_postgres_db("transfer_test")


def slurm_required() -> bool:
    """CI sets CI_REQUIRE_SLURM=1 (after `.ci/slurm start`) so that no cluster fails, not skips."""
    return os.environ.get("CI_REQUIRE_SLURM") == "1"


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    """A SLURM cluster this process can submit to (`bash .ci/slurm start` makes a one-node one
    on localhost and prints the SLURM_CONF to export); yields its default partition's name."""
    why, up, conf = None, [], os.environ.get("SLURM_CONF")
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        why = "SLURM clients (sinfo, sbatch) not on PATH"
    elif conf and not Path(conf).is_file():
        why = f"SLURM_CONF={conf} does not exist"  # sinfo would retry it for a minute
    else:
        try:
            done = subprocess.run(["sinfo", "--noheader", "--format=%P %a %T"], check=False,
                                  capture_output=True, text=True, timeout=20)
            up = [line.split() for line in done.stdout.splitlines()
                  if line.split()[1:2] == ["up"] and line.split()[2] in ("idle", "mixed")]
            said = (done.stderr or done.stdout).strip().splitlines()
            if done.returncode != 0 or not up:
                why = f"no SLURM partition up with an idle node (sinfo: {said[-1] if said else 'no partitions'})"
        except subprocess.TimeoutExpired:
            why = "sinfo did not answer in 20 s (is slurmctld up?)"
    if why is not None:
        msg = why + ": run `bash .ci/slurm start` and export the SLURM_CONF it prints"
        if slurm_required():
            pytest.fail(msg + " (required: CI_REQUIRE_SLURM=1)")
        pytest.skip(msg)
    default = next((p for p, *_ in up if p.endswith("*")), up[0][0])
    return default.rstrip("*")


@pytest.fixture(scope="session")
def transformers():
    """The `transformers` module (the `[hf]` extra), or the test skipped naming the install."""
    from transfer.core.hf_config import INSTALL_HINT, transformers_or_none

    mod = transformers_or_none()
    if mod is None:
        pytest.skip(f"transformers not installed ({INSTALL_HINT})")
    return mod
