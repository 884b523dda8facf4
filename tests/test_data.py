"""transfer.core.data: the embedded stdlib corpus, token files, batches."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import numpy as np
import pytest
import torch

from transfer.core.data import (
    eval_batches,
    load_corpus,
    sample_batch,
    stdlib_corpus,
    token_file_corpus,
)
from transfer.core.errors import DataError


@pytest.fixture(scope="module")
def stdlib():
    return stdlib_corpus()


def test_stdlib_train_and_validation_files_are_disjoint_and_both_used(stdlib):
    train, val = set(stdlib.train_files), set(stdlib.val_files)
    assert train and val
    assert not train & val


def test_stdlib_splits_hold_exactly_the_bytes_of_their_files(stdlib):
    base = Path(sysconfig.get_paths()["stdlib"])
    for files, tokens in ((stdlib.train_files, stdlib.train), (stdlib.val_files, stdlib.val)):
        assert len(tokens) == sum((base / f).stat().st_size for f in files)
    first = (base / stdlib.val_files[0]).read_bytes()
    assert bytes(stdlib.val[:len(first)].numpy()) == first


def test_stdlib_split_is_stable_and_close_to_the_requested_fraction(stdlib, tmp_path):
    # A fresh root with the same relative names splits them the same way (hash of the path).
    for name in stdlib.val_files[:3] + stdlib.train_files[:3]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    again = stdlib_corpus(root=str(tmp_path))
    assert set(again.val_files) == set(stdlib.val_files[:3])
    share = len(stdlib.val_files) / (len(stdlib.val_files) + len(stdlib.train_files))
    assert 0.05 < share < 0.2  # val_fraction=0.1, decided per file


def test_stdlib_bad_val_fraction_names_the_field():
    with pytest.raises(DataError, match="data.val_fraction"):
        stdlib_corpus(val_fraction=1.0)


def test_missing_token_file_is_a_data_error_naming_the_fix(tmp_path):
    with pytest.raises(DataError, match="does not exist; give a .npy or .bin"):
        token_file_corpus(str(tmp_path / "absent.npy"), 100)


@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_npy_of_wrong_dtype_is_a_data_error_naming_the_fix(tmp_path, dtype):
    path = tmp_path / "ids.npy"
    np.save(path, np.arange(100, dtype=dtype))
    with pytest.raises(DataError, match=r"must be uint16 or uint32.*astype"):
        token_file_corpus(str(path), 1000)


def test_token_id_at_or_above_vocab_is_a_data_error_naming_the_fix(tmp_path):
    path = tmp_path / "ids.npy"
    np.save(path, np.arange(100, dtype=np.uint16))
    with pytest.raises(DataError, match="set data.vocab_size to at least 100"):
        token_file_corpus(str(path), 99)


def test_bin_with_dtype_loads_and_splits_off_the_tail(tmp_path):
    ids = np.arange(1000, dtype=np.uint32) % 700
    path = tmp_path / "ids.bin"
    ids.tofile(path)
    corpus = token_file_corpus(str(path), 700, dtype="uint32", val_fraction=0.1)
    assert torch.equal(torch.cat([corpus.train, corpus.val]).long(), torch.from_numpy(ids).long())
    assert len(corpus.val) == 100


def test_bin_without_dtype_is_a_data_error_naming_the_fix(tmp_path):
    path = tmp_path / "ids.bin"
    np.arange(10, dtype=np.uint16).tofile(path)
    with pytest.raises(DataError, match="data.dtype=None is required.*uint16 or uint32"):
        token_file_corpus(str(path), 100)


def test_unknown_corpus_kind_lists_the_choices():
    with pytest.raises(DataError, match="available: stdlib, tokens"):
        load_corpus("wikipedia")


def test_token_corpus_without_a_path_names_the_field():
    with pytest.raises(DataError, match="data.path is required"):
        load_corpus("tokens", vocab_size=10)


def test_targets_are_inputs_shifted_by_one_and_same_generator_seed_same_batch():
    tokens = torch.arange(1000, dtype=torch.int32)
    x, y = sample_batch(tokens, 4, 16, torch.Generator().manual_seed(3))
    x2, _ = sample_batch(tokens, 4, 16, torch.Generator().manual_seed(3))
    x3, _ = sample_batch(tokens, 4, 16, torch.Generator().manual_seed(4))
    assert x.shape == y.shape == (4, 16) and x.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1]) and torch.equal(y - x, torch.ones_like(x))
    assert torch.equal(x, x2) and not torch.equal(x, x3)


def test_eval_batches_are_fixed_and_drawn_from_the_validation_stream():
    val = torch.arange(5000, 6000, dtype=torch.int32)
    first, second = eval_batches(val, 3, 4, 16), eval_batches(val, 3, 4, 16)
    assert len(first) == 3
    for (x, y), (x2, y2) in zip(first, second):
        assert torch.equal(x, x2) and torch.equal(y, y2)
        assert x.min() >= 5000 and y.max() < 6000
