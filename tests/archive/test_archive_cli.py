"""`python -m transfer.archive`: outputs and exit codes, called in-process through `main`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from transfer.archive import Archive, cli
from transfer.archive.cli import main


def run(archive: Archive, capsys, *args: str) -> tuple[int, str, str]:
    code = main(["--root", str(archive.root), *args])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_list_empty_and_populated(archive: Archive, add_run: Callable, capsys):
    code, out, _ = run(archive, capsys, "list")
    assert code == 0 and "no runs" in out
    add_run("alpha")
    add_run("beta")
    code, out, _ = run(archive, capsys, "list")
    assert code == 0 and "alpha" in out and "beta" in out and "0123456789abcdef" in out


def test_show_prints_row_verdict_and_files(archive: Archive, add_run, capsys):
    add_run("alpha")
    code, out, _ = run(archive, capsys, "show", "alpha")
    assert code == 0
    for text in ("fingerprint: 0123456789abcdef", "validated: true", "saved_gpu_hours: 1200.0",
                 "trials.csv", "config.yaml"):
        assert text in out


def test_unknown_run_lists_the_available_ones(archive: Archive, add_run, capsys):
    add_run("alpha")
    add_run("beta")
    for args in (["show", "gamma"], ["diff", "alpha", "gamma"]):
        code, _, err = run(archive, capsys, *args)
        assert code == 2
        assert "'gamma'" in one_line(err) and "available: alpha, beta" in err


def test_diff_shows_config_winners_and_verdict(archive: Archive, add_run, capsys):
    add_run("alpha", lr=0.02)
    add_run("beta", lr=0.04, validated=False)
    archive.write_yaml("beta", "config.yaml", {"model": {"name": "3b"},
                                               "train": {"lr": 0.01, "tokens": 2000},
                                               "proxy": {"width": 64}})
    code, out, _ = run(archive, capsys, "diff", "alpha", "beta")
    assert code == 0
    lines = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert lines == {"validated": ["True", "False"], "winners.lr": ["0.02", "0.04"],
                     "config.train.tokens": ["1000", "2000"]}


def test_diff_of_identical_runs(archive: Archive, add_run, capsys):
    add_run("alpha")
    add_run("beta")
    code, out, _ = run(archive, capsys, "diff", "alpha", "beta")
    assert code == 0 and "do not differ" in out


@pytest.mark.parametrize("table", ["runs", "trials"])
def test_export_csv_roundtrips(archive: Archive, add_run, capsys, tmp_path: Path, table: str):
    add_run("alpha")
    add_run("beta")
    out_path = tmp_path / f"{table}.csv"
    code, out, _ = run(archive, capsys, "export", "--format", "csv", "--table", table,
                       "--out", str(out_path))
    assert code == 0 and str(out_path) in out
    got = pd.read_csv(out_path)
    want = archive.runs() if table == "runs" else archive.trials()
    assert list(got.columns) == list(want.columns) and len(got) == len(want) == 2 * (
        1 if table == "runs" else 2)


def test_export_parquet_roundtrips(archive: Archive, add_run, capsys, tmp_path: Path):
    pytest.importorskip("pyarrow")
    add_run("alpha")
    out_path = tmp_path / "trials.parquet"
    code, _, _ = run(archive, capsys, "export", "--format", "parquet", "--table", "trials",
                     "--out", str(out_path))
    assert code == 0
    pd.testing.assert_frame_equal(pd.read_parquet(out_path), archive.trials(),
                                  check_dtype=False)


def test_export_parquet_without_pyarrow_names_the_extra(archive: Archive, add_run, capsys,
                                                         monkeypatch, tmp_path: Path):
    add_run("alpha")
    monkeypatch.setattr(cli, "have_pyarrow", lambda: False)  # pandas itself may use pyarrow
    code, _, err = run(archive, capsys, "export", "--format", "parquet", "--out",
                       str(tmp_path / "x.parquet"))
    assert code == 2 and "pip install transfer[parquet]" in one_line(err)
    assert not (tmp_path / "x.parquet").exists()


def test_unknown_format_lists_the_choices(archive: Archive, capsys):
    code, _, err = run(archive, capsys, "export", "--format", "xls")
    line = one_line(err)
    assert code == 2 and "'xls'" in line and "csv" in line and "parquet" in line


def test_missing_command_is_a_user_error(archive: Archive, capsys):
    code, _, err = run(archive, capsys)
    assert code == 2 and one_line(err).startswith("error:")


def test_check_healthy_broken_and_rebuild(archive: Archive, add_run, capsys):
    add_run("alpha")
    add_run("beta")
    code, out, _ = run(archive, capsys, "check")
    assert code == 0 and "OK: 2 runs" in out
    archive.index_path.write_text("not,an,index\n")
    code, out, _ = run(archive, capsys, "list")
    assert code == 2  # a corrupted index is a user error naming the file, not a traceback
    code, out, _ = run(archive, capsys, "check")
    assert code == 1 and str(archive.index_path) in out and "--rebuild" in out
    code, out, _ = run(archive, capsys, "check", "--rebuild")
    assert code == 0 and "rebuilt" in out
    code, out, _ = run(archive, capsys, "list")
    assert code == 0 and "alpha" in out and "beta" in out


def test_list_warns_about_a_broken_run_and_shows_the_rest(archive: Archive, add_run, capsys):
    add_run("alpha")
    add_run("beta")
    (archive.run_dir("alpha") / "run.json").write_text("[")
    code, out, err = run(archive, capsys, "list")
    assert code == 0 and "beta" in out and "alpha" not in out
    assert "alpha" in one_line(err) and one_line(err).startswith("warning:")


def test_module_entry_point(archive: Archive, add_run):
    add_run("alpha")
    done = subprocess.run([sys.executable, "-m", "transfer.archive", "--root", str(archive.root),
                           "list"], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "alpha" in done.stdout


def test_runs_written_in_the_same_second_are_newest_last_written_first():
    import pandas as pd

    from transfer.archive import newest_first

    df = pd.DataFrame({"name": ["a", "again", "b", "c"],
                       "created": ["2026-12-02T06:39:16", "2026-12-02T06:39:27",
                                   "2026-12-02T06:39:27", "2026-12-02T06:39:01"]})
    assert list(newest_first(df)["name"]) == ["b", "again", "a", "c"]
