"""Local workers (`workers=N`): N-1 spawned processes on this machine, sharing its cores, or
one per GPU, each pinned to its own.

Each runs the same stages on the same studies as the launching process (coordination is the
studies' own, see trial.py). Starting them changes nothing in the calling process: it gets
back the torch thread count to use and sets it itself.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from collections.abc import Callable

import torch


def visible_gpus(device: str, cuda_visible: str | None, device_count: int) -> tuple[str, ...]:
    """The GPUs a run's workers share out, as CUDA_VISIBLE_DEVICES names them (indices or
    UUIDs): its entries when it is set (SLURM sets it to the job's GPUs), else 0..count-1.
    None on a CPU (`device=cpu`, or `auto` without CUDA), nor when `device` names one GPU
    (`cuda:1`: the user's pick)."""
    if device == "cpu" or device_count < 1 or (device.startswith("cuda:")):
        return ()
    if cuda_visible is None:
        return tuple(str(i) for i in range(device_count))
    named = tuple(e.strip() for e in cuda_visible.split(",") if e.strip())
    return named[:device_count]  # CUDA ignores what it cannot see


def gpu_per_worker(gpus: tuple[str, ...], workers: int) -> list[str | None]:
    """Each worker's own CUDA_VISIBLE_DEVICES: worker i gets GPU i (round robin past the last,
    when `workers` was set above the count); None for all on a CPU. Worker 0, the launching
    process, gets the first GPU, which is its default device anyway."""
    return [gpus[i % len(gpus)] if gpus else None for i in range(workers)]


def resolve_workers(workers, device: str, *, gpus: int = 0) -> int:
    """`workers=auto` as a number: one per GPU on a machine with `gpus` visible GPUs (one
    trainer per device); else 2 on a CPU with >= 2 cores (measured faster than one process
    with 2 threads: benchmarks/workers.py), 1 on a 1-core CPU or a named GPU; a number stays
    as it is."""
    if workers != "auto":
        return int(workers)
    if gpus:
        return gpus
    if device.startswith("cuda") or (device == "auto" and torch.cuda.is_available()):
        return 1
    return 1 if (os.cpu_count() or 1) < 2 else 2


def threads_per_process(workers: int) -> int:
    """Torch intra-op threads for each of `workers` processes training side by side."""
    return max(1, (os.cpu_count() or 1) // workers)


def start_workers(container: dict, main: Callable[[dict, int], None], *,
                  gpus: tuple[str, ...] = ()) -> tuple[list[mp.Process], int | None]:
    """Spawn this launch's workers 1..N-1, each calling `main(container, worker)`; `container`
    is the resolved config as plain data, `workers` a number (`main` must be a module-level
    function: spawn imports it by name). With `gpus`, worker i sees only its own GPU
    (`gpu_per_worker`). Returns the processes and the thread count the caller should train
    with; None when `workers=1` (nothing to share).
    """
    workers = int(container["workers"])
    if workers <= 1:
        return [], None
    spawn = mp.get_context("spawn")
    first = container["worker"] * workers  # distinct sampler seeds across launches, processes
    pinned = gpu_per_worker(gpus, workers)
    procs = [spawn.Process(target=_worker_main,
                           args=(main, container, first + i, pinned[i], os.getpid()),
                           daemon=False)
             for i in range(1, workers)]
    for p in procs:
        p.start()
    return procs, threads_per_process(workers)


PARENT_POLL_SECONDS = 2.0


def exit_with_parent(parent: int, every: float = PARENT_POLL_SECONDS) -> threading.Thread:
    """End this process when `parent`, the process that spawned it, is gone. A launch killed
    by a signal runs no clean-up, and its spawned workers would train on alone (on the cores
    the next run needs); the trial a worker leaves running is failed and re-queued by the next
    run (`transfer.search.studies.close_orphans`)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(1)

    t = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    t.start()
    return t


def _worker_main(main: Callable[[dict, int], None], cfg_container: dict, worker: int,
                 gpu: str | None = None, parent: int | None = None) -> None:
    """A spawned worker's entry point: its GPU (set before CUDA starts in this process, so
    that `cuda` is that device) or its share of the cores, then `main`; it ends when the
    launching process is gone (`exit_with_parent`)."""
    if parent is not None:
        exit_with_parent(parent)
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    torch.set_num_threads(threads_per_process(cfg_container["workers"]))  # this process's own
    main(cfg_container, worker)
