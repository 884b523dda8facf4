"""Local workers (`workers=N`): N-1 spawned processes on this machine, sharing its cores.

Each runs the same stages on the same studies as the launching process (coordination is the
studies' own, see trial.py). Starting them changes nothing in the calling process: it gets
back the torch thread count to use and sets it itself.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable

import torch


def resolve_workers(workers, device: str) -> int:
    """`workers=auto` as a number: 2 on a CPU with >= 2 cores (measured faster than one
    process with 2 threads: benchmarks/workers.py), 1 on an accelerator (one device, one
    trainer) or a 1-core CPU; a number stays as it is."""
    if workers != "auto":
        return int(workers)
    on_gpu = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    return 1 if on_gpu or (os.cpu_count() or 1) < 2 else 2


def threads_per_process(workers: int) -> int:
    """Torch intra-op threads for each of `workers` processes training side by side."""
    return max(1, (os.cpu_count() or 1) // workers)


def start_workers(container: dict, main: Callable[[dict, int], None]
                  ) -> tuple[list[mp.Process], int | None]:
    """Spawn this launch's workers 1..N-1, each calling `main(container, worker)`; `container`
    is the resolved config as plain data, `workers` a number (`main` must be a module-level
    function: spawn imports it by name). Returns the processes and the thread count the caller
    should train with; None when `workers=1` (nothing to share).
    """
    workers = int(container["workers"])
    if workers <= 1:
        return [], None
    spawn = mp.get_context("spawn")
    first = container["worker"] * workers  # distinct sampler seeds across launches, processes
    procs = [spawn.Process(target=_worker_main, args=(main, container, first + i), daemon=False)
             for i in range(1, workers)]
    for p in procs:
        p.start()
    return procs, threads_per_process(workers)


def _worker_main(main: Callable[[dict, int], None], cfg_container: dict, worker: int) -> None:
    """A spawned worker's entry point: its share of the cores, then `main`."""
    torch.set_num_threads(threads_per_process(cfg_container["workers"]))  # this process's own
    main(cfg_container, worker)
