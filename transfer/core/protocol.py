"""What the rest of `transfer` calls on a proxy family, as one `typing.Protocol`.

A proxy family is a set of models indexed by width that share every other choice. `transfer`
never imports one: the sweep builds it from `proxy.builder._target_` (the built-in
`proxies.TransformerFamily`), `python -m transfer.validate` wraps a user's `build(width)` in
`proxies.custom.CustomFamily`. Both implement `ProxyFamily` structurally; `isinstance(x,
ProxyFamily)` checks that every member is present (not their signatures).

A family that also classifies its own parameters for the optimizer implements the optional
`transfer.search.trainer.GroupedFamily` (`param_groups`) as well.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = ["MEMBERS", "ProxyFamily", "missing_members"]


@runtime_checkable
class ProxyFamily(Protocol):
    """A width-indexed family of proxy models (read-only members, then methods)."""

    @property
    def seq_len(self) -> int:
        """Context every model of the family trains at."""

    @property
    def n_layers(self) -> int | None:
        """Depth of the models; None: the builder's own (a custom model without the depth
        hook)."""

    @property
    def parametrization(self) -> str:
        """"mup" or "sp": picks the optimizer's width rules and the coordinate check's."""

    @property
    def delta(self) -> int:
        """The width compared with `base_width` to tell which dimensions grow (base shapes)."""

    @property
    def depth_keywords(self) -> frozenset[str]:
        """Which of the depth hook's keywords (`n_layers`, `residual_mult`) the family's models
        are built with: "n_layers" in it means `replace(n_layers=...)` changes the depth."""

    @property
    def zero_init_query(self) -> bool:
        """Whether the family zeroes the attention query at init (uniform attention)."""

    @property
    def readout_zero_init(self) -> bool:
        """Whether the readout starts at exactly zero (μP's recommendation)."""

    def check_width(self, width: int, *, field: str = "width") -> None:
        """Raise ValueError naming `field` and the fix when `width` cannot be built."""

    def build(self, width: int, *, seed: int = 0, device: str | torch.device = "cpu"
              ) -> nn.Module:
        """A freshly initialised model of `width`, deterministic for `seed`."""

    def replace(self, **changes: Any) -> ProxyFamily:
        """The family with `changes` (the stages' model multipliers, or `n_layers`)."""

    def n_params(self, width: int) -> int:
        """Parameters of the model at `width`."""

    def flops_per_token(self, width: int) -> float:
        """Training FLOPs per token at `width` (the cost model's and the trainer's count)."""

    def base_shapes(self) -> dict:
        """mup base shapes: parameter name → its infinite shape, from base and delta width."""

    def save_base_shapes(self, path: str | Path) -> None:
        """Write the base shapes as mup's readable YAML (`.bsh`)."""

    def source_hash(self) -> str:
        """sha256 over the source of the family and of every module class it builds."""


# Every member's name, read off the class (never a second list kept by hand).
MEMBERS: tuple[str, ...] = tuple(sorted(n for n in vars(ProxyFamily) if not n.startswith("_")))


def missing_members(family: object) -> list[str]:
    """The members of `ProxyFamily` that `family` lacks (empty: it is one)."""
    return [n for n in MEMBERS if not hasattr(family, n)]
