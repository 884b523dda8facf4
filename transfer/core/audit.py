"""Is a user's model set up for μP? Everything that can be told before any training.

A user brings `build(width: int) -> nn.Module` (tokens (B, T) -> logits (B, T, V)). From the
shapes of `build(base)` and `build(delta)` — the same two models `mup.make_base_shapes` compares —
we know which dimensions grow with width, and so what μP will do to each parameter. `audit`
lists, by parameter name, what μP cannot handle or will handle wrongly, each with its fix:

- a plain `nn.Linear` from width to a fixed size: the output layer without μP's 1/width logit
  multiplier (or a hidden layer whose size was hard-coded);
- a parameter with more than two width dimensions, or one that grows out of step with width;
- a parameter whose size equals the base width at both widths (a hard-coded width);
- different parameter names at different widths;
- no `mup.MuReadout` at all.

The builder itself is checked first: it must import, take one int and return a module whose
output has the right shape. Each of those failures is one `UserError` line.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from mup import MuReadout
from torch import nn

from transfer.core.compose import locate_callable, locate_object
from transfer.core.errors import UserError

SIGNATURE = "build(width: int) -> torch.nn.Module"
PROBE_BATCH = 2
RATIO_SLACK = 1.25  # a width dimension may grow 25 % off width's own ratio (rounding, d_ff)


@dataclass(frozen=True)
class Finding:
    name: str  # parameter name (module name for module-level findings)
    problem: str
    fix: str

    def line(self) -> str:
        return f"{self.name}: {self.problem}; fix: {self.fix}"


class AuditFailed(UserError):
    """The model is not set up for μP; printed one finding per line (exit code 2)."""

    def __init__(self, target: str, findings: list[Finding]):
        self.findings = list(findings)
        n = len(self.findings)
        super().__init__(f"{target} is not set up for μP ({n} problem{'s' * (n != 1)}, "
                         "found before any training):\n"
                         + "\n".join("  " + f.line() for f in self.findings))


# ---- the builder --------------------------------------------------------------------------
def resolve_builder(target: str) -> Callable[..., nn.Module]:
    """The callable at the dotted path `target`, from the live config only (never an archive)."""
    where = f"proxy.builder._target_={target!r}"
    try:
        return locate_callable(target)
    except Exception as e:  # noqa: BLE001 - import errors of user code come in every kind
        cause = e.__cause__ or e
        reason = " ".join(f"{type(cause).__name__}: {cause}".split())
        if "Located non-callable" in str(e):
            reason = f"it names an object of type {type(locate_object(target)).__name__}, not a function"
        raise UserError(f"{where} does not import: {reason}; give the dotted path of a function "
                        f"{SIGNATURE} on the Python path (e.g. my_pkg.models.build)") from None


def check_signature(build: Callable, target: str) -> None:
    """`build(width)` must be callable with one positional int."""
    try:
        sig = inspect.signature(build)
    except (TypeError, ValueError):
        return  # builtins and C callables: the first call will tell
    try:
        sig.bind(1)
    except TypeError as e:
        bare = sig.replace(parameters=[q.replace(annotation=q.empty)
                                       for q in sig.parameters.values()],
                           return_annotation=sig.empty)
        raise UserError(f"proxy.builder._target_={target!r} has signature "
                        f"{target.rsplit('.', 1)[-1]}{bare} and cannot be called as build(width) "
                        f"({e}); it must be {SIGNATURE} (give the other arguments defaults, or "
                        "pass them as +proxy.builder.<name>=<value>)") from None


def construct(build: Callable, width: int, *, target: str, seed: int = 0,
              device: str | torch.device | None = None) -> nn.Module:
    """`build(width)` with the global RNG seeded inside a fork (so left as it was), checked to
    return a module. `device="meta"` builds shapes only: no memory, no random numbers."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            with torch.device(device) if device is not None else contextlib.nullcontext():
                model = build(width)
        except UserError:
            raise
        except Exception as e:  # noqa: BLE001 - the user's code may raise anything
            if device == "meta":
                raise
            raise UserError(f"{target}({width}) raised {type(e).__name__}: "
                            f"{' '.join(str(e).split())[:200]}; the builder must build any width "
                            "the check asks for (proxy.width, validation_width, base and 2×base)"
                            ) from None
    if not isinstance(model, nn.Module):
        raise UserError(f"{target}({width}) returned a {type(model).__name__}, not a "
                        f"torch.nn.Module; it must be {SIGNATURE}")
    return model


