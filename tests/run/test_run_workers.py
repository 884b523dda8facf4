"""workers=auto: how many local processes share a run."""

from transfer.run import workers


def test_workers_auto_is_two_on_a_multicore_cpu_one_on_a_gpu(monkeypatch):
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 2)
    assert workers.resolve_workers("auto", "cpu") == 2
    assert workers.resolve_workers("auto", "cuda") == 1
    assert workers.resolve_workers(3, "cuda") == 3  # a number is the user's
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 1)
    assert workers.resolve_workers("auto", "cpu") == 1
