"""Token sources: the interpreter's own standard library as bytes (default), or a token file.

The default corpus is real text present on every machine with Python, so nothing is ever
downloaded. Validation is held out *by file*, and the evaluation batches are a fixed set, the same
for every trial, so losses of different trials are directly comparable.
"""

from __future__ import annotations

import functools
import hashlib
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from transfer.core.errors import DataError

TOKEN_DTYPES = {"uint16": np.uint16, "uint32": np.uint32}


@dataclass(frozen=True, eq=False)
class Corpus:
    train: torch.Tensor  # (N_train,) token ids, compact dtype; batches are cast to int64
    val: torch.Tensor  # (N_val,) never trained on
    vocab_size: int
    source: str  # human-readable description
    content_hash: str  # sha256 over the token streams: part of the sweep fingerprint
    train_files: tuple[str, ...] = ()
    val_files: tuple[str, ...] = ()


def _hash(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _is_val_file(rel: str, val_fraction: float) -> bool:
    # A stable hash of the path, not of the run: every machine puts the same file on the same side.
    bucket = int(hashlib.sha1(rel.encode()).hexdigest()[:8], 16) % 10_000
    return bucket < val_fraction * 10_000


@functools.lru_cache(maxsize=4)
def stdlib_corpus(val_fraction: float = 0.1, root: str | None = None) -> Corpus:
    """Bytes of the standard library's `*.py` files (not site-packages), sorted by path."""
    if not 0 < val_fraction < 1:
        raise DataError(f"data.val_fraction must be in (0, 1), got {val_fraction}")
    base = Path(root or sysconfig.get_paths()["stdlib"])
    if not base.is_dir():
        raise DataError(f"data.root={str(base)!r} is not a directory; point it at a Python stdlib")
    files = sorted(p for p in base.rglob("*.py")
                   if "site-packages" not in p.parts and "dist-packages" not in p.parts)
    train, val, train_names, val_names = [], [], [], []
    for p in files:
        rel = p.relative_to(base).as_posix()
        data = np.frombuffer(p.read_bytes(), dtype=np.uint8)
        (val if _is_val_file(rel, val_fraction) else train).append(data)
        (val_names if _is_val_file(rel, val_fraction) else train_names).append(rel)
    if not train or not val:
        raise DataError(f"no *.py files split into train and validation under {base}; "
                        "set data.root to a Python standard library")
    tr, va = np.concatenate(train), np.concatenate(val)
    return Corpus(torch.from_numpy(tr.copy()), torch.from_numpy(va.copy()), 256,
                  f"stdlib:{base}", _hash(tr, va), tuple(train_names), tuple(val_names))


def _read_tokens(path: Path, dtype: str | None) -> np.ndarray:
    if not path.is_file():
        raise DataError(f"data.path={str(path)!r} does not exist; give a .npy or .bin token file")
    if path.suffix == ".npy":
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
        if arr.dtype not in (np.uint16, np.uint32):
            raise DataError(f"{path} has dtype {arr.dtype}; token files must be uint16 or uint32 "
                            "(re-save with arr.astype(np.uint16 or np.uint32))")
        return np.asarray(arr).reshape(-1)
    if path.suffix == ".bin":
        if dtype not in TOKEN_DTYPES:
            raise DataError(f"data.dtype={dtype!r} is required for .bin files; use uint16 or uint32")
        size = np.dtype(TOKEN_DTYPES[dtype]).itemsize
        if path.stat().st_size % size:
            raise DataError(f"{path} is {path.stat().st_size} bytes, not a whole number of "
                            f"{dtype} tokens; check data.dtype")
        return np.fromfile(path, dtype=TOKEN_DTYPES[dtype])
    raise DataError(f"data.path={str(path)!r} must end in .npy or .bin")


def token_file_corpus(path: str, vocab_size: int, *, val_path: str | None = None,
                      dtype: str | None = None, val_fraction: float = 0.1) -> Corpus:
    """Pre-tokenised ids. Without `val_path` the last `val_fraction` of the file is held out."""
    if vocab_size < 2:
        raise DataError(f"data.vocab_size must be >= 2, got {vocab_size}")
    tokens = _read_tokens(Path(path), dtype)
    if val_path:
        train, val = tokens, _read_tokens(Path(val_path), dtype)
    else:
        if not 0 < val_fraction < 1:
            raise DataError(f"data.val_fraction must be in (0, 1), got {val_fraction}")
        cut = int(len(tokens) * (1 - val_fraction))
        train, val = tokens[:cut], tokens[cut:]
    for name, arr in (("train", train), ("validation", val)):
        if len(arr) == 0:
            raise DataError(f"the {name} split of {path} is empty; give more tokens")
        top = int(arr.max())
        if top >= vocab_size:
            raise DataError(f"token id {top} in the {name} split of {path} is >= "
                            f"data.vocab_size={vocab_size}; set data.vocab_size to at least {top + 1}")
    return Corpus(torch.from_numpy(train.astype(np.int32)), torch.from_numpy(val.astype(np.int32)),
                  vocab_size, f"tokens:{Path(path).resolve()}", _hash(train, val))


def load_corpus(kind: str = "stdlib", **kwargs) -> Corpus:
    """Dispatch on the data config's `kind`."""
    if kind == "stdlib":
        return stdlib_corpus(kwargs.get("val_fraction", 0.1), kwargs.get("root"))
    if kind == "tokens":
        if not kwargs.get("path"):
            raise DataError("data.path is required for data=tokens; pass data.path=/path/to/ids.npy")
        return token_file_corpus(kwargs["path"], int(kwargs.get("vocab_size") or 0),
                                 val_path=kwargs.get("val_path"), dtype=kwargs.get("dtype"),
                                 val_fraction=kwargs.get("val_fraction", 0.1))
    raise DataError(f"unknown data.kind {kind!r}; available: stdlib, tokens")


def sample_batch(tokens: torch.Tensor, batch_size: int, seq_len: int,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows: inputs (B, T) and next-token targets (B, T)."""
    if len(tokens) <= seq_len + 1:
        raise DataError(f"the corpus has {len(tokens)} tokens, fewer than seq_len={seq_len}+1")
    starts = torch.randint(0, len(tokens) - seq_len - 1, (batch_size,), generator=generator)
    idx = starts[:, None] + torch.arange(seq_len + 1)  # (B, T+1)
    window = tokens[idx].long()
    return window[:, :-1], window[:, 1:]


def eval_batches(val: torch.Tensor, n_batches: int, batch_size: int,
                 seq_len: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The fixed held-out set: evenly spaced windows over the whole validation stream."""
    n = n_batches * batch_size
    if len(val) <= seq_len + 1:
        raise DataError(f"the validation split has {len(val)} tokens, fewer than seq_len={seq_len}+1")
    starts = torch.linspace(0, len(val) - seq_len - 2, n).long()
    window = val[starts[:, None] + torch.arange(seq_len + 1)].long()  # (n, T+1)
    return [(window[i:i + batch_size, :-1], window[i:i + batch_size, 1:])
            for i in range(0, n, batch_size)]
