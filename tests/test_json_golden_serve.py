"""`tcalc serve`: `--format json` byte for byte as captured before the result was typed (issue 21),
one command line per optional section or kind of layout. Regenerate a file only for an intended
change of the JSON: `PYTHONPATH=$PWD python tests/test_json_golden_serve.py`."""

from __future__ import annotations

from pathlib import Path

import pytest

from golden import GOLDEN, json_output, regenerate
from transformer_calc.cli import run

REPO = Path(__file__).resolve().parents[1]
CHECKPOINT = "tests/data/checkpoints/tiny-llama-fp8"  # relative: the JSON quotes the path as given

CASES: dict[str, list[str]] = {
    # both targets; feasible layouts and layouts that do not fit (negative KV budget)
    "serve-1": ["serve", "--preset", "llama-3.1-70b", "--gpu", "h100", "--gpus", "8", "--prompt-len", "2000",
                "--output-len", "500", "--ttft", "1", "--tpot", "0.05"],
    # no layout meets the targets: best null
    "serve-2": ["serve", "--preset", "llama-3.1-70b", "--gpu", "a100-80gb", "--gpus", "2", "--prompt-len", "8000",
                "--output-len", "500", "--ttft", "0.01", "--tpot", "0.001"],
    # a checkpoint folder: the checkpoint section; no targets (nulls)
    "serve-3": ["serve", CHECKPOINT, "--prompt-len", "64", "--output-len", "16", "--gpus", "2", "--gpu", "h100"],
    # fixed T and B, expert parallelism, a request rate, one target
    "serve-4": ["serve", "--preset", "mixtral-8x7b", "--gpu", "h100", "--gpus", "8", "--ep", "2", "--prompt-len", "1k",
                "--output-len", "200", "--request-rate", "5", "--T", "2", "--B", "16", "--tpot", "0.1"],
    # a T the heads do not divide: a layout with no capacity (nulls throughout)
    "serve-5": ["serve", "--preset", "gpt2", "--prompt-len", "512", "--output-len", "128"],
}



@pytest.mark.parametrize("name", sorted(CASES))
def test_json_unchanged(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    assert json_output(CASES[name]) == (GOLDEN / f"{name}.json").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(CASES))
def test_table_renders(name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The table reads the typed result's attributes, every optional section included (a smoke test)."""
    monkeypatch.chdir(REPO)
    assert run(CASES[name]) == 0
    assert "best: " in capsys.readouterr().out


def test_yaml_writes_best_in_full(capsys: pytest.CaptureFixture[str]) -> None:
    """`best` is a copy of its row in the YAML, not an alias (`&id001` / `*id001`)."""
    import json

    import yaml

    assert run([*CASES["serve-1"], "--format", "yaml"]) == 0
    text = capsys.readouterr().out
    assert "&id" not in text and "*id" not in text
    assert yaml.safe_load(text) == json.loads((GOLDEN / "serve-1.json").read_text(encoding="utf-8"))


if __name__ == "__main__":  # regenerate the golden files
    regenerate(CASES)
