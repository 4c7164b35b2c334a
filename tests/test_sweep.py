"""`tcalc sweep`: grid parsing; one point equals `tcalc memory`, `tcalc flops` and `tcalc inference`
for the same flags and job file (every metric against the key METRIC_SOURCES names); errors for
unknown values; streamed output equals the buffered one; filters, outputs, plots."""

from __future__ import annotations

import json

import pytest

from transformer_calc.cli import run
from transformer_calc.errors import TcalcError
from transformer_calc.estimators.sweep import INFERENCE_METRICS, METRIC_SOURCES, TRAINING_METRICS
from transformer_calc.requests.sweep_grid import parse_values


def call(capsys, *argv):
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def call_json(capsys, *argv):
    code, out, err = call(capsys, *argv, "-f", "json")
    assert code == 0, err
    return json.loads(out)


def lookup(data, dotted):
    """The dotted key's value; None where a section is absent (inference's serving without a cache)."""
    for part in dotted.split("."):
        if data is None or (part == "serving" and part not in data):
            return None
        data = data[part]
    return data


@pytest.mark.parametrize(
    ("axis", "text", "expected"),
    [
        ("batch_size", "1,2,4..64", [1, 2, 4, 8, 16, 32, 64]),
        ("batch_size", "3..20", [3, 6, 12]),
        ("batch_size", "1k,2e3,1_000", [1000, 2000]),
        ("seq_len", "512..2048:512", [512, 1024, 1536, 2048]),
        ("seq_len", "2k,8k", [2048, 8192]),
        ("tensor", "8,1,8,2", [8, 1, 2]),
        ("zero", "0..3:1", [0, 1, 2, 3]),
        ("flash", "true,off", [True, False]),
        ("recompute", "none,full", ["none", "full"]),
        ("tensor", [1, 2, 2], [1, 2]),
    ],
)
def test_parse_values(axis, text, expected):
    assert parse_values(axis, text) == expected


@pytest.mark.parametrize(("axis", "text"), [("batch_size", "0"), ("batch_size", "8..2"), ("batch_size", "x"), ("zero", "4"),
                                            ("batch_size", "1,,2"), ("flash", "maybe"), ("batch_size", "2.5"),
                                            ("batch_size", "1..4:0"), ("seq_len", "1.3k")])
def test_parse_values_rejects(axis, text):
    with pytest.raises(TcalcError):
        parse_values(axis, text)


# ---------------------------------------------------------------------------- parity, one point
MODEL_FLAGS = ("--preset", "--L", "--D", "--A", "--kv-heads", "--set", "--config")
MEMORY_METRICS = ",".join(m for m in TRAINING_METRICS if METRIC_SOURCES[m][0] == "memory")
FLOPS_METRICS = "model_flops,hardware_flops"

# (sweep flags, the same point's `tcalc memory` flags); every case also has --gpu a100-80gb
TRAINING_CASES = [
    ("plain", ["--preset", "llama-2-7b", "--S", "1024", "--B", "2", "--T", "2"],
     ["--preset", "llama-2-7b", "--S", "1024", "--B", "2", "--T", "2"]),
    ("sp", ["--preset", "gpt3", "--S", "2048", "--T", "8", "--P", "8", "--sp", "--recompute", "selective"],
     ["--preset", "gpt3", "--S", "2048", "--T", "8", "--P", "8", "--sp", "--recompute", "selective"]),
    ("grad-bytes", ["--preset", "llama-2-7b", "--S", "2048", "--grad-bytes", "2"],
     ["--preset", "llama-2-7b", "--S", "2048", "--grad-bytes", "2"]),
    ("p=4", ["--preset", "gpt2", "--p", "4"], ["--preset", "gpt2", "--p", "4"]),
    ("p=1 fp8", ["--preset", "gpt2", "--p", "1"], ["--preset", "gpt2", "--p", "1"]),
    ("bf16 lion", ["--preset", "gpt2", "--precision", "bf16", "--optimizer", "lion"],
     ["--preset", "gpt2", "--precision", "bf16", "--optimizer", "lion"]),
    ("flash full", ["--preset", "llama-2-7b", "--S", "4096", "--flash", "true", "--recompute", "full"],
     ["--preset", "llama-2-7b", "--S", "4096", "--flash", "--recompute", "full"]),
    ("megatron etc.", ["--preset", "llama-2-7b", "--S", "2048", "--framework", "megatron", "--cross-entropy", "chunked",
                       "--micro-batches", "4", "--P", "4", "--dropout", "--foreach-optimizer"],
     ["--preset", "llama-2-7b", "--S", "2048", "--framework", "megatron", "--cross-entropy", "chunked",
      "--micro-batches", "4", "--P", "4", "--dropout", "--foreach-optimizer"]),
    ("seed, no head", ["--preset", "gpt2", "--activations", "seed", "--no-head"],
     ["--preset", "gpt2", "--activations", "seed", "--no-head"]),
    ("torch-eager", ["--preset", "gpt2", "--activations", "torch-eager", "--S", "512"],
     ["--preset", "gpt2", "--activations", "torch-eager", "--S", "512"]),
    ("zero-3", ["--preset", "llama-3-8b", "--S", "8192", "--dp", "64", "--zero", "3", "--recompute", "full"],
     ["--preset", "llama-3-8b", "--S", "8192", "--dp", "64", "--zero", "3", "--recompute", "full"]),
    ("cp", ["--preset", "llama-3-8b", "--S", "32768", "--cp", "4", "--T", "2", "--flash", "true"],
     ["--preset", "llama-3-8b", "--S", "32768", "--cp", "4", "--T", "2", "--flash"]),
    ("moe ep etp", ["--preset", "mixtral-8x7b", "--S", "4096", "--ep", "8", "--dp", "8", "--etp", "1", "--T", "2"],
     ["--preset", "mixtral-8x7b", "--S", "4096", "--ep", "8", "--dp", "8", "--etp", "1", "--T", "2"]),
    ("mixed moe, P=8", ["--preset", "deepseek-v3", "--S", "4096", "--T", "8", "--P", "8", "--ep", "8", "--dp", "8",
                        "--zero", "1", "--recompute", "full"],
     ["--preset", "deepseek-v3", "--S", "4096", "--T", "8", "--P", "8", "--ep", "8", "--dp", "8", "--zero", "1",
      "--recompute", "full"]),
    ("overrides", ["--preset", "llama-2-7b", "--L", "4", "--D", "1024", "--A", "8", "--set", "mlp=gelu", "--S", "512"],
     ["--preset", "llama-2-7b", "--L", "4", "--D", "1024", "--A", "8", "--set", "mlp=gelu", "--S", "512"]),
]


