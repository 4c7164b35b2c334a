"""Sweep benchmark: wall time of 10,000-point `tcalc sweep` runs, start-up included (issue: <= 2 s).

    python bench/sweep.py [--repeats 5]
"""

from __future__ import annotations

import argparse

from _common import machine, tcalc_command, time_command

CASES = [
    ("training metrics (memory, fits, flops)",
     "sweep --preset llama-2-7b --B 1..1000:1 --T 1,2,4,8,16 --P 1,2 --gpu a100-80gb --format csv"),
    ("training, two models x 5000",
     "sweep --preset llama-2-7b,gpt3 --B 1..500:1 --T 1,2,4,8,16 --P 1,2 --gpu a100-80gb --metrics memory,fits,flops,train_days --tokens 1e12 --format json"),
    ("inference metrics (kv_cache, decode_s, tokens_per_s, bound)",
     "sweep --preset llama-2-7b --B 1..1000:1 --S 1024,4096 --T 1,2,4,8,16 --gpu a100-80gb --metrics kv_cache,decode_s,tokens_per_s,bound --format csv"),
    ("table view (first 200 rows)",
     "sweep --preset llama-2-7b --B 1..1000:1 --T 1,2,4,8,16 --P 1,2 --gpu a100-80gb"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    tcalc = tcalc_command()
    print(f"machine: {machine()}")
    for label, case in CASES:
        median, best = time_command(tcalc + case.split(), args.repeats)
        verdict = "ok" if median <= 2.0 else "SLOW"
        print(f"{label:<62} 10,000 points  median {median:6.3f} s  min {best:6.3f} s  {verdict} (<= 2 s)")


if __name__ == "__main__":
    main()
