"""A width family from a user's `build(width) -> nn.Module`: the architecture a team brings.

`CustomFamily` gives the trainer and the validator what they get from the built-in
`TransformerFamily` — every member of `transfer.core.protocol.ProxyFamily`: `.build(width, seed=,
device=)`, `.replace(**hp)`, `.check_width`, `.flops_per_token`, `.seq_len`, `.parametrization`,
`.save_base_shapes`, ... — and does the μP set-up itself: base shapes from `build(base_width)`
and `build(delta_width)` (shapes only, on the meta device), set on every model it builds with
`mup.set_base_shapes`, which also rescales MuReadout and biases from PyTorch's default (fan-in)
init to μP's.

The μP multipliers (input/output multiplier, init σ, attention scale) live in the user's model,
so no stage may tune them here.

Depth hook: a builder that accepts the keywords `n_layers` and `residual_mult`, e.g.
`build(width, *, n_layers=2, residual_mult=1.0)`, is built with the family's depth and with
`residual_mult` = `transfer.core.rules.residual_mult(n_layers / base_depth, depth_alpha)`, which it
must multiply into every residual branch (`x = x + residual_mult * branch(norm(x))`), as the
built-in family does; the depth check (`validation.depth_enabled`) then builds it deeper with
`replace(n_layers=...)`. Its optimizer stays MuAdamW (width rules), so the hidden lr factor
m_L^(α-1) is 1 only at α = 1 (CompleteP) — the depth setting this hook is meant for.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from mup import MuReadout, make_base_shapes, save_base_shapes, set_base_shapes
from torch import nn

from proxies.source_hash import sources_sha256
from transfer.core import rules
from transfer.core.audit import construct, skeleton
from transfer.core.errors import UserError


@dataclass(frozen=True, eq=False)
class CustomFamily:
    """The family `{build(w)}` over widths w, with μP base shapes at `base_width`."""

    build_fn: Callable[[int], nn.Module]  # the user's builder, from the live config only
    seq_len: int  # context the proxies train at; the model must accept it
    vocab_size: int  # the data's; the model's logits must have this many classes
    base_width: int  # width_mult = width / base_width
    delta_width: int | None = None  # None: 2 × base_width; only tells which dimensions grow
    target: str = "build"  # the dotted path, for messages and records
    fixed: dict = field(default_factory=dict)  # model hyperparameters a stage may not change
    depth_alpha: float = rules.DEPTH_ALPHA  # residual_mult = (base_depth / n_layers)^α (the depth hook)
    base_depth: int | None = None  # None: = n_layers
    n_layers: int | None = None  # None: the builder's own depth (no `n_layers` keyword passed)
    _cache: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        for name in ("seq_len", "vocab_size", "base_width"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.delta_width is not None and self.delta_width == self.base_width:
            raise ValueError(f"delta_width must differ from base_width={self.base_width}")
        if self.n_layers is not None and "n_layers" not in self.depth_keywords:
            raise ValueError(f"{self.target} takes no `n_layers` keyword, so its depth cannot be "
                             "changed; add `n_layers` and `residual_mult` keywords (see "
                             "proxies/custom.py) or leave validation.depth_enabled=false")

    @property
    def depth_keywords(self) -> frozenset[str]:
        """Which of the depth hook's keywords the builder accepts."""
        try:
            names = inspect.signature(self.build_fn).parameters
        except (TypeError, ValueError):
            return frozenset()
        return frozenset(k for k in ("n_layers", "residual_mult") if k in names)

    @property
    def residual_mult(self) -> float:
        if self.n_layers is None:
            return 1.0
        return rules.residual_mult(rules.depth_mult(self.n_layers, self.base_depth or
                                                    self.n_layers), self.depth_alpha)

    @property
    def _fn(self) -> Callable[[int], nn.Module]:
        """The builder with the depth hook's keywords bound (those it accepts)."""
        kw = {}
        if "n_layers" in self.depth_keywords and self.n_layers is not None:
            kw["n_layers"] = self.n_layers
        if "residual_mult" in self.depth_keywords:
            kw["residual_mult"] = self.residual_mult
        return functools.partial(self.build_fn, **kw) if kw else self.build_fn

    @property
    def delta(self) -> int:
        return self.delta_width or 2 * self.base_width

    # ---- shapes -----------------------------------------------------------------------
    def skeleton(self, width: int) -> nn.Module:
        """The model's structure at `width` (meta device), built once per width."""
        key = ("skeleton", width)
        if key not in self._cache:
            self._cache[key] = skeleton(self._fn, width, target=self.target)
        return self._cache[key]

    def base_shapes(self) -> dict:
        """mup base shapes from the base model and the delta model."""
        if "base_shapes" not in self._cache:
            self._cache["base_shapes"] = make_base_shapes(self.skeleton(self.base_width),
                                                          self.skeleton(self.delta))
        return self._cache["base_shapes"]

    def save_base_shapes(self, path) -> None:
        """Write the base shapes the models are built with as mup's readable YAML (`.bsh`)."""
        save_base_shapes(self._own_infshapes() or self.base_shapes(), str(path))

    def _own_infshapes(self) -> dict | None:
        """The builder's own base shapes, when it calls `set_base_shapes` itself."""
        params = dict(self.skeleton(self.base_width).named_parameters())
        if params and all(hasattr(p, "infshape") for p in params.values()):
            return {n: p.infshape for n, p in params.items()}
        return None

    @property
    def readout_zero_init(self) -> bool:
        """Whether the model's readout starts at zero: every MuReadout of it was built with
        `readout_zero_init=True` (mup then zeroes it); an SP model's readout is its own init."""
        readouts = [m for m in self.skeleton(self.base_width).modules()
                    if isinstance(m, MuReadout)]
        return bool(readouts) and all(m.readout_zero_init for m in readouts)

    @property
    def zero_init_query(self) -> bool:
        """False: this family never touches the attention query; the model's own init (as
        `build_fn` wrote it) is what trains."""
        return False

    @property
    def parametrization(self) -> str:
        """"mup" when the model has a MuReadout (the trainer then uses MuAdamW), else "sp"."""
        if "parametrization" not in self._cache:
            has = any(isinstance(m, MuReadout) for m in self.skeleton(self.base_width).modules())
            self._cache["parametrization"] = "mup" if has else "sp"
        return self._cache["parametrization"]

    def check_width(self, width: int, *, field: str = "width") -> None:
        """Raise ValueError naming the field when the builder cannot build `width`."""
        if not isinstance(width, int) or width < 1:
            raise ValueError(f"{field} must be a positive int, got {width!r}")
        try:
            self.skeleton(width)
        except UserError as e:
            raise ValueError(f"{field}={width}: {e}") from None

    # ---- building ---------------------------------------------------------------------
    def build(self, width: int, *, seed: int = 0, device: str | torch.device = "cpu"
              ) -> nn.Module:
        """`build_fn(width)` under `torch.manual_seed(seed)` in a forked RNG (the global one is
        left as it was), moved to `device`, with μP base shapes set.

        A model whose parameters already carry `infshape` (the builder called
        `set_base_shapes` itself) keeps them: its own μP set-up is what is being checked.
        """
        self.check_width(width)
        model = construct(self._fn, width, target=self.target, seed=seed).to(device)
        if not all(hasattr(p, "infshape") for p in model.parameters()):
            # PyTorch's default init is fan-in scaled, which is what the rescale assumes.
            set_base_shapes(model, self.base_shapes())
        return model

    def replace(self, **hp) -> CustomFamily:
        """The stages pass the model multipliers every time; they must be the config's values.
        `n_layers` (the depth check) gives the family at that depth, through the depth hook."""
        if "n_layers" in hp:
            n = int(hp.pop("n_layers"))
            deeper = dataclasses.replace(self, n_layers=n, base_depth=self.base_depth or
                                         self.n_layers or n, _cache={})
            return deeper.replace(**hp)
        for k, v in hp.items():
            if k not in self.fixed:
                raise UserError(f"proxy=custom has no hyperparameter {k!r}; the model's own "
                                "code sets everything but the training run")
            if float(v) != float(self.fixed[k]):
                raise UserError(f"proxy=custom: {k}={v} cannot be tuned (it is {self.fixed[k]} "
                                f"in proxy.{k}); the μP multipliers live in your model, so tune "
                                f"only lr: remove {k} from stages.stage.*.params")
        return self

    def source_hash(self) -> str:
        """sha256 over the source files of the builder and of every module class it builds.

        Part of the run's fingerprint: a fixed model is a new run, never a resumed old one.
        """
        objs = [getattr(self.build_fn, "func", self.build_fn)]  # unwrap functools.partial
        objs += [type(m) for m in self.skeleton(self.base_width).modules()]
        return sources_sha256(objs)

    # ---- accounting -------------------------------------------------------------------
    def n_params(self, width: int) -> int:
        return sum(p.numel() for p in self.skeleton(width).parameters())

    def flops_per_token(self, width: int) -> float:
        """6·N, N without embedding tables (lookups, not matmuls). An attention term
        (12·layers·width·seq_len for the built-in family) is left out: the shapes do not say
        how many attention layers a custom model has, so this undercounts attention models."""
        model = self.skeleton(width)
        tables = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
        tied = {id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)}
        n = sum(p.numel() for p in model.parameters() if id(p) not in tables or id(p) in tied)
        return 6.0 * n
