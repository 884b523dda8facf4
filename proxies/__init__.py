"""μP proxy model families. `transfer` finds them through Hydra `_target_`, never by import."""

from proxies.registry import SIZES, size
from proxies.transformer import TransformerFamily

__all__ = ["SIZES", "TransformerFamily", "size"]
