"""`tcalc inference`: `--format json` byte for byte as captured before the result was typed
(issue 21), one command line per optional section or kind of value. Regenerate a file only for an
intended change of the JSON: `PYTHONPATH=$PWD python tests/test_json_golden_inference.py`."""

from __future__ import annotations

from pathlib import Path

import pytest

from golden import GOLDEN, json_output, regenerate
from transformer_calc.cli import run

REPO = Path(__file__).resolve().parents[1]
CHECKPOINT = "tests/data/checkpoints/tiny-llama-fp8"  # relative: the JSON quotes the path as given

CASES: dict[str, list[str]] = {
    # defaults: serving (paged KV) section, no speculative, compute_bound_batch null
    "inference-1": ["inference", "--preset", "gpt2", "--new-tokens", "8"],
    # a checkpoint folder: the checkpoint section, weight_dtype "checkpoint"
    "inference-2": ["inference", CHECKPOINT, "--S", "64", "--gpu", "h100"],
    # --no-kv-cache: no serving section; T = 2
    "inference-3": ["inference", "--preset", "gpt2", "--no-kv-cache", "--new-tokens", "4", "--T", "2"],
    # MLA latent cache replicated per GPU, MoE, fp8 weights, speculative decoding with the MTP modules
    "inference-4": ["inference", "--preset", "deepseek-v3", "--mtp", "--T", "8", "--gpu", "h200", "--B", "4",
                    "--S", "4096", "--new-tokens", "128", "--weight-dtype", "fp8"],
    # a draft model that pays above a break-even acceptance rate; eager kernels
    "inference-5": ["inference", "--preset", "llama-3.1-70b", "--draft", "llama-3.2-1b", "--T", "4", "--gpu", "h100",
                    "--B", "2", "--S", "8k", "--new-tokens", "256", "--no-cuda-graphs", "--speculative-tokens", "3",
                    "--acceptance-rate", "0.1"],
    # a draft that never pays: break_even_acceptance_rate null
    "inference-6": ["inference", "--preset", "llama-3-8b", "--draft", "llama-3.1-70b", "--acceptance-rate", "0.5",
                    "--gpu", "h100", "--T", "8"],
    # sliding-window layers (layers_by_kind, sliding_window), fp8 KV cache
    "inference-7": ["inference", "--preset", "gemma-3-12b", "--S", "32k", "--B", "16", "--kv-dtype", "fp8",
                    "--new-tokens", "64"],
    # expert parallelism; the serving engine's settings from flags
    "inference-8": ["inference", "--preset", "mixtral-8x7b", "--T", "2", "--ep", "2", "--gpu", "h100", "--B", "8",
                    "--S", "2048", "--new-tokens", "32", "--block-size", "32", "--memory-utilization", "0.85",
                    "--cuda-context", "1GiB"],
    # does not fit: negative KV budget, budget_matrix fractions null, min_tensor_parallel
    "inference-9": ["inference", "--preset", "llama-3.1-405b", "--gpu", "a100-80gb", "--B", "1", "--S", "1k"],
    # chunked attention (attention_chunk_size), T = 8 across nodes' worth of links
    "inference-10": ["inference", "--preset", "llama-4-scout", "--S", "16k", "--gpu", "h100", "--T", "8",
                     "--new-tokens", "16"],
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
    assert "Per GPU (ms)" in capsys.readouterr().out


if __name__ == "__main__":  # regenerate the golden files
    regenerate(CASES)
