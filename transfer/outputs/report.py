"""`report.md` of a sweep: what was swept, who won, the verdict, the emitted values, the budget
(`render_report`); and of a custom model's validation (`render_custom_report`).

Plain text from plain dicts (stage summaries, the validator's verdict, target.yaml and cost.json
contents); nothing here computes a number, it only shows the ones it is given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from transfer.core.config import validation_width
from transfer.outputs.summary import is_mup


def fmt(x: Any) -> str:
    """Numbers for people: ints with separators, floats to 3 significant digits (what a noisy
    measurement supports), yes/no for booleans (numpy's too), `key: value` for a mapping."""
    if x is None:
        return "—"
    if isinstance(x, bool | np.bool_):
        return "yes" if x else "no"
    if isinstance(x, int | np.integer):
        return f"{int(x):,}"
    if isinstance(x, float | np.floating):
        x = float(x)
        if x != 0 and (abs(x) >= 1e9 or abs(x) < 1e-3):
            return f"{x:.3g}"
        if abs(x) >= 1000:
            return f"{x:,.0f}"
        return f"{x:.3g}"
    if isinstance(x, Mapping):
        return ", ".join(f"{k}: {fmt(v)}" for k, v in x.items())
    return str(x)


def _value(x: Any) -> str:
    return ", ".join(fmt(v) for v in x) if isinstance(x, list | tuple) else fmt(x)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{fmt(100.0 * x)} %"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join((c if isinstance(c, str) else fmt(c)).replace("|", "\\|")
                                for c in r) + " |"
              for r in rows]
    return "\n".join(lines)


def _space(params: Mapping) -> str:
    parts = []
    for pname, p in params.items():
        if p.get("type") == "categorical":
            parts.append(f"{pname} ∈ {{{', '.join(fmt(c) for c in p.get('choices') or [])}}}")
        else:
            scale = ", log" if p.get("log") else ""
            parts.append(f"{pname} ∈ [{fmt(p.get('low'))}, {fmt(p.get('high'))}]{scale}")
    return "; ".join(parts)


def _params(best: Mapping | None) -> str:
    return ", ".join(f"{k}={fmt(v)}" for k, v in (best or {}).items()) or "—"


def _swept(cfg: Mapping, stages: list[Mapping]) -> str:
    proxy, train = cfg.get("proxy", {}), cfg.get("train", {})
    width = proxy.get("width")
    vwidth = validation_width(proxy) if width else proxy.get("validation_width") or None
    base = proxy.get("base_width") or width
    lines = ["## What was swept", "",
             (f"Proxy: {proxy.get('parametrization', 'mup')}, stages at width {fmt(width)}, "
              f"validation at width {fmt(vwidth)}, base width {fmt(base)}, "
              f"size preset `{proxy.get('size')}`; data `{cfg.get('data', {}).get('kind')}`; "
              f"{fmt(train.get('tokens'))} tokens per trial."), ""]
    spaces = cfg.get("stages", {}).get("stage", {})
    rows = [(s["name"], _space(spaces.get(s["name"], {}).get("params", {})), s.get("trials"),
             s.get("complete"), s.get("pruned"), s.get("failed"), s.get("seconds"))
            for s in stages]
    lines.append(_table(["stage", "search space", "trials", "complete", "pruned", "failed",
                         "seconds"], rows))
    return "\n".join(lines)


def _winners(stages: list[Mapping]) -> str:
    rows = [(s["name"], s.get("best_value"), _params(s.get("best_params"))) for s in stages]
    return "\n".join(["## Winners per stage", "",
                      "Each stage freezes the winners of the stages before it.", "",
                      _table(["stage", "best held-out loss", "winner"], rows)])


