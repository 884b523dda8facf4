"""The code identity in the fingerprint: the trainer, family, data loader and rules decide a
trial's result and change it; reporting code does not."""

from __future__ import annotations

import shutil
from pathlib import Path

from transfer.archive import CODE_PARTS, changed_parts, code_hashes
from transfer.archive.code import import_root


def copy_packages(tmp: Path) -> Path:
    root = import_root()
    for pkg in ("transfer", "proxies"):
        shutil.copytree(root / pkg, tmp / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp


def test_the_installed_code_hashes_every_part():
    h = code_hashes()
    assert set(h) == set(CODE_PARTS) and all(len(v) == 16 for v in h.values())
    assert code_hashes() == h  # reproducible


def test_a_trainer_edit_changes_the_trainer_part_only(tmp_path):
    root = copy_packages(tmp_path)
    before = code_hashes(root)
    assert before == code_hashes()  # the copy is the same code
    trainer = root / "transfer/search/trainer.py"
    trainer.write_text(trainer.read_text().replace("def lr_multiplier", "def lr_multiplier_", 1))
    after = code_hashes(root)
    assert changed_parts(before, after) == ["trainer"]


def test_a_report_edit_changes_nothing(tmp_path):
    root = copy_packages(tmp_path)
    before = code_hashes(root)
    report = root / "transfer/outputs/report.py"
    report.write_text(report.read_text() + "\n# a reporting change\n")
    assert code_hashes(root) == before


def test_a_deleted_file_changes_its_part(tmp_path):
    root = copy_packages(tmp_path)
    before = code_hashes(root)
    (root / "transfer/core/data.py").unlink()
    assert changed_parts(before, code_hashes(root)) == ["data"]


def test_an_old_record_without_code_differs_in_every_part():
    assert changed_parts(None, {"trainer": "a", "family": "b"}) == ["family", "trainer"]
