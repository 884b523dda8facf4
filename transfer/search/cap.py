"""The spending cap while the run trains: checked before every trial, on what was spent.

`transfer.core.cost.check_cap` refuses to *start* on the predicted cost; this stops a running sweep
on the measured one. Both compare against the cap through `transfer.core.cost.cap_message`.
"""

from __future__ import annotations

from transfer.core.cost import cap_message
from transfer.search.context import BudgetStop, Context


def enforce_cap(ctx: Context) -> None:
    """Raise BudgetStop once the run's spending (`ctx.spent`: wall seconds of this launch,
    device-hours of every trial) is over `cost.max_wall_seconds` or `cost.max_tuning_gpu_hours`."""
    c = ctx.cfg.cost
    if ctx.spent is None or (c.max_tuning_gpu_hours is None and c.max_wall_seconds is None):
        return  # nothing to check: do not pay for `spent`, which reads every study
    seconds, device_hours = ctx.spent()
    over = cap_message(device_hours, seconds, c, what="spent")
    if over:
        raise BudgetStop(f"stopped: {over}; finished trials are kept, raise the cap and re-run "
                         "the same command to continue")
