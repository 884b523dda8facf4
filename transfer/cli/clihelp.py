"""`--help` for the CLIs without Hydra: the config groups read off `conf/`, in well under a
second (Hydra's own help composes every group's repository: 0.03 s against 1.19 s for
`transfer.cli.sweep` in `benchmarks/startup.py`; it stays behind `--hydra-help`). Only the standard
library (and `transfer.core.errors`) is imported."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from transfer.core.compose import CONF_DIR
from transfer.core.errors import EXIT_USER_ERROR

HELP_FLAGS = ("--help", "-h")


def wants_help(argv: list[str]) -> bool:
    return any(a in HELP_FLAGS for a in argv)


USER_CONF = "conf"  # a team's presets beside the command (hydra_plugins/transfer_conf reads it)


def conf_dirs() -> list[Path]:
    """Where Hydra finds group options: the packaged conf/, then ./conf where it exists."""
    user = Path.cwd() / USER_CONF
    return [CONF_DIR] + ([user] if user.is_dir() and user.resolve() != CONF_DIR else [])


def groups(dirs: list[Path] | Path | None = None) -> dict[str, list[str]]:
    """Config group → its options (file stems) over `dirs` (default: `conf_dirs()`), e.g.
    {"model": ["1b", "3b", ..., "ours"]}."""
    dirs = conf_dirs() if dirs is None else [dirs] if isinstance(dirs, Path) else dirs
    found: dict[str, set[str]] = {}
    for conf_dir in dirs:
        for d in (p for p in conf_dir.rglob("*") if p.is_dir()):
            options = {f.stem for f in d.glob("*.yaml")}
            if options:
                found.setdefault(d.relative_to(conf_dir).as_posix(), set()).update(options)
    return {g: sorted(found[g]) for g in sorted(found)}


def defaults(conf_dir: Path = CONF_DIR) -> dict[str, str]:
    """Each group's default in conf/config.yaml's `defaults:` list (`- model: 3b` lines)."""
    out = {}
    for line in (conf_dir / "config.yaml").read_text().splitlines():
        item = line.split("#")[0].strip()
        if item.startswith("- ") and ":" in item and "override" not in item:
            k, v = (s.strip() for s in item[2:].split(":", 1))
            out[k] = v
    return out


def bad_group_option(argv: list[str], dirs: list[Path] | Path | None = None) -> str | None:
    """One line for `group=option` with an option conf/ does not have (Hydra's own message is
    a dozen lines and exit 1), else None."""
    known = groups(dirs)
    for a in argv:
        g, sep, option = a.lstrip("+~").partition("=")
        if sep and g in known and option and option not in known[g] and "/" not in option:
            return (f"unknown {g} {option!r}; available: {', '.join(known[g])} "
                    f"(pass {g}=<one of them>)")
    return None


# launcher option → (the module it needs, the extra that installs it)
LAUNCHER_EXTRAS = {"slurm": ("hydra_plugins.hydra_submitit_launcher", "slurm"),
                   "local_workers": ("hydra_plugins.hydra_submitit_launcher", "slurm")}


def missing_extra(argv: list[str]) -> str | None:
    """One line for `hydra/launcher=<option>` whose plugin is not installed, else None: Hydra
    would fail composing the plugin's schema, a dozen lines and exit 1."""
    for a in argv:
        g, sep, option = a.lstrip("+~").partition("=")
        if sep and g == "hydra/launcher" and option in LAUNCHER_EXTRAS:
            module, extra = LAUNCHER_EXTRAS[option]
            if importlib.util.find_spec(module) is None:
                return (f"hydra/launcher={option} needs the [{extra}] extra "
                        f"(hydra-submitit-launcher), not installed here: pip install -e "
                        f"'.[{extra}]' in a checkout, or pip install 'transfer[{extra}]'")
    return None


def answer_without_hydra(prog: str, summary: str, exits: str, argv: list[str]) -> None:
    """Exit here for what needs no Hydra: `--help` (0, the help on stdout) and a misspelt group
    option (2, one line on stderr); return otherwise, for Hydra to compose the config."""
    if wants_help(argv):
        try:
            print(help_text(prog, summary, exits), flush=True)
        except BrokenPipeError:  # `--help | head`: the reader left; say nothing more
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    if (bad := bad_group_option(argv) or missing_extra(argv)) is not None:
        print(bad, file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)


def help_text(prog: str, summary: str, exits: str) -> str:
    d = defaults()
    lines = [f"usage: python -m {prog} [group=option ...] [key=value ...]", "", summary, "",
             "config groups (default marked *):"]
    for g, options in groups().items():
        lines.append(f"  {g + ':':<18} " + ", ".join(o + ("*" if d.get(g) == o else "")
                                                    for o in options))
    lines += ["", "keys: any field of the schema (transfer/core/config.py), e.g. proxy.width=128 "
              "train.tokens=614400 validation.seeds=4 workers=2 archive_dir=sweeps",
              f"the composed config: python -m {prog} --cfg job [overrides]",
              f"Hydra's own flags: python -m {prog} --hydra-help", "", exits]
    return "\n".join(lines)


def starting_line(command: str, argv: list[str]) -> str:
    """The first line a real run prints, before torch, Optuna, Hydra or transformers load, so a
    terminal is not silent while they do: ~10 s from a fresh clone's install to its run folder
    on 2 cores at f0fff51 (the minute or two that cost.json's `phases.startup` said before
    970042c was the install itself, counted by /proc's fork time: benchmarks/RESULTS.md)."""
    given = " ".join(a for a in argv if not a.startswith("-")) or "the defaults"
    return (f"{command}: {given}; loading torch, Optuna and Hydra, then planning the run")
