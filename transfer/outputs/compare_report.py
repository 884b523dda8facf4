"""The comparison written out: compare.md (the table, who leads or cannot be told apart, the
definitions, the caveat), compare.json and the plots, into the comparison's own folder."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from transfer.archive.files import atomic_write_bytes
from transfer.outputs.compare import RANKED, RANKING_CAVEAT, Family, finite

__all__ = ["markdown", "write_comparison"]


def _fmt(m: Mapping, spec: str = ".3f") -> str:
    v, ci = m.get("value"), m.get("ci") or [math.nan, math.nan]
    if not finite(v):
        return "—"
    s = f"{v:{spec}}"
    if m.get("bound") == "lower":
        s = "≥ " + s
    if all(map(finite, ci)):
        s += f" [{ci[0]:{spec}}, {ci[1]:{spec}}]"
    return s


def _coord_cell(r: Mapping) -> str:
    """Width's max |slope| [interval], and depth's where the depth check ran."""
    out = "width " + _fmt(r["coord_max_abs_slope"], ".2f")
    if finite(r["depth_coord_max_abs_slope"]["value"]):
        out += "; depth " + _fmt(r["depth_coord_max_abs_slope"], ".2f")
    return out


def _lr(m: Mapping) -> str:
    v, ci = m.get("value"), m.get("ci") or [math.nan, math.nan]
    if not finite(v):
        return "—"
    out = f"{v:.3g}" + (f" [{ci[0]:.3g}, {ci[1]:.3g}]" if all(map(finite, ci)) else
                        " (interval unbounded)")
    return out + (" (width only)" if m.get("spans") == "width only" else "")


def markdown(result: Mapping, *, commit: str | None = None) -> str:
    """compare.md: the table, who leads where (or cannot be told apart), the caveat."""
    rows = result["rows"]
    conf = f"{result['confidence']:.0%}"
    head = ["family", "verdict", "lr at the target", *[RANKED[m][0] for m in RANKED],
            "coord slopes",
            "GPU-h", "days", "USD"]
    lines = [f"# Families compared ({conf} intervals over seeds)", ""]
    if commit:
        lines += [f"Code: `{commit}`.", ""]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [f"{r['model']} (`{r['run']}`)", r["verdict"], _lr(r["lr_transferred"]),
                 _fmt(r["loss_equal_tokens"]), _fmt(r["loss_equal_flops"]),
                 _fmt(r["basin_octaves"], ".2f"), _fmt(r["lr_sensitivity"]),
                 _fmt(r["divergence_margin_octaves"], ".2f"),
                 _coord_cell(r), f"{r['gpu_hours']:.3g}",
                 f"{r['days']:.3g}", f"${r['usd']:,.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Who leads"]
    for m, (name, _) in RANKED.items():
        ld = result["leaders"][m]
        if ld["best"]:
            lines.append(f"- {name}: **{ld['best']}**, its interval clear of every other's.")
        elif ld["tied"]:
            lines.append(f"- {name}: {', '.join(ld['tied'])} cannot be told apart "
                         "(their intervals overlap).")
        else:
            lines.append(f"- {name}: not measured for two or more families.")
    eq = result.get("equal_flops")
    lines += ["", "## Definitions",
              "- lr at the target: the transferred lr at the target's width (and depth where the "
              "depth check ran) with the verdict's interval (target.yaml `train.lr_transferred`); "
              "the launch lr, after the horizon and batch rules, is in compare.json (`lr`)",
              "- seeds: " + ", ".join(f"{r['model']} {r['seeds']}" for r in rows) + " at the "
              f"widest proxy; {_draws_text(rows)}, so its intervals are coarse and can end at "
              "the estimate"]
    lines += [f"- {k}: {v}" for k, v in result["definitions"].items()]
    if eq:
        lines.append(f"- equal_flops: {eq:.3g} FLOPs per trial")
    lines += ["", "## Verdicts not passed"]
    lines += [f"- {r['model']}: {r['verdict']}: {'; '.join(r['reasons'])}"
              + (f". To decide it: {'; '.join(r['decide_with'])}" if r.get("decide_with") else "")
              for r in rows if r["verdict"] != "passed"] or ["- none"]
    lines += ["", "## What a proxy-scale ranking is worth", RANKING_CAVEAT, ""]
    return "\n".join(lines)


def _jsonable(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return _jsonable(x.item())
    return x


def write_comparison(out_dir: Path, families: list[Family], result: Mapping, *,
                     commit: str | None = None) -> list[Path]:
    """compare.md, compare.json and plots/ into `out_dir`, each written whole
    (`atomic_write_bytes`), so a failed write leaves the last comparison as it was."""
    from transfer.outputs.compare_plots import curves_png, trajectories_png

    files = {"compare.md": markdown(result, commit=commit).encode(),
             "compare.json": json.dumps(_jsonable({**result, "commit": commit}), indent=1,
                                        allow_nan=False).encode(),
             "plots/lr_curves.png": curves_png(families),
             "plots/trajectories.png": trajectories_png(families)}
    for rel, data in files.items():
        atomic_write_bytes(out_dir / rel, data)
    return [out_dir / rel for rel in files]


def _draws_text(rows: list[dict]) -> str:
    """How coarse the fewest-seed family's bootstrap is: n seeds resampled with replacement
    give C(2n − 1, n) distinct draws (3 for 2 seeds, 10 for 3)."""
    n = min((int(r["seeds"]) for r in rows if r.get("seeds")), default=0)
    if n < 1:
        return "no seeds to resample"
    return f"a bootstrap over {n} seed{'s' if n > 1 else ''} has {math.comb(2 * n - 1, n)} " \
           "distinct draws"