def _ci(v: Mapping, key: str) -> str | None:
    ci = v.get(key)
    return None if not ci else f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def _verdict(validation: Mapping | None, cfg: Mapping) -> str:
    lines = ["## Verdict", ""]
    if validation is None:
        lines.append("Validation did not run: the transfer is **unverified** and target.yaml "
                     "says `validated: false`.")
        return "\n".join(lines)
    v = validation
    coord = v.get("coord_check") or {}
    tol, conf = v.get("tolerance_log2"), v.get("confidence")
    outcome = v.get("outcome") or ("passed" if v.get("passed") else "rejected")
    lines += [(f"**{outcome.upper()}** at widths "
               f"{', '.join(fmt(w) for w in v.get('widths', []))}, {fmt(v.get('n_seeds'))} "
               f"seeds; intervals at {fmt(conf)} confidence."), ""]
    rows = [("lr drift (log2)", v.get("drift_log2"), _ci(v, "drift_ci"), f"±{fmt(tol)}"),
            ("loss gap at the narrow optimum", v.get("loss_gap"), _ci(v, "loss_gap_ci"),
             f"≤ {fmt(v.get('max_gap'))}"),
            ("loss gap at the stages' pick", v.get("loss_gap_at_tuned"), None, "—"),
            ("curvature S/N", v.get("curvature_snr"), None,
             f"≥ {fmt(v.get('min_curvature_snr'))}"),
            ("best loss, wide − narrow", v.get("wider_minus_narrow"),
             _ci(v, "wider_minus_narrow_ci"), "not > 0"),
            ("noise (residual σ / seed σ)", (v.get("noise") or {}).get("residual_std"),
             fmt((v.get("noise") or {}).get("seed_std")), "—"),
            ("optimum bracketed", v.get("bracketed"), None, "at every width"),
            ("coord check max abs slope", coord.get("max_abs_slope"), None,
             fmt(coord.get("max_slope")))]
    lines += [_table(["check", "value", "interval", "limit"], rows), ""]
    best = v.get("best_log2_lr") or {}
    lines += [_table(["width", "best log2 lr", "best lr"],
                     [(fmt(w), x, None if x is None else 2.0 ** x)
                      for w, x in best.items()]), ""]
    lines += _trajectory(v.get("trajectory"), v.get("extrapolation") or {})
    for title, key in (("Evidence against transfer", "rejected_because"),
                       ("Why it cannot tell", "inconclusive_because")):
        if v.get(key):
            lines += [f"{title}:", ""] + [f"- {r}" for r in v[key]] + [""]
    if v.get("decide_with"):
        lines.append(f"To decide it: {v['decide_with']}.")
    return "\n".join(lines).rstrip()


def _trajectory(t: Mapping | None, ex: Mapping) -> list[str]:
    """Where the optimum will be at the target: both models, the emitted one first."""
    if not t:
        return []
    out = [(f"The optimum's trajectory: the target (width {fmt(t['target_width'])}) is "
            f"{fmt(ex.get('extrapolated_octaves'))} octaves past the widest proxy. The emitted lr "
            f"is the **{t['model']}** model's estimate there; the other model is beside it "
            f"(they differ by {fmt(t['disagreement'])} octave)."), ""]
    rows = [(m + (" (emitted)" if m == t["model"] else ""), d["form"], d["estimate"],
             _ci(d, "interval"), None if d["estimate"] is None else 2.0 ** d["estimate"])
            for m, d in sorted(t["models"].items(), key=lambda kv: kv[0] != t["model"])]
    return out + [_table(["model", "form", "log2 lr at target", "interval", "lr"], rows), ""]


def _plots(plots: list[str]) -> str:
    if not plots:
        return "## Plots\n\nNo plots were written."
    return "\n".join(["## Plots", ""] + [f"![{p.rsplit('/', 1)[-1]}]({p})" for p in plots])


def _emitted(target: Mapping) -> str:
    mup, train = target.get("mup", {}), target.get("train", {})
    groups = target.get("param_groups", [])
    rows = [(g["name"], g.get("lr"), g.get("init_std") if g.get("init_std") is not None
             else g.get("init", "—"), g.get("weight_decay"),
             ", ".join(f"{k}={_value(g[k])}" for k in ("logits_scale", "tied_to", "zero_init")
                       if k in g))
            for g in groups]
    lines = ["## Emitted values (`target.yaml`)", ""]
    warning = target.get("provenance", {}).get("warning")
    if warning:
        lines += [f"> **validated: false** — {warning}", ""]
    lines += [_table(["μP", "value"], [(k, v) for k, v in mup.items()]), "",
              _table(["group", "lr", "init_std", "weight_decay", "also"], rows), "",
              _train_table(train)]
    spans = (target.get("provenance", {}).get("lr") or {}).get("interval_spans")
    if spans:
        lines += ["", f"The lr's interval spans {spans}."]
    lines += _joint(target.get("provenance", {}))
    lines += _launch_parts(train, target.get("provenance", {}).get("launch_warning"))
    return "\n".join(lines)


