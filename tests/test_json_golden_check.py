"""`tcalc check -f json` is byte-identical to the outputs captured before its result was typed
(issue 21): tests/data/json_golden/check-<n>.json, one per command line below. Together the lines
produce every row form: PASS, FAIL and INVALID files, a custom model (no name), and every check
(training and inference memory against a GPU and a byte limit, training memory without a limit,
throughput and latency limits as whole and fractional numbers)."""

from __future__ import annotations

import pytest

from conftest import REPO
from transformer_calc.cli import run

GOLDEN = REPO / "tests" / "data" / "json_golden"
J = "tests/data/check_jobs"  # relative: the JSON names each file as given

LINES = [
    f"check {J}/train-ok.yaml {J}/train-big.yaml {J}/invalid.yaml --gpu a100-80gb --max-memory 70GiB",
    f"check {J}/infer.yaml {J}/train-nolimit.yaml",
    f"check {J}/infer.yaml --min-tokens-per-s 100.5 --gpu h100 --max-memory 80GB",
    f"check {J}/train-big.yaml {J}/infer-slow.yaml",
]


def output(line: str, capsys) -> str:
    run([*line.split(), "--format", "json"])
    return capsys.readouterr().out


@pytest.mark.parametrize("n, line", list(enumerate(LINES, 1)), ids=[f"check-{n}" for n in range(1, len(LINES) + 1)])
def test_json_is_the_golden(n, line, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert output(line, capsys) == (GOLDEN / f"check-{n}.json").read_text()
