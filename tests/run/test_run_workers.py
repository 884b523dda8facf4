"""workers=auto: how many local processes share a run."""

from transfer.run import workers


def test_workers_auto_is_two_on_a_multicore_cpu_one_on_a_gpu(monkeypatch):
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 2)
    assert workers.resolve_workers("auto", "cpu") == 2
    assert workers.resolve_workers("auto", "cuda") == 1
    assert workers.resolve_workers(3, "cuda") == 3  # a number is the user's
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 1)
    assert workers.resolve_workers("auto", "cpu") == 1


def test_workers_auto_is_one_per_visible_gpu():
    assert workers.resolve_workers("auto", "auto", gpus=4) == 4
    assert workers.resolve_workers("auto", "cuda", gpus=8) == 8
    assert workers.resolve_workers(2, "cuda", gpus=8) == 2  # a number is the user's


def test_visible_gpus_read_cuda_visible_devices_as_slurm_sets_it():
    assert workers.visible_gpus("auto", "4,5,6,7", 4) == ("4", "5", "6", "7")
    assert workers.visible_gpus("auto", "GPU-a1, GPU-b2", 2) == ("GPU-a1", "GPU-b2")
    assert workers.visible_gpus("cuda", None, 3) == ("0", "1", "2")  # unset: every device
    assert workers.visible_gpus("auto", "0,1,2", 2) == ("0", "1")  # what CUDA can see


def test_no_gpus_to_share_on_a_cpu_or_a_named_gpu():
    assert workers.visible_gpus("cpu", "0,1", 2) == ()
    assert workers.visible_gpus("auto", None, 0) == ()  # no CUDA
    assert workers.visible_gpus("auto", "", 0) == ()
    assert workers.visible_gpus("cuda:1", "0,1", 2) == ()  # the user's pick: one trainer


def test_each_worker_gets_its_own_gpu():
    gpus = ("4", "5", "6", "7")
    pinned = workers.gpu_per_worker(gpus, 4)
    assert pinned == ["4", "5", "6", "7"]  # one worker per GPU, none shared, none idle
    assert pinned[0] == gpus[0]  # the launching process: its default device
    assert workers.gpu_per_worker(("0", "1"), 3) == ["0", "1", "0"]  # more workers than GPUs
    assert workers.gpu_per_worker((), 2) == [None, None]  # CPU: nothing pinned


def test_a_spawned_worker_sees_only_its_gpu(tmp_path):
    """The pinning reaches the process: a spawned worker's CUDA_VISIBLE_DEVICES is its GPU."""
    procs, _ = workers.start_workers({"workers": 3, "worker": 0, "out": str(tmp_path)},
                                     _record_visible, gpus=("3", "5", "9"))
    for p in procs:
        p.join(timeout=120)
    seen = {int(f.stem): f.read_text() for f in tmp_path.iterdir()}
    assert seen == {1: "5", 2: "9"}  # workers 1 and 2; worker 0 is the caller, on GPU 3


def _record_visible(container: dict, worker: int) -> None:
    import os
    from pathlib import Path

    Path(container["out"], str(worker)).write_text(os.environ["CUDA_VISIBLE_DEVICES"])


def sleep_main(container: dict, worker: int) -> None:
    """A worker's `main` that would train for a minute (spawn imports it by name)."""
    import time

    time.sleep(60)


def _gone(pid: int) -> bool:
    """The process has ended: no such pid, or a zombie waiting for its new parent to reap it."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except FileNotFoundError:
        return True


def test_a_spawned_worker_ends_when_its_launch_is_killed():
    """A launch killed by a signal runs no clean-up; its worker must not train on alone."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    script = (
        "import sys, time\n"
        f"sys.path[:0] = [{str(root)!r}]\n"
        "from transfer.run.workers import start_workers\n"
        "from tests.run.test_run_workers import sleep_main\n"
        "procs, _ = start_workers({'workers': 2, 'worker': 0}, sleep_main)\n"
        "print(procs[0].pid, flush=True)\n"
        "time.sleep(60)\n")
    launch = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = int(launch.stdout.readline())
    time.sleep(1.0)
    assert not _gone(child)
    launch.kill()  # SIGKILL: nothing in the launch can clean up
    launch.wait()
    deadline = time.monotonic() + 30
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _gone(child), f"worker {child} still running after its launch was killed"
