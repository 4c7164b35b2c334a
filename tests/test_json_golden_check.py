"""`tcalc check -f json` is byte-identical to the outputs captured before its result was typed
(issue 21): tests/data/json_golden/check-<n>.json, one per command line below. Together the lines
produce every row form: PASS, FAIL and INVALID files, a custom model (no name), and every check
(training and inference memory against a GPU and a byte limit, training memory without a limit,
throughput and latency limits as whole and fractional numbers)."""

from __future__ import annotations

import json

import pytest

from conftest import REPO
from golden import GOLDEN, json_output
from transformer_calc.render.common import to_json
from transformer_calc.results.check import CheckResult

J = "tests/data/check_jobs"  # relative: the JSON names each file as given

LINES = [
    f"check {J}/train-ok.yaml {J}/train-big.yaml {J}/invalid.yaml --gpu a100-80gb --max-memory 70GiB",
    f"check {J}/infer.yaml {J}/train-nolimit.yaml",
    f"check {J}/infer.yaml --min-tokens-per-s 100.5 --gpu h100 --max-memory 80GB",
    f"check {J}/train-big.yaml {J}/infer-slow.yaml",
]



@pytest.mark.parametrize("n, line", list(enumerate(LINES, 1)), ids=[f"check-{n}" for n in range(1, len(LINES) + 1)])
def test_json_is_the_golden(n, line, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert json_output(line.split(), codes=(0, 1, 2)) == (GOLDEN / f"check-{n}.json").read_text()


@pytest.mark.parametrize("n", range(1, len(LINES) + 1), ids=[f"check-{n}" for n in range(1, len(LINES) + 1)])
def test_the_golden_reads_back_as_the_typed_result(n):
    """Every key is declared (extra keys are refused) and the JSON round-trips through CheckResult."""
    text = (GOLDEN / f"check-{n}.json").read_text()
    assert to_json(CheckResult.model_validate(json.loads(text)).model_dump(mode="json")) == text