@pytest.mark.parametrize(("sweep_args", "memory_args"), [c[1:] for c in TRAINING_CASES], ids=[c[0] for c in TRAINING_CASES])
def test_training_point_equals_memory_and_flops(capsys, sweep_args, memory_args):
    data = call_json(capsys, "sweep", *sweep_args, "--gpu", "a100-80gb", "--metrics", f"{MEMORY_METRICS},{FLOPS_METRICS}")
    assert data["points_total"] == 1 and data["skipped"] == 0, data["skipped_reasons"]
    row = data["points"][0]
    memory = call_json(capsys, "memory", *memory_args, "--gpu", "a100-80gb")
    S, B = str(memory["workload"]["seq_len"]), str(memory["workload"]["batch_size"])
    model_args = [a for i, a in enumerate(memory_args) if a in MODEL_FLAGS or i and memory_args[i - 1] in MODEL_FLAGS]
    recompute = memory["training"]["recompute"]
    flops = call_json(capsys, "flops", *model_args, "--S", S, "--B", B, "--recompute", recompute)
    for metric in MEMORY_METRICS.split(","):
        assert row[metric] == lookup(memory, METRIC_SOURCES[metric][1]), metric
    for metric in FLOPS_METRICS.split(","):
        assert row[metric] == lookup(flops, METRIC_SOURCES[metric][1]), metric
    assert row["seq_len"] == memory["workload"]["seq_len"] and row["batch_size"] == memory["workload"]["batch_size"]


@pytest.mark.parametrize("dtype", [None, "fp16", "fp8"])
def test_train_days_equals_flops(capsys, dtype):
    extra = ["--dtype", dtype] if dtype else []
    data = call_json(capsys, "sweep", "--preset", "gpt3", "--S", "2048", "--T", "8", "--P", "8", "--dp", "16",
                     "--gpu", "h100", "--metrics", "train_days", "--tokens", "300e9", "--mfu", "0.45", *extra)
    flops = call_json(capsys, "flops", "--preset", "gpt3", "--S", "2048", "--tokens", "300e9", "--gpus", "1024",
                      "--gpu", "h100", "--mfu", "0.45", *extra)
    assert data["points"][0]["train_days"] == flops["training"]["days"]


