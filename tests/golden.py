"""The JSON goldens (tests/data/json_golden/): a command's `--format json` text, captured in-process,
and the regeneration of the files (run only for an intended change of the JSON). Shared by the
tests/test_json_golden_*.py files."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterable, Mapping

from conftest import REPO
from transformer_calc.cli import run

GOLDEN = REPO / "tests" / "data" / "json_golden"


def json_output(argv: list[str], codes: Iterable[int] = (0,)) -> str:
    """What `tcalc ARGV --format json` writes on stdout; its exit code must be one of `codes`."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = run([*argv, "--format", "json"])
    assert code in tuple(codes), f"{argv}: exit {code}"
    return buf.getvalue()


def regenerate(cases: Mapping[str, list[str]]) -> None:
    """Write each case's JSON as GOLDEN/<name>.json, from the repository root (paths in the JSON
    are quoted as given)."""
    os.chdir(REPO)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name, argv in cases.items():
        text = json_output(argv)
        (GOLDEN / f"{name}.json").write_text(text, encoding="utf-8")
        print(name, len(text), file=sys.stderr)
