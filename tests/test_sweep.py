"""`tcalc sweep`: grid parsing, one row per point equal to the library, filters, outputs, plots."""

from __future__ import annotations

import json

import pytest

from transformer_calc.cli import run
from transformer_calc.config import Parallelism, Training, Workload
from transformer_calc.errors import TcalcError
from transformer_calc.flops import count_flops
from transformer_calc.inference import InferenceSpec, decode, kv_cache
from transformer_calc.timeline import fit_capacity, peak_memory
from transformer_calc.presets import gpu, preset_model
from transformer_calc.sweep import parse_values


def call(capsys, *argv):
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("axis", "text", "expected"),
    [
        ("B", "1,2,4..64", [1, 2, 4, 8, 16, 32, 64]),
        ("B", "3..20", [3, 6, 12]),
        ("S", "512..2048:512", [512, 1024, 1536, 2048]),
        ("T", "8,1,8,2", [8, 1, 2]),
        ("zero", "0..3:1", [0, 1, 2, 3]),
        ("flash", "true,off", [True, False]),
        ("recompute", "none,full", ["none", "full"]),
    ],
)
def test_parse_values(axis, text, expected):
    assert parse_values(axis, text) == expected


@pytest.mark.parametrize(("axis", "text"), [("B", "0"), ("B", "8..2"), ("B", "x"), ("zero", "4"), ("B", "1,,2"), ("flash", "maybe")])
def test_parse_values_rejects(axis, text):
    with pytest.raises(TcalcError):
        parse_values(axis, text)


def test_rows_equal_the_library(capsys):
    code, out, err = call(capsys, "sweep", "--preset", "llama-2-7b,gpt2", "--B", "1,4", "--T", "1,2,3", "--gpu", "a100-80gb",
                          "--S", "1024", "--metrics", "memory,fits,flops", "-f", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["points_total"] == 2 * 2 * 3
    assert data["skipped"] == 2  # T=3 does not divide llama's 32 heads (it divides gpt2's 12)
    assert len(data["points"]) == 10
    for r in data["points"]:
        m, w = preset_model(r["model"]), Workload(seq_len=1024, batch_size=r["B"])
        peak = peak_memory(m, w, Training(), Parallelism(tensor=r["T"])).peak_bytes  # the step's peak
        assert r["memory"] == peak
        assert r["fits"] is (peak <= fit_capacity(80 * 10**9))
        assert r["flops"] == count_flops(m, w).total


def test_inference_metrics(capsys):
    code, out, _ = call(capsys, "sweep", "--preset", "llama-2-13b", "--B", "1,8", "--S", "8192", "--gpu", "h100",
                        "--metrics", "kv_cache,decode_s,tokens_per_s,bound", "--new-tokens", "16", "-f", "json")
    assert code == 0
    rows = json.loads(out)["points"]
    m, g = preset_model("llama-2-13b"), gpu("h100")
    for r in rows:
        spec = InferenceSpec(batch_size=r["B"], prompt_len=8192, new_tokens=16)
        assert r["kv_cache"] == kv_cache(m, spec).per_gpu_bytes
        dec = decode(m, g, spec)
        assert (r["decode_s"], r["tokens_per_s"], r["bound"]) == (dec.seconds_per_token, dec.tokens_per_s, dec.bound)


def test_fits_only_sort_limit_csv(capsys):
    code, out, _ = call(capsys, "sweep", "--preset", "llama-2-7b", "--B", "1..64", "--T", "1,2,4,8", "--gpu", "a100-80gb",
                        "--recompute", "full", "--fits-only", "--sort", "-memory", "--limit", "3", "-f", "csv")
    lines = out.strip().splitlines()
    header = lines[0].split(",")
    assert code == 0 and len(lines) == 4
    mem = [int(line.split(",")[header.index("memory")]) for line in lines[1:]]
    assert mem == sorted(mem, reverse=True) and max(mem) <= 80 * 10**9
    assert all(line.split(",")[header.index("fits")] == "true" for line in lines[1:])  # lowercase, as JSON


def test_table_output_smoke(capsys):
    code, out, _ = call(capsys, "sweep", "--preset", "gpt2", "--B", "1..8", "--T", "1,2")
    assert code == 0 and "8 of 8 points shown" in out


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_plot_is_written(tmp_path, capsys, suffix):
    path = tmp_path / f"memory.{suffix}"
    code, _, err = call(capsys, "sweep", "--preset", "llama-2-7b", "--B", "1..64", "--T", "1,2,4,8", "--gpu", "a100-80gb",
                        "--plot", str(path), "-f", "json")
    assert code == 0, err
    assert path.stat().st_size > 1000
    head = path.read_bytes()[:8]
    assert head.startswith(b"\x89PNG") if suffix == "png" else b"<?xml" in path.read_bytes()[:100]


def test_plot_decode_vs_batch(tmp_path, capsys):
    path = tmp_path / "decode.png"
    code, _, err = call(capsys, "sweep", "--preset", "llama-3-8b", "--B", "1..512", "--S", "512", "--gpu", "a100-80gb",
                        "--metrics", "decode_s,tokens_per_s,bound", "--y", "tokens_per_s", "--plot", str(path), "-f", "json")
    assert code == 0, err and path.stat().st_size > 1000


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sweep", "--preset", "gpt2", "--metrics", "memry"], "unknown metric 'memry'; did you mean memory?"),
        (["sweep", "--preset", "gpt2", "--metrics", "fits"], "need --gpu NAME"),
        (["sweep", "--preset", "gpt2", "--B", "64..8"], "1 <= a <= b"),
        (["sweep", "--preset", "gpt2", "--recompute", "half"], "--recompute ('half')"),
        (["sweep"], "no model given"),
        (["sweep", "--preset", "gpt2", "--sort", "speed"], "--sort 'speed': not a column"),
        (["sweep", "--preset", "gpt2", "--B", "1..1000000:1", "--T", "1..2:1", "--S", "1..2:1"], "keep it under 1,000,000"),
        (["sweep", "--preset", "gpt2", "--zero", "0..4:1"], "0 <= a <= b <= 3"),
        (["sweep", "--preset", "gpt2", "--plot", "/tmp/x.png", "--x", "Q"], "--x 'Q': not an axis"),
    ],
)
def test_sweep_bad_input(capsys, argv, message):
    code, out, err = call(capsys, *argv)
    assert (code, out) == (2, "") and err.startswith("Error: ") and err.count("\n") == 1
    assert message in err, err


def test_sp_and_bad_values(capsys):
    import json

    from transformer_calc.cli import run

    assert run(["sweep", "--preset", "gpt2", "--T", "1,2", "--sp", "-f", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["points"]) == 2 and data["skipped"] == 0  # --sp used to skip every point
    for argv in (["--optimizer", "bogus"], ["--dtype", "bogus", "--gpu", "h100", "--metrics", "kv_cache"]):
        assert run(["sweep", "--preset", "gpt2", *argv]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("Error: ")
