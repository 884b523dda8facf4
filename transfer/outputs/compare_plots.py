"""The comparison's figures, drawn from the families' archived curves (no measurement here):
every family's lr curve at its widest proxy on one axis, and their optima across widths."""

from __future__ import annotations

import numpy as np

from transfer.outputs.compare import Family, quiet, seed_matrix
from transfer.outputs.plots import figure, png_bytes


def curves_png(families: list[Family]) -> bytes:
    """Seed-mean loss against log2 lr at each family's widest proxy, ± one seed std."""
    fig = figure((7, 4.5))
    ax = fig.subplots()
    for f in families:
        w = max(f.curves)
        xs, ys = seed_matrix(f.curves[w])
        with quiet():
            mean, std = np.nanmean(ys, axis=1), np.nanstd(ys, axis=1)
        line, = ax.plot(xs, mean, "o-", ms=3, label=f"{f.model} (width {w}, {f.status})")
        ax.fill_between(xs, mean - std, mean + std, color=line.get_color(), alpha=0.15)
    ax.set_xlabel("log2 learning rate")
    ax.set_ylabel("validation loss (seed mean)")
    ax.set_title("lr curves at the widest proxy")
    ax.legend(fontsize=8)
    return png_bytes(fig)


def trajectories_png(families: list[Family]) -> bytes:
    """Each family's optimum (log2 lr) at every grid width, with its interval."""
    fig = figure((7, 4.5))
    ax = fig.subplots()
    for k, f in enumerate(families):
        ws = sorted(w for w in f.best_log2_lr if w in f.curves)
        if not ws:
            continue
        v = np.array([f.best_log2_lr[w] for w in ws], dtype=float)
        ci = np.array([f.best_log2_lr_ci.get(w, [np.nan] * 2) for w in ws], dtype=float)
        err = np.abs(np.stack([v - ci[:, 0], ci[:, 1] - v]))
        shift = 1 + 0.03 * (k - (len(families) - 1) / 2)  # side by side at each width
        ax.errorbar(np.asarray(ws) * shift, v, yerr=np.where(np.isfinite(err), err, 0),
                    fmt="o-", capsize=3, label=f.model)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("proxy width")
    ax.set_ylabel("optimal log2 learning rate")
    ax.set_title("the optimum's trajectory over widths")
    ax.legend(fontsize=8)
    return png_bytes(fig)
