"""Named proxy sizes: depth, head dimension and context shared by a whole width family.

Widths are chosen by the sweep (budget); these presets fix everything else. `tiny` runs a
trial in about a second on a laptop CPU and exists for tests and smoke runs.
"""

from __future__ import annotations

SIZES: dict[str, dict] = {
    "tiny": {"n_layers": 1, "d_head": 8, "seq_len": 32},  # tests and plumbing checks
    "cpu": {"n_layers": 2, "d_head": 16, "seq_len": 128},  # the default: 2 CPU cores, minutes
    "gpu": {"n_layers": 4, "d_head": 64, "seq_len": 512},  # one GPU, real head dims
    "gpu-deep": {"n_layers": 8, "d_head": 64, "seq_len": 1024},  # closer to target depth
}


def size(name: str) -> dict:
    """The preset called `name`; the error lists the valid choices."""
    if name not in SIZES:
        raise ValueError(f"unknown proxy size {name!r}; available: {', '.join(sorted(SIZES))}")
    return dict(SIZES[name])