def skeleton(build: Callable, width: int, *, target: str) -> nn.Module:
    """The model's structure at `width`: on the meta device, or on the CPU if the builder needs
    real tensors (e.g. it computes a table from data while building)."""
    try:
        return construct(build, width, target=target, device="meta")
    except UserError:
        raise
    except Exception:  # noqa: BLE001 - retried for real below, where errors are reported
        return construct(build, width, target=target)


def probe_output(model: nn.Module, *, seq_len: int, vocab_size: int, target: str) -> None:
    """One forward pass on (2, seq_len) tokens: logits (2, seq_len, vocab_size) or a UserError."""
    expected = (PROBE_BATCH, seq_len, vocab_size)
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, vocab_size, expected[:2], generator=gen)  # (B, T)
    try:
        with torch.no_grad():
            out = model(x)
    except Exception as e:  # noqa: BLE001
        raise UserError(f"{target}: model(tokens) raised {type(e).__name__}: "
                        f"{' '.join(str(e).split())[:200]} on int64 tokens of shape "
                        f"{tuple(x.shape)}; forward must map tokens (B, T) to logits (B, T, V) "
                        "(is proxy.seq_len longer than the model's context?)") from None
    if not isinstance(out, torch.Tensor):
        raise UserError(f"{target}: model(tokens) returned a {type(out).__name__}; forward must "
                        f"return one logits tensor (B, T, V) = {expected}")
    if tuple(out.shape) != expected:
        hint = (f"the model's vocabulary must be the data's (data vocab_size={vocab_size})"
                if out.ndim == 3 and tuple(out.shape[:2]) == expected[:2]
                else "return logits for every position: (batch, seq_len, vocab_size)")
        raise UserError(f"{target}: model(tokens) returned shape {tuple(out.shape)}, expected "
                        f"{expected} = (batch, proxy.seq_len, vocab_size); {hint}")


# ---- the audit ----------------------------------------------------------------------------
def _grows(b: tuple[int, ...], d: tuple[int, ...]) -> list[bool]:
    return [x != y for x, y in zip(b, d)]


def audit(build: Callable, *, base_width: int, delta_width: int, vocab_size: int | None = None,
          target: str = "build") -> list[Finding]:
    """Every μP problem visible in the shapes of `build(base_width)` and `build(delta_width)`."""
    if not 0 < base_width < delta_width:
        raise ValueError(f"need 0 < base_width < delta_width, got {base_width=}, {delta_width=}")
    base = skeleton(build, base_width, target=target)
    delta = skeleton(build, delta_width, target=target)
    bp = {n: tuple(p.shape) for n, p in base.named_parameters()}
    dp = {n: tuple(p.shape) for n, p in delta.named_parameters()}
    if set(bp) != set(dp):
        fix = "build every width from the same modules; let width change tensor sizes only"
        return ([Finding(n, f"exists at width {base_width} but not at width {delta_width}; the "
                            "builder returns different parameter names at different widths", fix)
                 for n in sorted(set(bp) - set(dp))]
                + [Finding(n, f"exists at width {delta_width} but not at width {base_width}; the "
                              "builder returns different parameter names at different widths", fix)
                   for n in sorted(set(dp) - set(bp))])
    ratio = delta_width / base_width
    out = []
    for name in bp:
        out += _parameter_findings(name, bp[name], dp[name], base_width, delta_width, ratio,
                                   vocab_size)
    out += _module_findings(base, delta, base_width, delta_width, vocab_size)
    return out


