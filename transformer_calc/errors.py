"""User-facing errors: one line that names the field, the value and the fix.

The CLI is the error boundary: it prints `Error: <message>` on stderr and exits with
`exit_code` (2 for bad input, like a usage error), never a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class TcalcError(Exception):
    """Bad input the user can fix; the message is the whole story."""

    exit_code = 2


class UnknownNameError(TcalcError):
    """An unknown preset, GPU, model_type, ... with the nearest known names."""

    def __init__(self, kind: str, name: str, known: Iterable[str]):
        known = sorted(known)
        near = difflib.get_close_matches(name.lower(), [k.lower() for k in known], n=3, cutoff=0.5)
        by_lower = {k.lower(): k for k in known}
        if near:
            hint = "did you mean " + ", ".join(repr(by_lower[n]) for n in near) + "?"
        else:
            hint = "known: " + ", ".join(known)
        super().__init__(f"unknown {kind} {name!r}; {hint}")
        self.kind, self.name, self.known = kind, name, known
