"""The run context every stage and worker carries, and the stop raised at the spending cap."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from transfer.core.config import Config
from transfer.core.errors import UserError
from transfer.search.family import ProxyPlan
from transfer.search.progress import Progress


class BudgetStop(UserError):
    """The run crossed its spending cap; everything finished so far is kept."""


@dataclass
class Context:
    """Everything a worker needs; plain values plus the storage and the lock."""

    cfg: Config  # the resolved config as plain dataclasses (transfer.run.planner.make_context)
    proxies: ProxyPlan  # the family and its widths
    corpus: Any
    storage: Any
    lock: Callable
    run_name: str
    device: str = "auto"
    progress: Progress = field(default_factory=lambda: Progress("off"))
    worker: int = 0
    spent: Callable[[], tuple[float, float]] | None = None  # (seconds, flops) so far, all workers
    probes: dict = field(default_factory=dict)  # (width, batch size) -> timings (probe.py)
    phases: dict = field(default_factory=dict)  # phase -> wall seconds (transfer.search.phases)
    prediction: dict | None = None  # transfer.run.predict.predict_run, made before training