INFERENCE_CASES = [
    ("plain", ["--preset", "llama-2-13b", "--S", "8192", "--B", "8", "--new-tokens", "16"],
     ["--preset", "llama-2-13b", "--S", "8192", "--B", "8", "--new-tokens", "16"]),
    ("kv-dtype", ["--preset", "llama-3-8b", "--S", "4096", "--B", "32", "--kv-dtype", "fp8", "--new-tokens", "128"],
     ["--preset", "llama-3-8b", "--S", "4096", "--B", "32", "--kv-dtype", "fp8", "--new-tokens", "128"]),
    ("int4 weights, T", ["--preset", "llama-2-70b", "--S", "2048", "--T", "4", "--weight-dtype", "int4", "--new-tokens", "64"],
     ["--preset", "llama-2-70b", "--S", "2048", "--T", "4", "--weight-dtype", "int4", "--new-tokens", "64"]),
    ("falcon MHA cache", ["--preset", "falcon-40b", "--S", "2048", "--B", "4", "--cache-kv-heads", "128", "--T", "4"],
     ["--preset", "falcon-40b", "--S", "2048", "--B", "4", "--cache-kv-heads", "128", "--T", "4"]),
    ("naive", ["--preset", "gpt2", "--S", "256", "--no-kv-cache", "--new-tokens", "32"],
     ["--preset", "gpt2", "--S", "256", "--no-kv-cache", "--new-tokens", "32"]),
    ("moe ep", ["--preset", "mixtral-8x7b", "--S", "4096", "--T", "2", "--ep", "2", "--new-tokens", "8"],
     ["--preset", "mixtral-8x7b", "--S", "4096", "--T", "2", "--ep", "2", "--new-tokens", "8"]),
    ("mla decompressed", ["--preset", "deepseek-v3", "--S", "4096", "--T", "8", "--weight-dtype", "fp8", "--mla-cache", "decompressed"],
     ["--preset", "deepseek-v3", "--S", "4096", "--T", "8", "--weight-dtype", "fp8", "--mla-cache", "decompressed"]),
    ("overrides", ["--preset", "llama-3-8b", "--L", "8", "--kv-heads", "2", "--S", "1024", "--B", "4"],
     ["--preset", "llama-3-8b", "--L", "8", "--kv-heads", "2", "--S", "1024", "--B", "4"]),
]


@pytest.mark.parametrize(("sweep_args", "inference_args"), [c[1:] for c in INFERENCE_CASES], ids=[c[0] for c in INFERENCE_CASES])
def test_inference_point_equals_inference(capsys, sweep_args, inference_args):
    data = call_json(capsys, "sweep", *sweep_args, "--gpu", "h100", "--metrics", ",".join(INFERENCE_METRICS))
    assert data["points_total"] == 1 and data["skipped"] == 0, data["skipped_reasons"]
    row = data["points"][0]
    inference = call_json(capsys, "inference", *inference_args, "--gpu", "h100")
    for metric in INFERENCE_METRICS:
        assert row[metric] == lookup(inference, METRIC_SOURCES[metric][1]), metric


def test_compute_dtype_prices_the_inference_roofline(capsys):
    """--dtype is the compute dtype (InferenceSpec.compute_dtype): fp8 matmuls at the fp8 peak; the
    weights follow it unless --weight-dtype is given."""
    from transformer_calc.estimators.inference.roofline import InferenceSpec, inference_memory, prefill_step
    from transformer_calc.sources.presets import gpu, preset_model

    data = call_json(capsys, "sweep", "--preset", "llama-3-8b", "--S", "4096", "--B", "16", "--gpu", "h100",
                     "--dtype", "bf16,fp8", "--metrics", "time_to_first_token_s,inference_memory_bytes")
    got = [(r["time_to_first_token_s"], r["inference_memory_bytes"]) for r in data["points"]]
    m, h100 = preset_model("llama-3-8b"), gpu("h100")
    specs = [InferenceSpec(batch_size=16, prompt_len=4096, weight_dtype=d, compute_dtype=d) for d in ("bf16", "fp8")]
    assert got == [(prefill_step(m, h100, s).seconds, inference_memory(m, h100, s).total_bytes) for s in specs]
    assert got[1][0] < got[0][0] and got[1][1] < got[0][1]
    pinned = call_json(capsys, "sweep", "--preset", "llama-3-8b", "--S", "4096", "--B", "16", "--gpu", "h100",
                       "--dtype", "fp8", "--weight-dtype", "bf16", "--metrics", "inference_memory_bytes")
    assert pinned["points"][0]["inference_memory_bytes"] == data["points"][0]["inference_memory_bytes"]


def test_job_file_sections(tmp_path, capsys):
    """A job file's training: and inference: sections set the axes and settings, as they do for
    memory and inference; flags win."""
    job = tmp_path / "job.yaml"
    job.write_text("model: {preset: llama-2-7b, n_layers: 8}\n"
                   "training: {S: 2048, B: 2, T: 2, sp: true, recompute: selective, grad_bytes: 2, optimizer: lion, gpu: a100-80gb}\n"
                   "inference: {S: 1024, B: 8, new_tokens: 32, kv_dtype: fp8, gpu: h100}\n")
    train = call_json(capsys, "sweep", "--config", str(job), "--metrics", MEMORY_METRICS)
    memory = call_json(capsys, "memory", "--config", str(job))
    assert train["points_total"] == 1
    for metric in MEMORY_METRICS.split(","):
        assert train["points"][0][metric] == lookup(memory, METRIC_SOURCES[metric][1]), metric
    infer = call_json(capsys, "sweep", "--config", str(job), "--metrics", ",".join(INFERENCE_METRICS))
    inference = call_json(capsys, "inference", "--config", str(job))
    for metric in INFERENCE_METRICS:
        assert infer["points"][0][metric] == lookup(inference, METRIC_SOURCES[metric][1]), metric
    assert (infer["points"][0]["batch_size"], infer["points"][0]["gpu"]) == (8, "H100-SXM5-80GB")
    flagged = call_json(capsys, "sweep", "--config", str(job), "--B", "4", "--metrics", "peak_bytes")
    assert flagged["points"][0]["batch_size"] == 4
    code, out, err = call(capsys, "sweep", "--config", str(job), "--metrics", "peak_bytes,kv_cache_bytes")
    assert code == 2 and "training: and inference: sections give" in err and out == ""


