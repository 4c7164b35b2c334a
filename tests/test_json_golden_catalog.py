"""`tcalc presets`, `tcalc hardware` and `tcalc sweep` write the same bytes as before their results
were typed (issue 21): each command line's output is compared with the text captured from the
dict-built results in tests/data/json_golden/."""

from __future__ import annotations

from pathlib import Path

import pytest

from transformer_calc.cli import run

GOLDEN = Path(__file__).parent / "data" / "json_golden"

# (file, command line): every section and row kind the three commands write
CASES = [
    ("presets-1.json", ["presets", "-f", "json"]),
    ("hardware-1.json", ["hardware", "-f", "json"]),  # TPU-v4: no interconnect, no host link (nulls)
    ("hardware-2.json", ["hardware", "h100", "-f", "json"]),
    ("hardware-3.json", ["hardware", "v100", "-f", "json"]),  # no bf16: fp32 and fp16 peaks only
    ("hardware-4.yaml", ["hardware", "tpu-v4", "-f", "yaml"]),
    # skipped points with their reasons; fits against a GPU
    ("sweep-1.json", ["sweep", "--preset", "llama-2-7b", "--B", "1,2,4..16", "--T", "1,3", "--gpu", "a100-80gb",
                      "--recompute", "full", "-f", "json"]),
    # two models, two GPUs, inference metrics (floats, a string, a boolean), sorted
    ("sweep-2.json", ["sweep", "--preset", "llama-3-8b,mistral-7b", "--S", "2048,8192", "--gpu", "h100,a100",
                      "--kv-dtype", "fp8", "--metrics",
                      "kv_cache_bytes,inference_fits,tokens_per_s,decode_bound,time_to_first_token_s",
                      "--new-tokens", "64", "--sort", "-tokens_per_s", "-f", "json"]),
    # booleans as an axis, a token budget (train_days), fp8 peaks
    ("sweep-3.json", ["sweep", "--preset", "gpt3", "--S", "2048", "--T", "8", "--P", "4,8", "--sp", "--grad-bytes", "2",
                      "--flash", "true,false", "--gpu", "h100", "--metrics", "peak_bytes,hardware_flops,train_days",
                      "--tokens", "300e9", "--dtype", "fp8", "-f", "json"]),
    ("sweep-4.json", ["sweep", "--preset", "gpt2", "--B", "1,2,4", "--gpu", "h100", "--metrics",
                      "peak_bytes,headroom_bytes,fits", "--fits-only", "--limit", "2", "-f", "json"]),
    ("sweep-5.json", ["sweep", "--preset", "llama-2-7b", "--T", "3", "-f", "json"]),  # every point skipped
    # YAML is written from the whole result (JSON is streamed point by point)
    ("sweep-6.yaml", ["sweep", "--preset", "llama-2-7b", "--B", "1,2", "--T", "1,3", "--gpu", "a100-80gb",
                      "-f", "yaml"]),
    ("sweep-7.yaml", ["sweep", "--preset", "llama-2-7b", "--T", "3", "-f", "yaml"]),
]


@pytest.mark.parametrize("name, argv", CASES, ids=[c[0] for c in CASES])
def test_output_is_byte_identical(capsys, name, argv):
    assert run(argv) == 0
    assert capsys.readouterr().out == (GOLDEN / name).read_text(encoding="utf-8")
