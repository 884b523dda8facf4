"""The run folder's figures as PNG bytes, drawn from what the checks measured (no measurement
here): the lr curves per width (or depth, or token budget), the optimum's trajectory to the
target, the coordinate checks; `run_plots` names them as the run folder's plots/ files."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from transfer.judge.trajectory import predict
from transfer.judge.verdict import Verdict
from transfer.verdict.coord import CoordResult, module_kind

__all__ = ["coord_png", "figure", "plot_coord", "png_bytes", "run_plots", "trajectory_png",
           "transfer_png"]


def figure(figsize: tuple[float, float] = (6, 4)):
    """A matplotlib Figure on its own Agg canvas, without touching pyplot's global backend
    (the benchmarks' figures use it too)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # plotting only: not on import
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


def png_bytes(fig, dpi: int = 120) -> bytes:
    """`fig`, laid out, as PNG bytes."""
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def trajectory_png(t: Mapping, *, axis: str | None = None) -> bytes:
    """Each measured width's (or depth's) optimum (with its interval), both trajectory models
    through them out to the target, and the emitted estimate with its interval there."""
    axis = axis or t.get("axis", "width")
    form = "depth" if axis == "depth" else "width"
    fig = figure()
    ax = fig.subplots()
    ws, vs = list(t["widths"]), np.asarray(t["vertices"], dtype=float)
    ci = np.asarray(t["vertex_ci"], dtype=float)
    err = np.abs(np.stack([vs - ci[:, 0], ci[:, 1] - vs]))
    ax.errorbar(ws, vs, yerr=np.where(np.isfinite(err), err, 0), fmt="o", color="k", capsize=3,
                label="measured optimum")
    grid = np.geomspace(min(ws), t["target_width"], 60)
    for m, style in (("converging", "-"), ("log_linear", "--")):
        line = [float(predict(m, ws, vs, w, form)) for w in grid]
        ax.plot(grid, line, style, lw=1, label=f"{m}" + (" (emitted)" if m == t["model"] else ""))
    lo, hi = t["interval"]
    if math.isfinite(t["estimate"]):
        yerr = [[t["estimate"] - lo if math.isfinite(lo) else 0],
                [hi - t["estimate"] if math.isfinite(hi) else 0]]
        ax.errorbar([t["target_width"]], [t["estimate"]], yerr=yerr, fmt="s", color="tab:green",
                    capsize=4, label=f"at the target ({t['confidence']:.0%} interval)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("layers" if axis == "depth" else axis)
    ax.set_ylabel("optimal log2 learning rate")
    ax.set_title(f"optimum at {axis} {t['target_width']}: {t['estimate']:.2f} "
                 f"[{lo:.2f}, {hi:.2f}]")
    ax.legend(fontsize=8)
    return png_bytes(fig)


def transfer_png(verdict: Verdict, *, label: str = "width") -> bytes:
    """Validation loss vs log2 lr, one curve per width, optima marked: the μTransfer figure, as
    PNG bytes for the run folder (`transfer.outputs.write`). `label` names the curves' key
    (`"layers"` for the depth check, `"tokens"` for the horizon check)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # plotting only: not on import
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4))
    FigureCanvasAgg(fig)  # an Agg canvas without touching pyplot's global backend
    ax = fig.subplots()
    for w in verdict.widths:
        c = verdict.curves[w]
        line = ax.errorbar(c["log2_lr"], c["loss"],
                           yerr=[0 if not math.isfinite(s) else s for s in c["std"]],
                           marker="o", ms=3, capsize=2,
                           label=f"width {w}" if label == "width" else f"{w} {label}")
        if math.isfinite(verdict.best_log2_lr[w]):
            ax.axvline(verdict.best_log2_lr[w], color=line[0].get_color(), ls="--", lw=1)
    ax.axvline(verdict.tuned_log2_lr, color="grey", ls=":", lw=1, label="stages' pick")
    if verdict.passed and math.isfinite(verdict.optimum_log2_lr):  # emitted only when passed
        ax.axvspan(*[min(max(x, ax.get_xlim()[0]), ax.get_xlim()[1]) for x in verdict.optimum_ci],
                   color="green", alpha=0.08,
                   label=f"emitted lr ({verdict.confidence:.0%} interval)")
    ax.set_xlabel("log2 learning rate")
    ax.set_ylabel("held-out loss (mean over seeds)")
    lo, hi = verdict.drift_ci
    ax.set_title(f"{verdict.outcome.upper()}: drift {verdict.drift_log2:+.2f} "
                 f"[{lo:+.2f}, {hi:+.2f}] log2(lr)")
    ax.legend()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    return buf.getvalue()


def plot_coord(result: CoordResult, path: str | Path) -> Path:
    """`coord_png` written to `path` (a run folder's copy goes through `transfer.outputs.write`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(coord_png(result))
    return path


def coord_png(result: CoordResult) -> bytes:
    """PNG of l1 vs width (log-log), one line per module kind, one panel per step."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    df = result.df.assign(kind=lambda d: d["module"].map(
        lambda m: module_kind(m) if result.axis == "width" else m))
    steps = sorted(df["t"].unique())
    fig = Figure(figsize=(4 * len(steps), 4), layout="constrained")
    FigureCanvasAgg(fig)  # attaches an Agg canvas without touching pyplot's global backend
    colours = matplotlib.colormaps["tab20"]
    axes = fig.subplots(1, len(steps), sharey=True, squeeze=False)[0]
    for ax, t in zip(axes, steps):
        table = df[df["t"] == t].groupby(["kind", result.axis])["l1"].mean().unstack(result.axis)
        for i, (kind, l1) in enumerate(table.iterrows()):
            if (l1 > 0).all():  # log axes: a zero-initialised output has no point to plot
                ax.plot(table.columns, l1.to_numpy(), marker="o", label=kind,
                        color=colours(i % colours.N), linestyle=("-", "--")[i // colours.N % 2])
        ax.set(title=f"step {t}", xlabel=result.axis)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
    axes[0].set_ylabel("mean |activation| (l1)")
    axes[-1].legend(fontsize="x-small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    verdict = "PASS" if result.passed else "FAIL"
    fig.suptitle(f"coordinate check: max |slope| {result.max_abs_slope:.3f} "
                 f"(limit {result.max_slope}) {verdict}")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def run_plots(checks) -> dict[str, bytes]:
    """plots/ file name → PNG for what `transfer.verdict.checks.run_checks` found: the lr curves
    of each check, the trajectory, and the coordinate checks that ran in this launch."""
    out = {"lr_transfer.png": transfer_png(checks.verdict)}
    if checks.verdict.trajectory:
        out["lr_trajectory.png"] = trajectory_png(checks.verdict.trajectory)
    if checks.depth is not None:
        out["lr_transfer_depth.png"] = transfer_png(checks.depth, label="layers")
        if checks.depth.trajectory:
            out["lr_trajectory_depth.png"] = trajectory_png(checks.depth.trajectory,
                                                            axis="depth")
    if checks.horizon is not None:
        out["lr_horizon.png"] = transfer_png(checks.horizon, label="tokens")
    for axis, res in checks.coord.items():
        out["coord_check.png" if axis == "width" else f"coord_check_{axis}.png"] = coord_png(res)
    return out
