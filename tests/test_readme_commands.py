"""CI runs the README's own commands (.ci/readme_commands.py), installs nothing else before the
tests, and the project works without the optional extras the README's tests do not need."""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("readme_commands", ROOT / ".ci/readme_commands.py")
readme_commands = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_commands)

README = (ROOT / "README.md").read_text()
CI_RUN = (ROOT / ".ci/run").read_text()
# what changes a venv: a package manager, or a Python that builds one
INSTALLS = re.compile(r"\b(pip3?|uv|poetry|conda|mamba|easy_install|setup\.py|-m venv)\b")
# PostgreSQL and the SLURM cluster's system packages: what the README says CI adds
SERVICES = re.compile(r"apt-get install .*\b(postgresql|slurm|munge)")


def installs_before_tests(ci_script: str) -> list[str]:
    """`.ci/run`'s own lines that install or create something before the README's test command
    runs (comments, the system services, and echo lines aside)."""
    out = []
    for line in ci_script.splitlines():
        code = line.split("#", 1)[0].strip()
        if not code or code.startswith("echo"):
            continue
        if "$TESTS" in code:
            return out
        if INSTALLS.search(code) and not SERVICES.search(code):
            out.append(code)
    raise AssertionError(".ci/run never runs the README's test command ($TESTS)")


def test_the_readme_gives_a_setup_a_main_job_and_a_test_command():
    got = readme_commands.commands(README)
    assert got["setup"].startswith("python3 -m venv .venv")
    assert "pip install -e '.[" in got["setup"]
    assert got["main"] == ".venv/bin/python -m transfer.sweep model=3b"
    assert got["test"] == ".venv/bin/python -m pytest -q"


def test_a_readme_without_its_two_commands_is_refused():
    with pytest.raises(ValueError, match="2"):
        readme_commands.commands("## Quick start\n```bash\nls\n```\n## Next\n")
    with pytest.raises(ValueError, match="transfer.sweep"):
        readme_commands.commands("## Quick start\n```bash\na && b\n```\n```bash\npytest\n```\n")


def test_ci_runs_the_readme_commands_and_installs_nothing_of_its_own():
    assert "readme setup" in CI_RUN and "readme test" in CI_RUN
    assert re.search(r'bash -c "set -euo pipefail; \$SETUP"', CI_RUN)
    assert installs_before_tests(CI_RUN) == []


def test_an_extra_package_in_ci_before_the_tests_is_caught():
    """The deliberate mismatch: one more install line in .ci/run before the test command."""
    bad = CI_RUN.replace('export CI_README_ENV=1',
                         ".venv/bin/python -m pip install -q pyarrow\nexport CI_README_ENV=1")
    assert bad != CI_RUN
    assert installs_before_tests(bad) == [".venv/bin/python -m pip install -q pyarrow"]
    other = CI_RUN.replace('bash -c "set -euo pipefail; $SETUP"',
                           'bash -c "set -euo pipefail; $SETUP"\n.venv/bin/pip install -e .[slurm]')
    assert installs_before_tests(other) == [".venv/bin/pip install -e .[slurm]"]


def readme_requirements(setup: str) -> list[Requirement]:
    """The requirements the README's set-up installs: each `pip install` step's arguments, the
    editable project as `transfer[extras]`."""
    out = []
    for step in setup.split(" && "):
        words = shlex.split(step)
        if "pip" in os.path.basename(words[0]) and words[1] == "install":
            for w in words[2:]:
                if w.startswith("-"):
                    continue
                out.append(Requirement("transfer" + w[1:] if w.startswith(".[") else w))
    return out


def closure(roots: list[Requirement]) -> set[str]:
    """Every installed distribution the roots require, through their extras and markers."""
    seen: set[str] = set()
    todo = [(r, frozenset(r.extras)) for r in roots]
    while todo:
        req, extras = todo.pop()
        name = canonicalize_name(req.name)
        key = f"{name}[{','.join(sorted(extras))}]"
        if key in seen:
            continue
        seen.add(key)
        try:
            deps = md.requires(req.name) or []
        except md.PackageNotFoundError:  # required but absent: torchvision, uninstalled
            deps = []
        for dep in deps:
            r = Requirement(dep)
            envs = [{"extra": e} for e in extras] or [{"extra": ""}]
            if r.marker is None or any(r.marker.evaluate(e) for e in envs):
                todo.append((r, frozenset(r.extras)))
    return {k.split("[")[0] for k in seen}


@pytest.mark.skipif(not os.environ.get("CI_README_ENV"),
                    reason="checks the venv that .ci/run built from the README's set-up")
def test_ci_venv_holds_exactly_what_the_readme_installs():
    """Under .ci/run: the venv's distributions are the README set-up's requirements and what
    they require (pip itself aside); torchvision was uninstalled as the README says."""
    roots = readme_requirements(readme_commands.commands(README)["setup"])
    wanted = closure(roots)
    installed = {canonicalize_name(d.metadata["Name"]) for d in md.distributions()}
    assert installed - wanted - {"pip", "setuptools", "wheel"} == set()
    assert "torchvision" not in installed


def test_the_readme_installs_every_extra_the_tests_import():
    """A user's `pytest` after the README's set-up collects the whole suite: the extras the
    tests need (hf, postgres, slurm) are in its install line."""
    roots = readme_requirements(readme_commands.commands(README)["setup"])
    project = next(r for r in roots if r.name == "transfer")
    assert {"dev", "postgres", "hf", "slurm"} <= set(project.extras)


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, check=False)


# the interpreter as it is without the extra: the path finder does not find the plugin
BLOCK_PLUGIN = ("import sys, importlib.machinery as m\nfind = m.PathFinder.find_spec\n"
                "def hide(name, path=None, target=None):\n"
                "    if name.startswith('hydra_plugins.hydra_submitit_launcher'):\n"
                "        return None\n"
                "    return find(name, path, target)\n"
                "m.PathFinder.find_spec = staticmethod(hide)\n")


def test_the_launcher_module_imports_without_the_slurm_extra():
    done = _python(BLOCK_PLUGIN + "from transfer.cli import launcher\n"
                   "assert launcher.plugin is None and launcher.run_code([0, 3]) == 3\n"
                   "assert not hasattr(launcher, 'SlurmLauncher')\n"
                   "import hydra_plugins.transfer_launcher.launchers as l\n"
                   "assert not hasattr(l, 'SlurmLauncher')\n")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("option", ["slurm", "local_workers"])
def test_a_launcher_without_its_extra_is_exit_2_and_one_line_naming_the_install(option):
    done = _python(BLOCK_PLUGIN + "sys.argv = ['transfer.sweep', '-m', "
                   f"'hydra/launcher={option}', 'model=tiny']\n"
                   "from transfer.cli.sweep import main\nmain()\n")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install -e '.[slurm]'" in lines[0], done.stderr
    assert f"hydra/launcher={option}" in lines[0]


def test_help_does_not_need_the_slurm_extra():
    done = _python(BLOCK_PLUGIN + "sys.argv = ['transfer.sweep', '--help']\n"
                   "from transfer.cli.sweep import main\nmain()\n")
    assert done.returncode == 0 and "config groups" in done.stdout, done.stderr
