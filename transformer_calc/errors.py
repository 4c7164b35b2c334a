"""User-facing errors: one line that names the field, the value and the fix.

The CLI is the error boundary: it prints `Error: <message>` on stderr and exits with
`exit_code` (2 for bad input, like a usage error), never a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


QUOTE_CHARS = 80  # at most this much of a user's value is quoted in a message


def clip(value: object, limit: int = QUOTE_CHARS) -> str:
    """repr(value), cut to `limit` characters; containers are described, never expanded (an
    alias bomb or a deeply nested value must not become a 35 MB or recursive message)."""
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        text = f"<{type(value).__name__} of {len(value)}>"
    else:
        try:
            text = repr(value)
        except (RecursionError, ValueError):  # a huge int's repr, or a cycle
            text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def did_you_mean(name: object, known: Iterable[str], *, n: int = 3, cutoff: float = 0.6) -> str:
    """The one did-you-mean helper: "did you mean 'a', 'b'?" with the nearest known names
    (case-insensitive), or "" when none is near."""
    known = list(known)
    by_lower = {k.lower(): k for k in known}
    near = difflib.get_close_matches(str(name).lower(), list(by_lower), n=n, cutoff=cutoff)
    return "did you mean " + ", ".join(repr(by_lower[k]) for k in near) + "?" if near else ""


class TcalcError(ValueError):
    """Bad input the user can fix; the message is the whole story. A ValueError, so that
    `except ValueError` in a caller's code catches every bad-input error the API raises."""

    exit_code = 2


class UnknownNameError(TcalcError):
    """An unknown preset, GPU, model_type, ... with the nearest known names."""

    def __init__(self, kind: str, name: str, known: Iterable[str]):
        known = sorted(known)
        hint = did_you_mean(name, known, cutoff=0.5) or "known: " + ", ".join(known)
        super().__init__(f"unknown {kind} {clip(name)}; {hint}")
        self.kind, self.name, self.known = kind, name, known


class ImpossibleResult(Exception):
    """A result that breaks physics (a utilization above 1, an expected time below its bound): a
    bug in tcalc, never output. The CLI reports it as an internal error (exit 3) with the command
    to reproduce it. Not a ValueError: pydantic passes it through a result model unchanged."""

    exit_code = 3
