"""`tcalc memory -f json` is byte-identical to the outputs captured before its result was typed
(issue 21): tests/data/json_golden/memory-<n>.json, one per command line below. Together the
lines produce every optional section (finetune, offload, gpu/fits/fit, checkpoint) and both forms
of `memory.bytes_per_param`, null and non-null fit answers, and several optimizer group layouts."""

from __future__ import annotations

import json

import pytest

from conftest import REPO
from golden import GOLDEN, json_output
from transformer_calc.render.common import to_json
from transformer_calc.results.memory import MemoryResult

CHECKPOINT = "tests/data/checkpoints/tiny-llama-fp8"  # relative: the JSON names the source as given

LINES = [
    "memory --preset gpt2 --gpu a100-80gb --P 2",
    f"memory {CHECKPOINT} --S 64",
    "memory --preset gpt2 --finetune lora --offload optimizer --zero 2 --dp 2",
    "memory --preset llama-3.1-8b --finetune qlora --lora-rank 16 --S 2048 --flash --recompute full --gpu rtx-4090",
    "memory --preset llama-3.1-70b --S 4096 --zero 3 --dp 8 --offload optimizer+params --offload-device nvme "
    "--recompute full --flash --gpu a100-80gb",
    "memory --preset qwen3-30b-a3b --S 4096 --ep 8 --dp 8 --flash --optimizer muon --fp8-recipe delayed",
    "memory --preset gpt3 --gpu a100-80gb",
    "memory --preset llama-3-8b --precision bf16 --optimizer adafactor --T 2 --sp --recompute selective "
    "--framework megatron",
    "memory --preset llama-3-8b --optimizer paged-adamw-8bit --finetune dora --lora-alpha 32 --train-head --gpu h100",
    "memory --preset deepseek-v3 --S 128k --gpu rtx-4090",
]



@pytest.mark.parametrize("n, line", list(enumerate(LINES, 1)), ids=[f"memory-{n}" for n in range(1, len(LINES) + 1)])
def test_json_is_the_golden(n, line, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert json_output(line.split()) == (GOLDEN / f"memory-{n}.json").read_text()


@pytest.mark.parametrize("n", range(1, len(LINES) + 1), ids=[f"memory-{n}" for n in range(1, len(LINES) + 1)])
def test_the_golden_reads_back_as_the_typed_result(n):
    """Every key is declared (extra keys are refused) and the JSON round-trips through MemoryResult."""
    text = (GOLDEN / f"memory-{n}.json").read_text()
    assert to_json(MemoryResult.model_validate(json.loads(text)).model_dump(mode="json")) == text
