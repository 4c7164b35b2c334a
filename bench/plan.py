"""Benchmark `tcalc plan` (issue 17 targets, start-up included: a 70B model on 1,024 GPUs in <= 1 s,
on 16,384 GPUs in <= 3 s) and `tcalc train`. Whole processes, median of 11 runs.

    python bench/plan.py
"""

from __future__ import annotations

from _common import machine, tcalc_command, time_command

CASES = [
    ("plan 70B, 1024 H100", ["plan", "--preset", "llama-3-70b", "--gpus", "1024", "--gpu", "h100",
                            "--global-batch-tokens", "4M", "--S", "8192", "-f", "json"], 1.0),
    ("plan 70B, 16384 H100", ["plan", "--preset", "llama-3-70b", "--gpus", "16384", "--gpu", "h100",
                             "--global-batch-tokens", "16M", "--S", "8192", "-f", "json"], 3.0),
    ("plan 405B, 16384 H100", ["plan", "--preset", "llama-3.1-405b", "--gpus", "16384", "--gpu", "h100",
                              "--global-batch-tokens", "16M", "--S", "8192", "-f", "json"], 3.0),
    ("plan DeepSeek-V3 128k, 2048", ["plan", "deepseek-v3", "--gpus", "2048", "--gpu", "h100", "--S", "128k",
                                     "--global-batch", "256", "-f", "json"], 5.0),
    ("plan 405B torchtitan, 512", ["plan", "--preset", "llama-3.1-405b", "--gpus", "512", "--gpu", "h100",
                                   "--global-batch", "256", "--S", "8192", "--framework", "torchtitan", "--compile",
                                   "-f", "json"], 3.0),
    ("train gpt3, 64 A100", ["train", "--preset", "gpt3", "--gpus", "64", "--gpu", "a100-80gb", "--T", "8",
                            "--P", "8", "--sp", "--global-batch", "64", "--micro-batch", "1", "--S", "2048",
                            "-f", "json"], 1.0),
]


def main() -> None:
    tcalc = tcalc_command()
    print(machine())
    for label, argv, target in CASES:
        median, best = time_command([*tcalc, *argv], repeats=11)
        print(f"{label:<24} median {median * 1e3:7.0f} ms  min {best * 1e3:7.0f} ms  target {target:.0f} s  "
              f"{'OK' if median <= target else 'SLOW'}")


if __name__ == "__main__":
    main()
