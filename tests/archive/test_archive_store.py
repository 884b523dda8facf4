"""Archive storage: atomic writes, locked index updates, corruption detection and rebuild."""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from transfer.archive import INDEX_COLUMNS, Archive, ArchiveError
from transfer.core.errors import UserError


def _tmp_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.startswith(".tmp-")]


def test_record_roundtrip_and_upsert_keeps_other_fields(archive: Archive, add_run: Callable):
    add_run("a")
    created = archive.runs().loc[0, "created"]
    archive.record({"name": "a", "status": "rejected"})
    df = archive.runs()
    assert list(df.columns) == list(INDEX_COLUMNS)
    row = df.iloc[0]
    assert (row["status"], row["model"], row["created"]) == ("rejected", "3b", created)
    assert json.loads(row["winners"]) == {"lr": 0.02}
    assert bool(row["validated"]) is True and row["saved_gpu_hours"] == 1200.0
    run_json = json.loads((archive.run_dir("a") / "run.json").read_text())
    assert run_json["status"] == "rejected" and run_json["winners"] == {"lr": 0.02}


def test_create_run_refuses_a_different_fingerprint_and_resumes_the_same(archive: Archive):
    archive.create_run("a", fingerprint="f1")
    assert archive.create_run("a", fingerprint="f1") == archive.run_dir("a")
    with pytest.raises(UserError, match="fingerprint f1"):
        archive.create_run("a", fingerprint="f2")


def test_create_run_refuses_a_foreign_folder(archive: Archive):
    (archive.root / "x").mkdir(parents=True)
    (archive.root / "x" / "notes.txt").write_text("mine")
    with pytest.raises(ArchiveError, match="no run.json"):
        archive.create_run("x", fingerprint="f1")


@pytest.mark.parametrize("name", ["../evil", "a/b", ".hidden", "", "a b"])
def test_run_names_cannot_escape_the_archive(archive: Archive, name: str):
    with pytest.raises(UserError, match="plain folder name"):
        archive.run_dir(name)


@pytest.mark.parametrize("relpath", ["../x.json", "/etc/x.json", "plots/../../x.json"])
def test_relpaths_cannot_escape_the_run(archive: Archive, relpath: str):
    archive.create_run("a", fingerprint="f1")
    with pytest.raises(ValueError, match="inside the run folder"):
        archive.write_text("a", relpath, "x")


def test_record_rejects_unknown_columns_and_statuses(archive: Archive):
    archive.create_run("a", fingerprint="f1")
    with pytest.raises(ValueError, match="unknown index columns"):
        archive.record({"name": "a", "colour": "red"})
    with pytest.raises(ValueError, match="status must be"):
        archive.record({"name": "a", "status": "done"})


class Interrupted(BaseException):
    """Stands in for a kill or Ctrl-C in the middle of a write."""


@pytest.mark.parametrize("where", ["fsync", "replace"])
def test_interrupted_write_leaves_old_file_and_no_temp(archive: Archive, monkeypatch, where):
    archive.create_run("a", fingerprint="f1")
    path = archive.write_json("a", "validation.json", {"old": True})

    def boom(*args, **kwargs):
        raise Interrupted

    monkeypatch.setattr(os, where, boom)
    with pytest.raises(Interrupted):
        archive.write_json("a", "validation.json", {"new": True, "big": list(range(10_000))})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"old": True}
    assert _tmp_files(archive.root) == []


def test_interrupted_copy_leaves_no_partial_file(archive: Archive, tmp_path: Path, monkeypatch):
    archive.create_run("a", fingerprint="f1")
    src = tmp_path / "study.journal"
    src.write_bytes(b"x" * 100_000)

    def boom(*args, **kwargs):
        raise Interrupted

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(Interrupted):
        archive.copy_into("a", "study.journal", src)
    monkeypatch.undo()
    assert not (archive.run_dir("a") / "study.journal").exists()
    assert _tmp_files(archive.root) == []
    assert archive.copy_into("a", "study.journal", src).read_bytes() == src.read_bytes()


def _archive_many(root: str, worker: int, n: int) -> None:
    a = Archive(root)
    for i in range(n):
        name = f"w{worker}-r{i}"
        a.create_run(name, fingerprint=f"{worker:08x}{i:08x}", model="tiny")
        a.write_json(name, "cost.json", {"worker": worker})
        a.record({"name": name, "status": "finished", "winners": {"lr": i}})


def test_concurrent_archiving_loses_no_row(archive: Archive):
    workers, per_worker = 4, 6
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_archive_many, args=(str(archive.root), w, per_worker))
             for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * workers
    df = archive.runs()
    expected = {f"w{w}-r{i}" for w in range(workers) for i in range(per_worker)}
    assert set(df["name"]) == expected and len(df) == len(expected)
    assert set(df["status"]) == {"finished"}
    assert archive.check() == []


def test_find_returns_matches_newest_first_with_finished_flag(archive: Archive, add_run):
    add_run("old", created="2026-01-01T00:00:00+00:00")
    add_run("new", created="2026-02-01T00:00:00+00:00")
    archive.create_run("partial", fingerprint="0123456789abcdef",
                       created="2026-03-01T00:00:00+00:00")
    add_run("other", fingerprint="ffffffffffffffff")
    found = archive.find("0123456789abcdef")
    assert [(r["name"], r["finished"]) for r in found] == [
        ("partial", False), ("new", True), ("old", True)]
    assert archive.find("0000000000000000") == []