def test_rows_skip_what_a_model_cannot_run(capsys):
    data = call_json(capsys, "sweep", "--preset", "llama-2-7b,gpt2", "--B", "1,4", "--T", "1,2,3", "--S", "1024")
    assert data["points_total"] == 12 and data["skipped"] == 2  # T=3 does not divide llama's 32 heads
    assert len(data["points"]) == 10 and "T (3)" in data["skipped_reasons"][0] or "3" in data["skipped_reasons"][0]


# ---------------------------------------------------------------------------- streaming
@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_streamed_output_equals_the_buffered_one(capsys, fmt):
    argv = ["sweep", "--preset", "llama-2-7b", "--B", "1..200:1", "--T", "1,2,3", "--gpu", "a100-80gb",
            "--metrics", "peak_bytes,fits,model_flops,tokens_per_s,decode_bound", "-f", fmt]
    code, streamed, _ = call(capsys, *argv)
    assert code == 0
    code, buffered, _ = call(capsys, *argv, "--sort", "B")  # sorting buffers; a stable sort on the outer axis keeps the order
    assert code == 0 and streamed == buffered
    if fmt == "json":
        data = json.loads(streamed)
        assert data["skipped"] == 200 and len(data["points"]) == 400
        assert list(data) == ["axes", "metrics", "points_total", "points", "skipped", "skipped_reasons"]


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_streamed_empty_result_equals_the_buffered_one(capsys, fmt):
    argv = ["sweep", "--preset", "llama-2-7b", "--T", "3", "-f", fmt]  # every point skipped
    code, streamed, _ = call(capsys, *argv)
    assert code == 0
    assert (code, streamed) == call(capsys, *argv, "--sort", "B")[:2]
    if fmt == "json":
        data = json.loads(streamed)
        assert data["points"] == [] and data["skipped"] == 1 and "flash=true" in data["skipped_reasons"][0]


def test_streaming_writes_rows_before_the_grid_ends():
    """A generator, not a list: the first rows exist before the last point is priced."""
    from transformer_calc.sources.presets import preset_model
    from transformer_calc.results.sweep_run import prepare

    run_ = prepare({"gpt2": preset_model("gpt2")}, {"batch_size": "1..100000:1"}, {}, ["peak_bytes"])
    rows = run_.rows()
    first = next(rows)
    assert first["batch_size"] == 1 and run_.stats.skipped == 0
    rows.close()


def test_fits_only_sort_limit_csv(capsys):
    code, out, _ = call(capsys, "sweep", "--preset", "llama-2-7b", "--B", "1..64", "--T", "1,2,4,8", "--gpu", "a100-80gb",
                        "--recompute", "full", "--fits-only", "--sort", "-peak_bytes", "--limit", "3", "-f", "csv")
    lines = out.strip().splitlines()
    header = lines[0].split(",")
    assert code == 0 and len(lines) == 4
    mem = [int(line.split(",")[header.index("peak_bytes")]) for line in lines[1:]]
    assert mem == sorted(mem, reverse=True) and max(mem) <= 80 * 10**9
    assert all(line.split(",")[header.index("fits")] == "true" for line in lines[1:])  # lowercase, as JSON


def test_limit_counts_the_whole_grid(capsys):
    data = call_json(capsys, "sweep", "--preset", "llama-2-7b", "--T", "1,3,5,2", "--limit", "1")
    assert len(data["points"]) == 1 and data["skipped"] == 2


def test_table_output_smoke(capsys):
    code, out, _ = call(capsys, "sweep", "--preset", "gpt2", "--B", "1..8", "--T", "1,2")
    assert code == 0 and "8 of 8 points shown" in out
    code, out, _ = call(capsys, "sweep", "--preset", "gpt2", "--B", "1..300:1")
    assert code == 0 and "200 of 300 points shown" in out and "for all 300" in out


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
                        "--metrics", "time_per_output_token_s,decode_tokens_per_s,decode_bound", "--y", "decode_tokens_per_s",
                        "--x", "B", "--plot", str(path), "-f", "json")
    assert code == 0, err
    assert path.stat().st_size > 1000


