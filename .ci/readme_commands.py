"""The README's two commands, read from the README itself, so that CI runs what a new user runs.

The Quick start's first bash block is the set-up joined to the main job with `&&`; its second is
the test command. `setup` prints the first block without its last step (`python -m
transfer.sweep ...`: CI does not spend 20 minutes on it), `main` prints that last step, `test`
prints the second block. `.ci/run` evaluates them verbatim; tests/test_readme_commands.py checks
that `.ci/run` installs nothing else before the tests.
Usage: python3 .ci/readme_commands.py setup|main|test [README.md]  (standard library only)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)
MAIN_JOB = "python -m transfer.sweep"


def quick_start_blocks(text: str) -> list[str]:
    """The bash blocks of the README's `## Quick start` section, each one line."""
    start = text.index("## Quick start")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end > 0 else None]
    return [" ".join(b.split("\n")).strip() for b in BLOCK.findall(section)]


def commands(text: str) -> dict[str, str]:
    """{"setup": ..., "main": ..., "test": ...} from the README's text; ValueError when its
    Quick start is not two blocks, set-up `&&` main job, then the test command."""
    blocks = quick_start_blocks(text)
    if len(blocks) != 2:
        raise ValueError(f"the README's Quick start has {len(blocks)} bash blocks, expected 2")
    steps = [s.strip() for s in blocks[0].split(" && ")]
    if len(steps) < 2 or MAIN_JOB not in steps[-1]:
        raise ValueError(f"the README's first command does not end with {MAIN_JOB!r}")
    if "pytest" not in blocks[1]:
        raise ValueError("the README's second command does not run pytest")
    return {"setup": " && ".join(steps[:-1]), "main": steps[-1], "test": blocks[1]}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("setup", "main", "test"):
        print("usage: python3 .ci/readme_commands.py setup|main|test [README.md]",
              file=sys.stderr)
        return 2
    path = Path(argv[1]) if len(argv) > 1 else README
    try:
        print(commands(path.read_text())[argv[0]])
    except ValueError as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
