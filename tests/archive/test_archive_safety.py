"""The archive is data, never code: nothing named in an archived file is imported or run."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from transfer.archive import Archive, ArchiveError, fingerprint
from transfer.archive.cli import main

EVIL = "transfer_archive_evil_module"


@pytest.fixture
def marker(tmp_path: Path, monkeypatch) -> Path:
    """An importable module that creates `marker` the moment anything imports it."""
    mod_dir = tmp_path / "mods"
    mod_dir.mkdir()
    marker = tmp_path / "imported.marker"
    (mod_dir / f"{EVIL}.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n"
        "class Boom:\n    def __init__(self, *a, **k):\n        raise SystemExit('instantiated')\n")
    monkeypatch.syspath_prepend(str(mod_dir))
    monkeypatch.delitem(sys.modules, EVIL, raising=False)
    return marker


def _plant(archive: Archive, add_run: Callable, name: str) -> None:
    add_run(name)
    target = {"_target_": f"{EVIL}.Boom", "_args_": ["x"]}
    archive.write_yaml(name, "config.yaml", {"proxy": {"builder": target},
                                             "hook": {"_target_": "os.system",
                                                      "command": "touch pwned"}})
    archive.write_json(name, "validation.json", {"validated": True, "cb": target})
    archive.write_yaml(name, "target.yaml", {"optimizer": target})


def test_targets_in_archived_files_are_read_as_strings(archive: Archive, add_run, marker, capsys,
                                                        tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _plant(archive, add_run, "evil")
    add_run("good")
    run = archive.load_run("evil")
    assert run["config"]["proxy"]["builder"]["_target_"] == f"{EVIL}.Boom"
    archive.runs(), archive.trials(), archive.find("0123456789abcdef"), archive.check()
    fingerprint(run["config"], data_hash="ab", versions={"torch": "1", "mup": "1",
                                                         "optuna": "1", "python": "3.11"})
    for args in (["list"], ["show", "evil"], ["diff", "evil", "good"], ["check"],
                 ["export", "--out", str(tmp_path / "x.csv")]):
        assert main(["--root", str(archive.root), *args]) == 0, args
    capsys.readouterr()
    assert not marker.exists() and EVIL not in sys.modules
    assert not (tmp_path / "pwned").exists()


def test_python_yaml_tags_are_refused_not_executed(archive: Archive, add_run, tmp_path: Path,
                                                   monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    add_run("evil")
    add_run("good")
    cfg = archive.run_dir("evil") / "config.yaml"
    cfg.write_text("x: !!python/object/apply:os.system ['touch pwned']\n")
    with pytest.raises(ArchiveError) as err:
        archive.load_run("evil")
    assert str(cfg) in str(err.value)
    assert any(str(cfg) in p for p in archive.check())
    assert main(["--root", str(archive.root), "show", "evil"]) == 2
    assert main(["--root", str(archive.root), "show", "good"]) == 0
    capsys.readouterr()
    assert not (tmp_path / "pwned").exists()


def test_writing_refuses_objects_that_are_not_plain_data(archive: Archive):
    import yaml

    archive.create_run("a", fingerprint="f1")
    with pytest.raises(yaml.representer.RepresenterError):
        archive.write_yaml("a", "config.yaml", {"x": object()})
    with pytest.raises(TypeError, match="not JSON data"):
        archive.write_json("a", "cost.json", {"x": object()})
    assert not (archive.run_dir("a") / "config.yaml").exists()