def test_trials_across_runs_carry_the_run_name(archive: Archive, add_run):
    add_run("a")
    add_run("b")
    t = archive.trials()
    assert list(t.columns[:2]) == ["run", "number"]
    assert t.groupby("run").size().to_dict() == {"a": 2, "b": 2}
    assert set(archive.trials(["b"])["run"]) == {"b"}
    with pytest.raises(ArchiveError, match="available: a, b"):
        archive.trials(["zzz"])


def test_load_run_is_plain_data(archive: Archive, add_run):
    add_run("a")
    run = archive.load_run("a")
    assert run["config"]["train"]["lr"] == 0.01
    assert run["validation"]["validated"] is True and run["target"] == {"lr": 0.02}
    assert run["run"]["fingerprint"] == "0123456789abcdef"


def test_empty_archive_reads_as_empty(archive: Archive):
    assert archive.runs().empty and list(archive.runs().columns) == list(INDEX_COLUMNS)
    assert archive.trials().empty and archive.find("x") == [] and archive.check() == []


CORRUPTIONS = {
    "binary": b"\xff\xfe\x00garbage\x00",
    "unterminated quote": b'name,created\n"a,2026\n',
    "missing columns": b"name,created\na,2026\n",
    "duplicate names": None,  # built from the real index below
    "empty": b"",
}


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_corrupted_index_is_named_and_rebuilt(archive: Archive, add_run, kind: str):
    add_run("a")
    add_run("b", lr=0.03)
    before = archive.runs()
    index = archive.index_path
    data = CORRUPTIONS[kind]
    if data is None:
        lines = index.read_bytes().splitlines(keepends=True)
        data = b"".join([*lines, lines[1]])
    index.write_bytes(data)
    with pytest.raises(ArchiveError, match="check --rebuild") as err:
        archive.runs()
    assert str(index) in str(err.value)
    assert archive.load_run("b")["target"] == {"lr": 0.03}  # runs stay readable by name
    problems = archive.check()
    assert problems and str(index) in problems[0]
    archive.check(rebuild=True)
    pd.testing.assert_frame_equal(archive.runs(), before)
    assert archive.check() == []


def test_record_with_corrupted_index_keeps_the_row_in_run_json(archive: Archive, add_run):
    add_run("a")
    add_run("b")
    archive.index_path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ArchiveError, match="saved .*run.json but did not update the index"):
        archive.record({"name": "a", "status": "failed"})
    assert archive.index_path.read_bytes() == b"\xff\xfe\x00garbage"  # not overwritten blind
    archive.check(rebuild=True)
    assert archive.runs().set_index("name")["status"].to_dict() == {"a": "failed", "b": "finished"}


def test_hand_edited_index_row_is_detected(archive: Archive, add_run):
    add_run("a")
    add_run("b")
    index = archive.index_path
    index.write_text(index.read_text().replace("finished", "rejected", 1))
    problems = archive.check()
    assert len(problems) == 1 and "'a'" in problems[0] and "status" in problems[0]
    archive.check(rebuild=True)
    assert set(archive.runs()["status"]) == {"finished"}


def test_missing_index_and_orphan_rows_are_fixed_by_rebuild(archive: Archive, add_run):
    import shutil

    add_run("a")
    add_run("b")
    shutil.rmtree(archive.run_dir("b"))
    assert any("'b' has no folder" in p for p in archive.check())
    archive.index_path.unlink()
    assert any("missing" in p for p in archive.check())
    archive.check(rebuild=True)
    assert list(archive.runs()["name"]) == ["a"] and archive.check() == []


def test_corrupted_run_json_skips_only_that_run(archive: Archive, add_run):
    add_run("a")
    add_run("b")
    bad = archive.run_dir("a") / "run.json"
    bad.write_text('{"name": "a", "status": ')
    with pytest.warns(UserWarning, match="skipping run 'a'"):
        df = archive.runs()
    assert list(df["name"]) == ["b"]
    with pytest.warns(UserWarning):
        assert set(archive.trials()["run"]) == {"b"}
    problems = archive.check()
    assert len(problems) == 1 and str(bad) in problems[0]
    archive.check(rebuild=True)  # leaves the broken run out, keeps the good one
    assert list(archive.runs()["name"]) == ["b"]


@pytest.mark.parametrize("fname", ["validation.json", "config.yaml", "cost.json", "target.yaml"])
def test_corrupted_data_file_is_named_and_other_runs_load(archive: Archive, add_run, fname):
    add_run("a")
    add_run("b")
    bad = archive.run_dir("a") / fname
    bad.write_text("{unclosed: [1, 2" if fname.endswith(".yaml") else '{"validated": tru')
    assert list(archive.runs()["name"]) == ["a", "b"]  # the index row is still good
    with pytest.raises(ArchiveError) as err:
        archive.load_run("a")
    assert str(bad) in str(err.value)
    assert archive.load_run("b")["validation"]["validated"] is True
    assert [str(bad) in p for p in archive.check()] == [True]


def test_corrupted_trials_csv_is_skipped_with_a_warning(archive: Archive, add_run):
    add_run("a")
    add_run("b")
    bad = archive.run_dir("a") / "trials.csv"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.warns(UserWarning, match="trials.csv"):
        assert set(archive.trials()["run"]) == {"b"}
    assert any(str(bad) in p for p in archive.check())


def test_folder_without_run_json_is_reported(archive: Archive, add_run):
    add_run("a")
    (archive.root / "stray").mkdir()
    problems = archive.check()
    assert len(problems) == 1 and "stray" in problems[0] and "no run.json" in problems[0]
