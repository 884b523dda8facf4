"""`--help` and a misspelt group option are answered from conf/, without Hydra."""

import subprocess
import sys

import pytest

from transfer.cli.clihelp import bad_group_option, defaults, groups, help_text


def test_groups_and_defaults_are_read_off_conf():
    g = groups()
    assert {"1b", "3b", "7b", "tiny"} <= set(g["model"])
    assert {"default", "smoke", "thorough"} <= set(g["budget"])
    assert defaults()["model"] == "3b" and defaults()["budget"] == "default"
    text = help_text("transfer.cli.sweep", "summary", "exits")
    assert "3b*" in text and "smoke" in text and "--hydra-help" in text


@pytest.mark.parametrize("argv, bad", [
    (["model=nope"], "unknown model 'nope'; available: 1b, 3b, 7b, gemma2-2b, gemma3-4b, hf, "
                     "llama3.2-3b, qwen2.5-3b, qwen3-4b, tiny"),
    (["budget=smoke", "proxy=gpux"], "unknown proxy 'gpux'"),
    (["model=3b", "budget=smoke", "proxy.width=32", "train.tokens=100"], None),
    (["+model=3b"], None),
])
def test_bad_group_option(argv, bad, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no ./conf: the packaged options alone
    got = bad_group_option(argv)
    assert (got is None) if bad is None else got.startswith(bad)


@pytest.mark.parametrize("cli", ["sweep", "validate"])
def test_help_and_bad_option_import_neither_hydra_nor_torch(cli):
    code = (f"import sys; sys.argv = ['transfer.{cli}', *sys.argv[1:]]\n"
            f"from transfer import {cli} as cli\n"
            "try:\n    cli.main()\nexcept SystemExit as e:\n"
            "    print('hydra' in sys.modules, 'torch' in sys.modules, e.code)\n")
    for argv, rc in ((["--help"], 0), (["model=nope"], 2)):
        out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,
                             text=True, check=True)
        assert out.stdout.split()[-3:] == ["False", "False", str(rc)], out.stdout + out.stderr


def test_validate_cli_runs_the_job_through_hydra(tmp_path):
    """The lazy job module still reaches Hydra and the job: bad input there is exit 2, one
    line (the builder cannot be imported), and no run is written."""
    out = subprocess.run([sys.executable, "-m", "transfer.cli.validate", "budget=smoke",
                          "proxy.builder._target_=no_such_pkg.build",
                          f"archive_dir={tmp_path / 'sweeps'}"], capture_output=True, text=True,
                         cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "no_such_pkg" in out.stderr
    runs = tmp_path / "sweeps"
    assert not runs.exists() or not [p for p in runs.iterdir() if p.is_dir()]


@pytest.mark.parametrize("cli", ["sweep", "validate"])
def test_first_line_is_printed_before_the_heavy_imports(cli, tmp_path):
    """A real run says what it is about to do before torch, Optuna, Hydra or transformers
    load (a cold first run spends a minute there): an import hook prints a marker on the first
    import of each, and the CLI's line must come first. The run then stops on bad input."""
    code = ("import importlib.abc, sys\n"
            "HEAVY = {'torch', 'optuna', 'hydra', 'transformers'}\n"
            "class Watch(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name in HEAVY:\n"
            "            HEAVY.discard(name); print('IMPORT', name, flush=True)\n"
            "        return None\n"
            "sys.meta_path.insert(0, Watch())\n"
            f"sys.argv = ['transfer.{cli}', *sys.argv[1:]]\n"
            f"from transfer import {cli} as cli\n"
            "cli.main()\n")
    argv = ["budget=smoke", "model=tiny", "train.batch_size=-1", f"archive_dir={tmp_path}"]
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                         cwd=tmp_path)
    lines = out.stdout.splitlines()
    assert lines and lines[0].startswith(f"transfer.{cli}: budget=smoke model=tiny"), out.stdout
    assert any(line.startswith("IMPORT") for line in lines[1:]), out.stdout + out.stderr
    assert out.returncode == 2, out.stdout + out.stderr
