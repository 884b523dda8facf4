"""User errors: anything a user can get wrong ends as exit code 2 and one line naming the fix."""

from __future__ import annotations

import sys
from collections.abc import Callable

EXIT_OK = 0
EXIT_USER_ERROR = 2
EXIT_REJECTED = 3  # the validator found evidence against transfer
EXIT_INCONCLUSIVE = 4  # the measurement cannot tell (too noisy, too flat, not bracketed)


def verdict_exit_code(outcome: str | None) -> int:
    """The CLI exit code of a verdict's outcome; no verdict (validation off) exits 0."""
    return {None: EXIT_OK, "passed": EXIT_OK, "rejected": EXIT_REJECTED,
            "inconclusive": EXIT_INCONCLUSIVE}[outcome]


class UserError(Exception):
    """Bad input. The message is one line: what is wrong and how to fix it."""


class DataError(UserError):
    """The data source is missing or malformed."""


class BudgetExceeded(UserError):
    """The predicted or measured tuning cost exceeds the configured cap."""


def exit_code(job: Callable[..., int], *args, **kwargs) -> int:
    """Run a CLI job: its own exit code, or 2 with the UserError's one line on stderr."""
    try:
        return job(*args, **kwargs)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