def _parameter_findings(name, b, d, base_width, delta_width, ratio, vocab) -> list[Finding]:
    if len(b) != len(d):
        return [Finding(name, f"has shape {b} at width {base_width} but {d} at width "
                              f"{delta_width}: a different number of dimensions",
                        "keep each parameter's rank the same at every width")]
    grows = _grows(b, d)
    out = []
    if sum(grows) > 2:
        out.append(Finding(name, f"has {sum(grows)} width-dependent dimensions ({b} at width "
                                 f"{base_width}, {d} at width {delta_width}); μP cannot classify "
                                 "it (vectors have one, matrices two)",
                           "store it as a matrix (fuse the extra width dimension into another "
                           "one) or make the extra dimension independent of width"))
    for i, g in enumerate(grows):
        if g and abs(math.log(d[i] / b[i] / ratio)) > math.log(RATIO_SLACK):
            out.append(Finding(name, f"dimension {i} grows {b[i]}→{d[i]} ({d[i] / b[i]:.3g}×) "
                                     f"while width grows {base_width}→{delta_width} "
                                     f"({ratio:.3g}×); μP assumes width dimensions grow in "
                                     "proportion to width",
                               "make that size a fixed multiple of width, or fixed"))
    if not any(grows) and b and base_width in b and base_width != vocab:
        out.append(Finding(name, f"does not change with width: shape {b} at widths {base_width} "
                                 f"and {delta_width}, with a size equal to the base width",
                           "derive that size from width (it looks hard-coded); if it is "
                           f"meant to be fixed, pick a proxy.base_width other than {base_width}"))
    return out


def _module_findings(base, delta, base_width, delta_width, vocab) -> list[Finding]:
    out, readouts = [], 0
    dmods = dict(delta.named_modules())
    for mname, m in base.named_modules():
        if not isinstance(m, nn.Linear) or mname not in dmods:
            continue
        (bo, bi), (do, di) = tuple(m.weight.shape), tuple(dmods[mname].weight.shape)
        pname = f"{mname}.weight"
        if isinstance(m, MuReadout):
            readouts += 1
            if bi == di:
                out.append(Finding(pname, f"MuReadout '{mname}' has fan-in {bi} at both widths, "
                                          "so its 1/width multiplier is always 1",
                                   "feed the readout the width-sized hidden state"))
            if bo != do:
                out.append(Finding(pname, f"MuReadout '{mname}' has a width-sized output "
                                          f"({bo}→{do}); MuReadout is for the output layer only",
                                   "use nn.Linear for hidden layers, MuReadout for width → "
                                   "vocabulary"))
        elif bi != di and bo == do:
            if vocab is None or bo == vocab:
                out.append(Finding(pname, f"plain nn.Linear readout '{mname}' ({bi}→{bo} at width "
                                          f"{base_width}): the output layer has no μP 1/width "
                                          "logit multiplier, so logits grow with width",
                                   f"replace '{mname}' with mup.MuReadout(width, {bo}) (or "
                                   "mup.MuSharedReadout(embedding.weight) for tied embeddings)"))
                readouts += 1
            else:
                out.append(Finding(pname, f"nn.Linear '{mname}' takes the width-sized input "
                                          f"({bi}→{di}) but its output size {bo} does not change "
                                          "with width",
                                   f"make its output size scale with width (e.g. 4·width); if "
                                   f"'{mname}' is an output layer, use mup.MuReadout"))
    if readouts == 0:
        out.append(Finding("(model)", "has no mup.MuReadout: the output layer gets no μP 1/width "
                                      "logit multiplier (a tied embedding used with F.linear "
                                      "looks like this too)",
                           "compute the logits with mup.MuReadout(width, vocab_size), or "
                           "mup.MuSharedReadout(embedding.weight) for tied embeddings"))
    return out
