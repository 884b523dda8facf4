"""Per-stage progress: a bar on a terminal, plain lines otherwise (logs, CI, workers)."""

from __future__ import annotations

import math
import sys
import time


def _fmt_s(s: float) -> str:
    s = max(0, int(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class Progress:
    """`mode`: auto (bar if stderr is a terminal), bar, lines, off."""

    def __init__(self, mode: str = "auto", stream=None):
        self.stream = stream or sys.stderr
        if mode == "auto":
            mode = "bar" if getattr(self.stream, "isatty", lambda: False)() else "lines"
        self.mode = mode
        self._bar = None

    def stage_start(self, name: str, done: int, total: int) -> None:
        self._name, self._total, self._t0, self._done0 = name, total, time.monotonic(), done
        if self.mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(total=total, initial=done, desc=f"stage {name}", file=self.stream,
                             leave=True, dynamic_ncols=True)
        elif self.mode == "lines":
            self.line(f"stage {name}: {done}/{total} trials done")

    def update(self, done: int, best: float | None, best_params: dict | None = None) -> None:
        rate = (time.monotonic() - self._t0) / max(1, done - self._done0)
        eta = rate * (self._total - done) if done > self._done0 else float("nan")
        best_s = "—" if best is None else f"{best:.4f}"
        params = "" if not best_params else " (" + ", ".join(
            f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in best_params.items()) + ")"
        if self.mode == "bar" and self._bar is not None:
            self._bar.n = done
            self._bar.set_postfix_str(f"best {best_s}{params} eta {_fmt_s(eta) if math.isfinite(eta) else '?'}")
        elif self.mode == "lines":
            eta_s = _fmt_s(eta) if math.isfinite(eta) else "?"
            self.line(f"stage {self._name}: {done}/{self._total} trials, best {best_s}{params}, "
                      f"eta {eta_s}")

    def stage_end(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def line(self, text: str) -> None:
        if self.mode != "off":
            print(text, file=self.stream, flush=True)
