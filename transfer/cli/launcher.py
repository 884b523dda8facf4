"""The sweep's submitit launchers (`hydra/launcher=slurm`, `local_workers`): hydra-submitit-
launcher's, waiting on every job without `sacct`, then one line per job and the run's exit code.

The plugin waits through submitit, which learns that a job ended from its result file or from
`sacct`. A job killed before it wrote one (scancel, a lost node, the time limit) is then known
only to `sacct`: on a cluster without accounting ("Slurm accounting storage is disabled") the
launching process waited forever, and with accounting the first such job raised and left the
others unwatched. These launchers read the queue itself (`squeue`, which every cluster has),
wait until every job has ended, and report a lost job as a line, not a traceback: its trial is
re-run by the other jobs (the storage's heartbeats), so the run does not depend on it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from omegaconf import OmegaConf

from transfer.core.errors import EXIT_USER_ERROR

try:  # the `slurm` extra: without it this module still imports (run_code, the waits); only
    # the launcher classes need the plugin, and the CLI refuses `hydra/launcher=slurm` first
    from hydra_plugins.hydra_submitit_launcher import submitit_launcher as plugin
except ImportError:
    plugin = None

POLL_S = 2.0  # between two looks at the queue
RESULT_GRACE_S = 15.0  # a shared filesystem may show a job's result file after the job ended
NO_RESULT = 1  # the launching process's code when no job returned one
# squeue's states of a job that has not ended (squeue(1), JOB STATE CODES)
ACTIVE = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED",
                    "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "SIGNALING",
                    "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"})


def run_code(codes: Iterable[int | None]) -> int:
    """The launching process's exit code from its jobs' codes (None: ended without one).

    Bad input in any job (2) wins; else a verdict (3 rejected, 4 inconclusive) from the job
    that wrote the results (every other job returns 0); 0 when every job that returned said
    0; 1 when no job returned at all."""
    got = [c for c in codes if c is not None]
    if not got:
        return NO_RESULT
    if EXIT_USER_ERROR in got:
        return EXIT_USER_ERROR
    return max(got)


def squeue_states(job_ids: Sequence[str]) -> dict[str, str] | None:
    """Each listed job's (or array task's) state as squeue reports it, None when squeue fails.
    A job missing from the answer has left the controller's memory (MinJobAge): it ended."""
    arrays = sorted({j.split("_")[0] for j in job_ids})
    done = subprocess.run(["squeue", "--noheader", "--array", "--states=all",
                           f"--jobs={','.join(arrays)}", "--format=%i %T"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return None
    states = dict(line.split(maxsplit=1) for line in done.stdout.splitlines() if line.strip())
    return {j: states.get(j, "ENDED").strip() for j in job_ids}


def _wait_slurm(jobs: list) -> dict[str, str]:
    """Block until every job has left the queue; return each job's last state."""
    ids = [j.job_id for j in jobs]
    failures = 0
    while True:
        states = squeue_states(ids)
        if states is None:
            failures += 1
            if failures * POLL_S > 600:
                sys.exit("error: squeue has failed for 10 minutes: is slurmctld up? The jobs "
                         "keep running; their results are in the storage")
        elif not ACTIVE & set(states.values()):
            return states
        time.sleep(POLL_S)


def _wait_local(jobs: list) -> dict[str, str]:
    while not all(j.done() for j in jobs):  # the local executor watches its own processes
        time.sleep(POLL_S)
    return {j.job_id: j.state for j in jobs}


def _outcome(job, state: str) -> tuple[int | None, str]:
    """A job's exit code (None without one) and its line's ending."""
    result = Path(job.paths.result_pickle)
    # a job that ended well may show its result file late on a shared filesystem; a
    # cancelled, failed or timed-out one will not show one at all
    deadline = time.time() + (RESULT_GRACE_S if state in ("COMPLETED", "ENDED") else 0.0)
    while not result.exists() and time.time() < deadline:
        time.sleep(1.0)
    if not result.exists():
        return None, (f"ended without a result ({state}); its log: {job.paths.stderr}; a trial "
                      "it ran is re-run by the other jobs")
    try:
        ret: JobReturn = job.results()[0]
    except Exception as e:  # the job raised outside the sweep: submitit's trace
        return None, f"failed: {str(e).strip().splitlines()[-1]}; its log: {job.paths.stderr}"
    if ret.status != JobStatus.COMPLETED:
        return None, f"failed: {ret._return_value!r}; its log: {job.paths.stderr}"
    code = ret.return_value
    return (code, f"exit {code}") if isinstance(code, int) else (0, "done")


class _WaitAll:
    """The plugin's `launch`, submitting the same array, with its own wait (module docstring).
    It ends the launching process with `run_code` of the jobs: keep Hydra's sweeper at its one
    batch (`hydra.sweeper.max_batch_size` null, the default)."""

    _EXECUTOR: str
    params: dict[str, Any]
    config: Any

    def launch(self, job_overrides: Sequence[Sequence[str]],
               initial_job_idx: int) -> Sequence[JobReturn]:
        import submitit

        executor = submitit.AutoExecutor(cluster=self._EXECUTOR,
                                         **self._init_params())
        executor.update_parameters(**self._job_params())
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in self.config.hydra.sweep:  # as the plugin does
            os.chmod(sweep_dir, mode=int(str(self.config.hydra.sweep.mode), 8))
        args = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            print(f"#{idx}: {' '.join(filter_overrides(overrides))}", flush=True)
            args.append((list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}",
                         Singleton.get_state()))
        jobs = executor.map_array(self, *zip(*args))
        print(f"submitted {len(jobs)} jobs ({', '.join(j.job_id for j in jobs)}); their logs: "
              f"{Path(jobs[0].paths.folder).parent}", flush=True)
        states = _wait_slurm(jobs) if self._EXECUTOR == "slurm" else _wait_local(jobs)
        codes = []
        for idx, job in enumerate(jobs, start=initial_job_idx):
            code, how = _outcome(job, states[job.job_id])
            print(f"job {job.job_id} (#{idx}): {how}", flush=True)
            codes.append(code)
        sys.exit(run_code(codes))

    def _init_params(self) -> dict[str, Any]:
        """`submitit_folder` and the executor-specific keys, as the plugin passes them."""
        out = {"folder": self.params["submitit_folder"]}
        if "max_num_timeout" in self.params:
            out[f"{self._EXECUTOR}_max_num_timeout"] = self.params["max_num_timeout"]
        return out

    def _job_params(self) -> dict[str, Any]:
        from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

        shared = set(OmegaConf.structured(BaseQueueConf).keys())
        return {k if k in shared else f"{self._EXECUTOR}_{k}": v for k, v in self.params.items()
                if k not in ("submitit_folder", "max_num_timeout")}


if plugin is not None:

    class SlurmLauncher(_WaitAll, plugin.SlurmLauncher):
        """One SLURM array task per sweep job (`conf/hydra/launcher/slurm.yaml`)."""

    class LocalLauncher(_WaitAll, plugin.LocalLauncher):
        """The same jobs as processes on this machine (`conf/hydra/launcher/local_workers.yaml`)."""