def _joint(prov: Mapping) -> list[str]:
    """The transferred lr at the target's width and depth, by part (provenance.lr.parts)."""
    lr = prov.get("lr") or {}
    if "target_depth" not in lr:
        return []
    w, d = lr["parts"]["width"], lr["parts"]["depth"]
    other = d["models"]["log_linear"]

    def ci(x: Sequence[float]) -> str:
        return f"[{_octaves(x[0])}, {_octaves(x[1])}]"

    rows = [("width part: the optimum at width " + fmt(lr["target_width"]),
             f"{w['estimate']:.2f} {ci(w['interval'])}",
             f"{w['model']} over widths {w['widths']} (optima {[round(x, 2) for x in w['optima_log2']]})"),
            (f"depth part: its move from {d['from_depth']} to {lr['target_depth']} layers "
             f"(at width {d.get('at_width', w['widths'][0])})",
             f"{d['estimate']:+.2f} {ci(d['interval'])}",
             f"{d['model']} over depths {d['depths']} (optima "
             f"{[round(x, 2) for x in d['optima_log2']]}); log_linear {other['estimate']:+.2f} "
             f"{ci(other['interval'])}"),
            ("lr_transferred (both, drawn together)",
             f"{lr['log2']:.2f} {ci(lr['interval_log2'])}",
             f"depth verdict: {(prov.get('depth') or {}).get('outcome', 'not run')}")]
    return ["", f"The transferred lr at width {fmt(lr['target_width'])} × {lr['target_depth']} "
                f"layers (log2, {lr['confidence']:.0%} intervals):", "",
            _table(["part", "log2 lr", "from"], rows)]


def _octaves(x: float) -> str:
    return f"{x:+.2f}" if math.isfinite(x) else ("+∞" if x > 0 else "−∞")


def _pow2(interval: Sequence[float]) -> str:
    """[lo, hi] as `2^[a, b]`: an lr's interval reads in octaves, not as raw floats."""
    a, b = (math.log2(x) if x > 0 else -math.inf for x in interval)
    return f"2^[{_octaves(a)}, {_octaves(b)}]"


def _train_table(train: Mapping) -> str:
    """One row per train value with its source beside it; lrs with their interval as 2^[a, b],
    the interval's parts in their own table (`_launch_parts`)."""
    prov = train.get("provenance") or {}
    beside = {"lr": "lr_interval", "lr_transferred": "lr_transferred_interval"}
    rows = []
    for k, v in train.items():
        if k == "provenance":
            continue
        if k in ("lr_interval", "lr_transferred_interval") and v:
            shown = _pow2(v)
        elif k == "lr_interval_log2" and v:
            shown = f"2^[{_octaves(v[0])}, {_octaves(v[1])}]"
        elif k == "lr_interval_parts":
            shown = "the table below"
        elif k in beside and isinstance(v, float) and v > 0:
            shown = f"{fmt(v)} = 2^{math.log2(v):.2f}" + (
                f", interval {_pow2(train[beside[k]])}" if train.get(beside[k]) else "")
        else:
            shown = _value(v)
        rows.append((k, shown, prov.get(k, "—")))
    return _table(["train", "value", "source"], rows)


def _launch_parts(train: Mapping, warning: str | None) -> list[str]:
    """The launch lr's interval, what each part contributes, and the one line when it is wide."""
    parts = train.get("lr_interval_parts")
    if not parts:
        return []
    a, b = train["lr_interval_log2"]
    out = ["", (f"The launch lr's {fmt(100 * parts['confidence'])} % interval is "
                f"2^[{_octaves(a)}, {_octaves(b)}], {fmt(b - a)} octaves wide. Each part's own "
                "interval (± half-width, octaves of lr) and its share of the variance (half-width² "
                "over their sum):"), ""]
    rows = []
    for name in ("width", "depth", "horizon", "batch"):
        p = parts.get(name)
        if not p:
            continue
        e = p.get("exponent")
        exponent = ("—" if not e else f"{e['central']:+.3f}, {fmt(100 * e['confidence'])} % "
                    f"[{e['interval'][0]:+.3f}, {e['interval'][1]:+.3f}]")
        rows.append((name, f"±{fmt(p['half_width_octaves'])}", _pct(p["variance_share"]),
                     "—" if "doublings" not in p else fmt(p["doublings"]), exponent,
                     p["source"]))
    out.append(_table(["part", "± octaves", "share", "doublings carried", "exponent",
                       "source"], rows))
    if warning:
        out += ["", f"> **The launch interval is wide**: {warning}."]
    return out


def _cap_line(cap: Mapping) -> str:
    limits = [f"{fmt(cap[k])} {unit}" for k, unit in (("max_tuning_gpu_hours", "device-hours"),
                                                      ("max_wall_seconds", "wall seconds"))
              if cap.get(k) is not None]
    return (f"Spending cap: {' and '.join(limits) or 'none'}; predicted before training "
            f"{fmt(cap.get('predicted_seconds'))} s, spent {fmt(cap.get('spent_seconds'))} s; "
            f"exceeded: {fmt(cap.get('exceeded'))} ({cap.get('note', '')}).")


