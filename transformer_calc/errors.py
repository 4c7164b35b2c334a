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


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with every control character (ESC, the C1 codes, DEL, bidi overrides) written as its
    escape, `\\x1b`: a model name from a GGUF file or a Hub config reaches a terminal as text,
    never as a colour change, a window title (OSC) or a cursor move."""
    if text.isprintable() and "\x1b" not in text:
        return text
    out = []
    for ch in text:
        if ch == "\n" and keep_newlines:
            out.append(ch)
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        else:
            out.append(repr(ch)[1:-1] if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
    return "".join(out)


def did_you_mean(name: object, known: Iterable[str], *, n: int = 3, cutoff: float = 0.6) -> str:
    """The one did-you-mean helper: "did you mean 'a', 'b'?" with the nearest known names
    (case-insensitive), or "" when none is near."""
    known = list(known)
    by_lower = {k.lower(): k for k in known}
    near = difflib.get_close_matches(str(name).lower(), list(by_lower), n=n, cutoff=cutoff)
    return "did you mean " + ", ".join(repr(by_lower[k]) for k in near) + "?" if near else ""


KNOWN_SHOWN = 8  # names a "known: ..." list shows, the closest to the given name first


def known_list(name: object, known: Iterable[str], *, limit: int = KNOWN_SHOWN, lead: str = "known: ") -> str:
    """"known: a, b, c, ... (N more)": at most `limit` names, the closest to `name` first
    (difflib's ratio, case-insensitive), so that a list of 300 presets is one short line."""
    known = list(dict.fromkeys(str(k) for k in known))
    target = str(name).lower()[:200]
    ranked = sorted(known, key=lambda k: -difflib.SequenceMatcher(None, target, k.lower()).ratio())
    more = len(ranked) - limit
    return lead + ", ".join(ranked[:limit]) + (f", ... ({more} more)" if more > 0 else "")


class TcalcError(ValueError):
    """Bad input the user can fix; the message is the whole story. A ValueError, so that
    `except ValueError` in a caller's code catches every bad-input error the API raises."""

    exit_code = 2


class UnknownNameError(TcalcError):
    """An unknown preset, GPU, model_type, ... with the nearest known names."""

    def __init__(self, kind: str, name: str, known: Iterable[str]):
        known = sorted(known)
        hint = did_you_mean(name, known, cutoff=0.5) or known_list(name, known)
        super().__init__(f"unknown {kind} {clip(name)}; {hint}")
        self.kind, self.name, self.known = kind, name, known


class ImpossibleResult(Exception):
    """A result that breaks physics (a utilization above 1, an expected time below its bound): a
    bug in tcalc, never output. The CLI reports it as an internal error (exit 3) with the command
    to reproduce it. Not a ValueError: pydantic passes it through a result model unchanged."""

    exit_code = 3