# ---------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--metrics", "memry"], "unknown metric 'memry'; did you mean"),
        (["--metrics", "memory"], "'memory' is now 'peak_bytes'"),
        (["--B", "64..8"], "1 <= a <= b"),
        (["--recompute", "half"], "--recompute ('half')"),
        (["--sort", "speed"], "--sort 'speed': not a column"),
        (["--B", "1..1000000:1", "--T", "1..2:1", "--S", "1..2:1"], "keep it under 1,000,000"),
        (["--zero", "0..4:1"], "4 is out of range; use a whole number from 0 to 3"),
        (["--plot", "/tmp/x.png", "--x", "Q"], "--x 'Q': not an axis"),
        (["--optimizer", "bogus"], "optimizer"),
        (["--precision", "fp12"], "precision"),
        (["--framework", "jax"], "framework"),
        (["--cross-entropy", "magic"], "cross_entropy"),
        (["--activations", "lots"], "activations"),
        (["--p", "3"], "p (3)"),
        (["--gpu", "a100-80gbx"], "a100"),
        (["--gpu", "h100", "--weight-dtype", "int3", "--metrics", "kv_cache_bytes"], "weight_dtype ('int3')"),
        (["--gpu", "h100", "--kv-dtype", "fp9", "--metrics", "kv_cache_bytes"], "kv_dtype ('fp9')"),
        (["--gpu", "h100", "--dtype", "bogus", "--metrics", "tokens_per_s"], "--dtype ('bogus')"),
        (["--gpu", "v100", "--dtype", "bf16", "--metrics", "train_days", "--tokens", "1e9"], "no dense bf16 peak"),
        (["--gpu", "h100", "--mla-cache", "dense", "--metrics", "kv_cache_bytes"], "mla_cache"),
        (["--kv-dtype", "fp8"], "--kv-dtype applies to inference metrics"),
        (["--weight-dtype", "int4"], "--weight-dtype applies to inference metrics"),
        (["--gpu", "h100", "--metrics", "tokens_per_s", "--sp"], "--sp applies to training metrics"),
        (["--dtype", "fp8"], "--dtype (the compute dtype)"),
        (["--gpu", "h100", "--metrics", "train_days"], "--tokens"),
        (["--mfu", "1.5"], "--mfu"),
        (["--set", "bogus=1"], "unknown field 'bogus'"),
        (["--L", "4", "--set", "n_layers=5"], "given twice"),
        (["--gpu", "h100", "--T", "1", "--metrics", "tokens_per_s", "--P", "2"], "--P applies to training metrics"),
    ],
)
def test_sweep_bad_input(capsys, argv, message):
    code, out, err = call(capsys, "sweep", "--preset", "gpt2", *argv)
    assert (code, out) == (2, "") and err.startswith("Error: ") and err.count("\n") == 1, err
    assert message in err, err


def test_no_model(capsys):
    code, out, err = call(capsys, "sweep")
    assert (code, out) == (2, "") and "no model given" in err


def test_sp_is_sequence_parallelism(capsys):
    data = call_json(capsys, "sweep", "--preset", "gpt2", "--T", "1,2", "--sp")
    assert len(data["points"]) == 2 and data["skipped"] == 0  # --sp used to skip every point
    plain = call_json(capsys, "sweep", "--preset", "gpt2", "--T", "2", "--no-sp")
    assert data["points"][1]["peak_bytes"] < plain["points"][0]["peak_bytes"]
    default = call_json(capsys, "sweep", "--preset", "gpt2", "--T", "2")  # megatron's default: SP at T > 1
    assert default["points"][0]["peak_bytes"] == data["points"][1]["peak_bytes"]


def test_worker_processes_give_the_same_rows_and_skips():
    """Large grids are priced by forked workers in chunks: the same rows, order, skip count and
    reasons as one process."""
    from transformer_calc.sources.presets import gpu, preset_model
    from transformer_calc.results.sweep_run import prepare

    models = {"llama-2-7b": preset_model("llama-2-7b"), "gpt2": preset_model("gpt2")}
    axes = {"batch_size": "1..40:1", "tensor": "1,2,3,5", "pipeline": "1,2,7", "gpu": "a100-80gb,h100"}
    metrics = ["peak_bytes", "fits", "hardware_flops", "kv_cache_bytes", "decode_bound"]
    serial = prepare(models, axes, {}, metrics, gpu_lookup=gpu)
    serial.workers = 1
    parallel = prepare(models, axes, {}, metrics, gpu_lookup=gpu)
    parallel.workers, parallel.chunk = 2, 97  # chunks that cut the inner axes anywhere
    assert serial.report() == parallel.report()
    assert serial.stats.skipped > 0 and len(serial.stats.reasons) == 5
    assert gpu("h100").name in serial.spec.axes["gpu"]


