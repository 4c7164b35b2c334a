"""Compare tcalc with llm-analysis 0.2.2 on the same training job: numbers and wall time.

    python bench/compare_llm_analysis.py [--venv bench/.venv-llm-analysis]

llm-analysis is installed into its own virtual environment (created on first run with
`pip install llm-analysis==0.2.2`), never into tcalc's. The job: GPT-3 175B as llm-analysis's
`megatron-lm-175b` config (L=96, D=12288, A=96, V=50272, K=2048), S=2048, micro-batch 1, T=8 with
sequence parallelism, P=8, 64 A100 80GB, mixed precision with Adam, no recomputation, eager
attention (llm-analysis: flash_attn False, softmax_dropout True). Both tools print per-GPU bytes;
the differences come from their conventions (see bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import machine, tcalc_command

HERE = Path(__file__).resolve().parent
LLM_ANALYSIS = [
    "train", "--model_name=megatron-lm-175b", "--gpu_name=a100-sxm-80gb", "--dtype_name=w16a16e16",
    "--seq_len=2048", "--batch_size_per_gpu=1", "--tp_size=8", "--pp_size=8", "--total_num_gpus=64",
    "--flash_attn=False", "--softmax_dropout=True", "--activation_recomputation=0", "--log_level=ERROR",
]
TCALC = [
    "memory", "--L", "96", "--D", "12288", "--A", "96", "--V", "50272", "--K", "2048", "--S", "2048", "--B", "1",
    "--T", "8", "--sp", "--P", "8", "--dropout", "--gpu", "a100-80gb", "--format", "json",
]


def ensure_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "llm-analysis==0.2.2"], check=True)
    return python


def timed(argv: list[str], repeats: int) -> tuple[float, str]:
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), out


def last_json_object(text: str) -> dict:
    start = text.rfind("\n{")
    return json.loads(text[start + 1 :] if start >= 0 else text)


def loop_llm_analysis(python: Path, points: int) -> tuple[float, int]:
    """(seconds, configurations it evaluated fully) for llm-analysis to go through `points`
    micro-batch sizes with full recomputation in one process (it has no sweep)."""
    code = (
        "from llm_analysis.analysis import train\n"
        "ok = 0\n"
        f"for b in range(1, {points} + 1):\n"
        "    try:\n"
        "        train(model_name='megatron-lm-175b', gpu_name='a100-sxm-80gb', seq_len=2048,"
        " batch_size_per_gpu=b, tp_size=8, pp_size=8, total_num_gpus=64, flash_attn=False,"
        " softmax_dropout=True, activation_recomputation=2, log_level='ERROR')\n"
        "        ok += 1\n"
        "    except AssertionError:\n"  # llm-analysis asserts that the job fits the GPU
        "        pass\n"
        "print(ok)\n"
    )
    start = time.perf_counter()
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout
    return time.perf_counter() - start, int(out.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=HERE / ".venv-llm-analysis")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    python = ensure_venv(args.venv)
    t_llm, out_llm = timed([str(python), "-m", "llm_analysis.analysis", *LLM_ANALYSIS], args.repeats)
    t_tc, out_tc = timed([*tcalc_command(), *TCALC], args.repeats)
    llm, tc = last_json_object(out_llm), json.loads(out_tc)
    per = tc["memory"]["per_gpu"]
    rows = [
        ("weights", llm["weight_memory_per_gpu"], per["weights_bytes"]),
        ("gradients", llm["gradient_memory_per_gpu"], per["gradients_bytes"]),
        ("optimizer states", llm["optimizer_state_memory_per_gpu"], per["optimizer_bytes"]),
        ("activations", llm["activation_memory_per_gpu"], per["activations_bytes"]),
        ("total", llm["(weight+op_state+grad+act)_memory_per_gpu"], per["total_bytes"]),
        ("FLOPs per micro-batch", llm["num_flops_total_per_micro_batch"], None),
    ]
    print(f"machine: {machine()}")
    print(f"{'per GPU (GPT-3 175B, T=8+SP, P=8)':<36} {'llm-analysis':>16} {'tcalc':>16} {'diff':>8}")
    for label, a, b in rows:
        diff = f"{100 * (b - a) / a:+.1f} %" if b is not None and a else ""
        fb = f"{b / 2**30:13.2f} GiB" if b is not None and label != "FLOPs per micro-batch" else ""
        fa = f"{a / 2**30:13.2f} GiB" if label != "FLOPs per micro-batch" else f"{a:.4g}"
        print(f"{label:<36} {fa:>16} {fb:>16} {diff:>8}")
    print(f"{'wall time, one invocation (median)':<36} {1e3 * t_llm:13.0f} ms {1e3 * t_tc:13.0f} ms")
    points = 100
    t_loop, evaluated = loop_llm_analysis(python, points)
    t_sweep, _ = timed(
        [*tcalc_command(), "sweep", "--config", str(HERE / "gpt3-megatron.yaml"), "--B", f"1..{points}:1",
         "--T", "8", "--P", "8", "--gpu", "a100-80gb", "--sp", "--recompute", "full", "--format", "csv"],
        1,
    )
    print(f"B = 1..{points} with full recomputation, one process each, start-up included: "
          f"llm-analysis {t_loop:.2f} s ({evaluated} of {points} evaluated; it stops at an assertion "
          f"when a job does not fit), tcalc sweep {t_sweep:.2f} s (all {points})")


if __name__ == "__main__":
    main()