def _budget(cost: Mapping) -> str:
    t, tu, nv = cost["target"], cost["tuning"], cost["naive"]
    hw = f"{t['hardware']} GPU-hours"
    rows = [("target pretraining: FLOPs 6·N·D", t["flops_6nd"]),
            ("target pretraining: FLOPs attention", t["flops_attention"]),
            ("target pretraining: FLOPs total", t["flops_total"]),
            (f"target pretraining: {hw}", t["gpu_hours"]),
            (f"target pretraining: {hw} with buffer", t["gpu_hours_with_buffer"]),
            (f"target pretraining: wall days on {fmt(t['n_gpus'])} GPUs (with buffer)",
             t["wall_days_with_buffer"]),
            ("target pretraining: USD (with buffer)", t["usd_with_buffer"]),
            (f"tuning as run: seconds on {tu.get('device')}", tu["seconds"]),
            (f"tuning as run: device-hours on {tu.get('device')}", tu["device_hours"]),
            ("tuning as run: FLOPs", tu["flops"]),
            (f"tuning as run: {hw} (FLOP-equivalent)", tu["gpu_hours"]),
            ((f"naive search on the target: {fmt(nv['trials'])} trials × "
              f"{fmt(nv['tokens_per_trial'])} tokens, {hw}"), nv["gpu_hours"]),
            (f"baseline: fitting own lr/batch laws at smaller scales, {hw}",
             (cost.get("baseline") or {}).get("gpu_hours")),
            (f"saved {hw} (baseline − tuning device-hours; validated runs only)",
             cost["saved_gpu_hours"]),
            ("tuning fraction (tuning / target pretraining)", _pct(cost["tuning_fraction"]))]
    stage_rows = [(s["name"], s.get("trials"), s.get("predicted_seconds"),
                   s.get("measured_seconds"), _pct(s.get("prediction_error")))
                  for s in cost.get("stages", [])]
    cap = cost.get("cap", {})
    lines = ["## Budget", "", _table(["item", "value"], rows), "",
             "Probe-based prediction of each stage (goal: within ±10 %):", "",
             _table(["stage", "trials", "predicted s", "measured s", "error"], stage_rows), "",
             _cap_line(cap), "",
             "Every assumption is listed in `cost.json` under `assumptions`."]
    return "\n".join(lines)


def _not_transferred(target: Mapping) -> str:
    items = target.get("provenance", {}).get("not_transferred", [])
    why = ("μP does not carry them across width" if is_mup(target) else
           "the proxies are SP, so no value is μP-transferred (provenance.warning), and these are "
           "not carried across width by any rule")
    lines = ["## Not transferred", "",
             f"These values are in target.yaml, but {why}, or the proxy differs from the target "
             "in them:", ""]
    lines += [f"- **{i['name']}**" + (f" ({fmt(i['value'])})" if i.get("value") is not None
                                       else "") + f": {i['reason']}" for i in items]
    return "\n".join(lines)


def render_report(*, name: str, cfg: Mapping, stages: list[Mapping],
                  validation: Mapping | None, target: Mapping, cost: Mapping,
                  plots: list[str]) -> str:
    """The whole report.md as one markdown string (plots are links relative to the sweep)."""
    prov = target.get("provenance", {})
    if validation is None:
        verdict = "NOT VALIDATED"
    else:
        verdict = (validation.get("outcome")
                   or ("passed" if validation.get("passed") else "rejected")).upper()
    model = cfg.get("model", {}).get("name") or target.get("model", {}).get("name")
    head = [f"# Sweep `{name}`", "",
            (f"Target `{model}`, budget `{cfg.get('budget')}`, verdict **{verdict}**, "
             f"emitted `validated: {str(bool(prov.get('validated'))).lower()}`, "
             f"fingerprint `{prov.get('fingerprint')}`.")]
    sections = ["\n".join(head), _swept(cfg, stages), _winners(stages),
                _verdict(validation, cfg), _plots(plots), _emitted(target), _budget(cost),
                _not_transferred(target)]
    return "\n\n".join(sections) + "\n"


def render_custom_report(*, name: str, builder: str, base_width: int, delta_width: int,
                         lr: float, width: int, validation_width: int, tokens: int, data: str,
                         cfg: Mapping, validation: Mapping, plots: list[str]) -> str:
    """report.md of `python -m transfer.validate`: is the custom model `builder` μP? The audit,
    the grid's centre, then the sweep report's verdict and plots sections."""
    head = [f"# Is `{builder}` μP? — {name}", "",
            (f"Audit: clean (base shapes from widths {base_width} and {delta_width}). Grid "
             f"centre: lr {lr:.4g} from the lr stage at width {width}; validation at width "
             f"{validation_width}; {tokens:,} tokens per trial on `{data}`."), ""]
    return "\n".join(head + [_verdict(validation, cfg), "", _plots(plots), ""])