@pytest.mark.parametrize("threshold, forks", [(1.0, False), (0.0, True)])
def test_the_default_workers_fork_only_for_dear_points(monkeypatch, threshold, forks):
    """With the default number of processes, the first chunk is priced in this process and timed:
    the rest too where a point costs less than FORK_MIN_POINT_S, else forked workers price it (with
    the first chunk's caches). The rows, order and skips are one process's either way."""
    import os

    from transformer_calc.results import sweep_run
    from transformer_calc.sources.presets import gpu, preset_model

    monkeypatch.delenv("TCALC_SWEEP_WORKERS", raising=False)
    monkeypatch.setattr(sweep_run, "default_workers", lambda size: 2)
    monkeypatch.setattr(sweep_run, "FORK_MIN_POINT_S", threshold)
    forked, real_fork = [], os.fork
    monkeypatch.setattr(os, "fork", lambda: forked.append(1) or real_fork())
    models = {"llama-2-7b": preset_model("llama-2-7b")}
    axes = {"batch_size": "1..60:1", "tensor": "1,2,3,8", "pipeline": "1,2", "gpu": "a100-80gb"}
    serial = sweep_run.prepare(models, axes, {}, ["peak_bytes", "fits", "model_flops"], gpu_lookup=gpu)
    serial.workers = 1
    timed = sweep_run.prepare(models, axes, {}, ["peak_bytes", "fits", "model_flops"], gpu_lookup=gpu)
    timed.chunk = 97
    assert timed.report() == serial.report() and serial.stats.skipped > 0
    assert bool(forked) is forks


