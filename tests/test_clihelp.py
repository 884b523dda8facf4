"""`--help` and a misspelt group option are answered from conf/, without Hydra."""

import subprocess
import sys

import pytest

from transfer.clihelp import bad_group_option, defaults, groups, help_text


def test_groups_and_defaults_are_read_off_conf():
    g = groups()
    assert {"1b", "3b", "7b", "tiny"} <= set(g["model"])
    assert {"default", "smoke", "thorough"} <= set(g["budget"])
    assert defaults()["model"] == "3b" and defaults()["budget"] == "default"
    text = help_text("transfer.sweep", "summary", "exits")
    assert "3b*" in text and "smoke" in text and "--hydra-help" in text


@pytest.mark.parametrize("argv, bad", [
    (["model=nope"], "unknown model 'nope'; available: 1b, 3b, 7b, tiny"),
    (["budget=smoke", "proxy=gpux"], "unknown proxy 'gpux'"),
    (["model=3b", "budget=smoke", "proxy.width=32", "train.tokens=100"], None),
    (["+model=3b"], None),
])
def test_bad_group_option(argv, bad):
    got = bad_group_option(argv)
    assert (got is None) if bad is None else got.startswith(bad)


def test_sweep_help_and_bad_option_do_not_import_hydra():
    code = ("import sys; sys.argv = ['transfer.sweep', *sys.argv[1:]]\n"
            "from transfer import sweep\n"
            "try:\n    sweep.main()\nexcept SystemExit as e:\n"
            "    print('hydra' in sys.modules, e.code)\n")
    for argv, rc in ((["--help"], 0), (["model=nope"], 2)):
        out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,
                             text=True, check=True)
        assert out.stdout.split()[-2:] == ["False", str(rc)], out.stdout + out.stderr