def test_a_closed_pipe_stops_the_workers():
    import os
    import subprocess
    import sys

    env = {**os.environ, "TCALC_SWEEP_WORKERS": "2", "PYTHONPATH": os.getcwd()}
    proc = subprocess.run(f"{sys.executable} -m transformer_calc sweep --preset gpt2 --B 1..50000:1 -f csv | head -3",
                          shell=True, capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and proc.stdout.count("\n") == 3 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("preset", ["llama-2-7b", "mixtral-8x7b", "deepseek-v3", "gemma-3-27b", "gpt2"])
def test_the_shard_memo_holds_what_it_assumes(preset):
    """inference.rank_shard is memoized per layout (every InferenceSpec field but B, S, N_new): the
    shard must not depend on the workload, and the memo must return what the function computes."""
    import dataclasses

    from transformer_calc.estimators.inference.roofline import InferenceSpec, rank_shard
    from transformer_calc.sources.presets import preset_model

    m = preset_model(preset)
    T = 8 if m.n_kv_heads % 8 == 0 or 8 % m.n_kv_heads == 0 else 1
    base = InferenceSpec(batch_size=1, prompt_len=1, tensor_parallel=T, kv_dtype="fp8")
    for B, S, N in ((1, 1, 1), (7, 4096, 33), (512, 131072, 2)):
        spec = dataclasses.replace(base, batch_size=B, prompt_len=S, new_tokens=N)
        assert rank_shard(m, spec) == rank_shard.uncached(m, spec) == rank_shard.uncached(m, base)
    assert rank_shard(m, dataclasses.replace(base, tensor_parallel=1)) == rank_shard.uncached(m, dataclasses.replace(base, tensor_parallel=1))


@pytest.mark.parametrize("text", ["8192", "8k", "4M", "1e3", "1_000", "2.5k", "1.5", "x", "-3", "0", "1e-3", "8K", "2T"])
@pytest.mark.parametrize("axis", ["batch_size", "seq_len", "zero"])
def test_axis_numbers_are_read_by_the_one_parser(axis, text):
    """A sweep axis's numbers (both doors: prepare's reader) are config.parse_whole's reading, the
    parser of every other integer option: the same value, or both an error."""
    from transformer_calc.requests.sweep_grid import _number
    from transformer_calc.model.config import parse_whole

    try:
        want = parse_whole(text, low=0 if axis == "zero" else 1, high=3 if axis == "zero" else None,
                           binary=axis == "seq_len")
    except ValueError:
        want = None
    try:
        got = _number(axis, "--x", text)
    except TcalcError:
        got = None
    assert got == want


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(preset=st.sampled_from(["gpt2", "llama-2-7b", "mixtral-8x7b", "qwen3-30b-a3b"]), B=st.integers(1, 64),
       S=st.sampled_from([128, 1000, 2048, 4096]), T=st.sampled_from([1, 2, 4, 8]), P=st.sampled_from([1, 2, 3, 4]),
       dp=st.sampled_from([1, 2, 8]), zero=st.integers(0, 3), recompute=st.sampled_from(["none", "selective", "full"]),
       flash=st.booleans(), sp=st.booleans(), framework=st.sampled_from(["pytorch", "megatron", "deepspeed"]))
def test_every_point_is_the_memory_report(preset, B, S, T, P, dp, zero, recompute, flash, sp, framework):
    """Property: a sweep point's memory metrics are `memory_report`'s for the same configs (or the
    point is skipped exactly when the report refuses the layout)."""
    from transformer_calc.model.config import Parallelism, Training, Workload
    from transformer_calc.sources.presets import gpu, preset_model
    from transformer_calc.results.memory import memory_report
    from transformer_calc.results.sweep_run import prepare

    m, device = preset_model(preset), gpu("h100")
    run_ = prepare({preset: m}, {"batch_size": [B], "seq_len": [S], "tensor": [T], "pipeline": [P], "data": [dp],
                                 "zero": [zero], "recompute": [recompute], "flash": [str(flash).lower()], "gpu": "h100"},
                   {"sequence_parallel": sp, "framework": framework}, MEMORY_METRICS.split(","), gpu_lookup=gpu)
    report = run_.report()
    try:
        want = memory_report(m, Workload(seq_len=S, batch_size=B), Training(recompute=recompute, flash=flash, framework=framework),
                             Parallelism(tensor=T, pipeline=P, data=dp, zero=zero, sequence_parallel=sp),
                             device).model_dump(mode="json")
    except (ValueError, TcalcError):
        assert report["skipped"] == 1 and report["points"] == []
        return
    row = report["points"][0]
    for metric in MEMORY_METRICS.split(","):
        assert row[metric] == lookup(want, METRIC_SOURCES[metric][1]), metric


def test_api_sweep_of_a_job_file_equals_the_cli(tmp_path, capsys):
    import transformer_calc.api as tc

    job = tmp_path / "job.yaml"
    job.write_text("model: {preset: llama-3-8b}\ntraining: {S: 4096, T: 2, recompute: full, gpu: h100}\n"
                   "inference: {S: 2048, B: 16, new_tokens: 64, gpu: h100}\n")
    for metrics in ("peak_bytes,fits,hardware_flops", "kv_cache_bytes,tokens_per_s"):
        api = tc.sweep(config=str(job), B="1,2", metrics=metrics).model_dump(mode="json")
        assert api == call_json(capsys, "sweep", "--config", str(job), "--B", "1,2", "--metrics", metrics)


@pytest.mark.parametrize("preset, training, layout, S", [
    ("llama-2-7b", {}, {}, 512),
    ("gpt2", {"recompute": "selective", "framework": "megatron"}, {"tensor": 2, "pipeline": 2, "sequence_parallel": True}, 1024),
    ("llama-3-8b", {"cross_entropy": "chunked", "flash": True}, {"data": 8, "zero": 3}, 256),   # below one chunk: no lines
    ("llama-3-8b", {"cross_entropy": "chunked", "flash": True}, {"data": 8, "zero": 3}, 4096),
    ("mixtral-8x7b", {"flash": True, "framework": "deepspeed"}, {"data": 8, "expert": 8, "zero": 2}, 2048),
    ("llama-3.1-8b", {"finetune": "qlora", "flash": True, "recompute": "full"}, {}, 2048),
    ("qwen3-30b-a3b", {"offload": "optimizer", "flash": True}, {"data": 4, "zero": 3, "pipeline": 2}, 1024),
])
def test_affine_peaks_equal_the_timeline_at_every_batch(preset, training, layout, S):
    """The sweep prices B from per-phase lines in B (sweep.affine_peaks); at any B they equal the
    timeline itself, peak phase and stage tie-breaking included."""
    from transformer_calc.model.config import Parallelism, Training, Workload
    from transformer_calc.sources.presets import preset_model
    from transformer_calc.estimators.sweep_lines import affine_peaks, peak_at
    from transformer_calc.estimators.training.timeline import peak_memory

    m, tr, par = preset_model(preset), Training(**training), Parallelism(**layout)
    lines = affine_peaks(m, S, tr, par, True)
    if training.get("cross_entropy") == "chunked" and S < 1024:
        assert lines is False
        return
    assert lines is not False
    for B in (1, 2, 5, 7, 64, 333, 4096):
        ph = peak_memory(m, Workload(seq_len=S, batch_size=B), tr, par).peak
        assert peak_at(lines, B) == (ph.total, ph.weights, ph.activations), B


def test_the_typed_result_declares_every_axis_in_grid_order():
    """results/sweep.py's SweepAxes has a field per axis of the grid, in AXES's order (the JSON's)."""
    from transformer_calc.requests.sweep_grid import AXES
    from transformer_calc.results.sweep import SweepAxes

    assert list(SweepAxes.model_fields) == list(AXES)


LINE_PRESETS = ["gpt2", "llama-2-7b", "mixtral-8x7b", "deepseek-v3", "gemma-2-9b", "qwen3-next-80b-a3b",
                "falcon-h1-34b", "gemma-4-26b-a4b", "deepseek-v4-flash-0731", "lfm2-1.2b"]


@pytest.mark.parametrize("preset", LINE_PRESETS)
def test_flops_lines_equal_count_flops_at_every_batch(preset):
    """The sweep prices the step FLOPs from lines in B (sweep_lines.flops_lines); where they are
    given, they equal count_flops at any B, for the total and every recompute policy."""
    from transformer_calc.estimators.flops import count_flops
    from transformer_calc.estimators.sweep_lines import flops_lines
    from transformer_calc.model.config import Recompute, Workload
    from transformer_calc.sources.presets import preset_model

    m = preset_model(preset)
    for S in (1000, 4096):
        lines = flops_lines(m, S, 4096)
        if lines is False:
            continue
        for B in (1, 2, 5, 7, 64, 333, 4096):
            step = count_flops(m, Workload(seq_len=S, batch_size=B))
            assert lines["total"][0] + B * lines["total"][1] == step.total, (S, B)
            for r in Recompute:
                assert lines[r][0] + B * lines[r][1] == step.hardware(r), (S, B, r)


@pytest.mark.parametrize("preset, T, ep, S", [
    ("llama-2-7b", 1, 1, 1024), ("llama-2-7b", 8, 1, 4096), ("gpt2", 2, 1, 1000), ("mixtral-8x7b", 2, 8, 2048),
    ("deepseek-v3", 8, 1, 4096), ("gemma-2-9b", 4, 1, 8192), ("qwen3-next-80b-a3b", 4, 1, 1024),
    ("falcon-h1-34b", 2, 1, 3000),
])
def test_decode_lines_equal_decode_at_every_batch(preset, T, ep, S):
    """The sweep prices a one-token decode from lines in B (sweep_lines.decode_lines); where they
    are given, `decode_at` equals `decode` itself at any B, bit for bit (floats included)."""
    from transformer_calc.estimators.inference.roofline import InferenceSpec, decode
    from transformer_calc.estimators.sweep_lines import decode_at, decode_lines
    from transformer_calc.sources.presets import gpu, preset_model

    m, device = preset_model(preset), gpu("h100")

    def spec_at(B):
        return InferenceSpec(batch_size=B, prompt_len=S, tensor_parallel=T, expert_parallel=ep, weight_dtype="bf16")

    lines = decode_lines(m, device, spec_at, 4096)
    if lines is False:
        assert m.is_moe or preset in ("qwen3-next-80b-a3b",), preset  # dense attention models are lines
        return
    for B in (1, 2, 5, 7, 64, 333, 1000, 4096):
        d = decode(m, device, spec_at(B))
        assert decode_at(lines, B) == (d.seconds_per_token, d.tokens_per_s, d.bound, d.seconds), B


def test_peak_curve_equals_peak_at_in_any_order():
    """PeakCurve keeps the winning phase with the range of B it wins over; asked in any order it
    answers peak_at's (total, weights, activations), ties resolved the same way."""
    import random

    from transformer_calc.estimators.sweep_lines import PeakCurve, affine_peaks, peak_at
    from transformer_calc.model.config import Parallelism, Training
    from transformer_calc.sources.presets import preset_model

    ties = [[((10, 1, 0), (2, 0, 2)), ((0, 2, 0), (4, 0, 4))], [((20, 3, 0), (0, 0, 0)), ((10, 1, 0), (2, 0, 2))]]
    real = affine_peaks(preset_model("mixtral-8x7b"), 2048, Training(flash=True), Parallelism(pipeline=4, data=2), True)
    assert real is not False
    rng = random.Random(39)
    for lines in (ties, real):
        curve = PeakCurve(lines)
        for B in [*range(1, 40), *rng.sample(range(1, 5000), 300), 5, 4, 6, 3]:
            assert curve(B) == peak_at(lines, B), B


def test_only_the_float_metrics_are_floats(capsys):
    """The non-finite check runs on FLOAT_METRICS only: every other metric is an int, a boolean, a
    bound's name or None, on training, inference, MoE and hybrid models."""
    from transformer_calc.estimators.sweep import FLOAT_METRICS, METRICS

    for preset, new_tokens in (("llama-2-7b", "1"), ("mixtral-8x7b", "64"), ("falcon-h1-34b", "64")):
        data = call_json(capsys, "sweep", "--preset", preset, "--B", "1,7", "--T", "1,2", "--gpu", "h100",
                         "--metrics", ",".join(METRICS), "--tokens", "1e12", "--new-tokens", new_tokens)
        assert data["points"], data["skipped_reasons"]
        for row in data["points"]:
            floats = {k for k in METRICS if isinstance(row[k], float)}
            assert floats <= FLOAT_METRICS, floats - FLOAT_METRICS
