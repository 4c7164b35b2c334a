"""Run the cross-checks of `.ci/run` side by side: each one a process of its own, at most `--jobs`
at a time, the slowest started first (so the last to finish is not a long one started late).

Each check keeps every case it has (the same scripts and arguments CI ran one after another); only
the order and the overlap change. Every check runs single-threaded (OMP/MKL/torch intra-op threads
1): the parallelism is between checks, so `--jobs` processes never oversubscribe `--jobs` cores.
A check's output is printed whole when it ends, with its wall time; the run fails (exit 1) if any
check fails, after all have ended, and lists which.

    python tools/crosscheck/run_all.py [--jobs N] [--only NAME ...] [--list]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


@dataclass(frozen=True)
class Check:
    name: str
    args: tuple[str, ...]
    needs: str  # the pip extra it needs beyond torch + transformers ("" or "peft")
    cost: int  # relative CPU time of one run (seconds on one core, measured; orders the queue)


# The cross-checks, heaviest first. `cost` is the single-core time measured on the CI machine size
# (2 cores): only the start order depends on it.
CHECKS: tuple[Check, ...] = (
    Check("peft_params", ("peft_params.py", "--n", "1"), "peft", 300),
    Check("activations_mixers", ("activations_mixers.py",), "", 185),
    Check("peak_memory", ("peak_memory.py", "--eager-only"), "", 110),
    Check("flops_mixers", ("flops_mixers.py",), "", 100),
    Check("flops", ("flops.py",), "", 90),
    Check("hf_params", ("hf_params.py",), "", 40),
    Check("activations", ("activations.py",), "", 40),
    Check("lora_activations", ("lora_activations.py",), "peft", 30),
    Check("verify_presets", ("verify_presets.py",), "", 25),
    Check("kv_cache", ("kv_cache.py",), "", 20),
    Check("hf_towers", ("hf_towers.py",), "", 15),
    Check("kv_cache_deepseek_v4", ("kv_cache_deepseek_v4.py",), "", 10),
    Check("lora_activations_mixers", ("lora_activations_mixers.py",), "peft", 10),
)

ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "TORCH_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


@dataclass(frozen=True)
class Outcome:
    check: Check
    code: int
    seconds: float
    output: str


def run(check: Check) -> Outcome:
    """One check as its own process, single-threaded, from the repository root."""
    env = os.environ | ONE_THREAD | {"PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    p = subprocess.run([sys.executable, str(HERE / check.args[0]), *check.args[1:]], cwd=REPO, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    return Outcome(check, p.returncode, time.perf_counter() - start, p.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="checks at a time (default: the cores)")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run only these checks (names: --list)")
    ap.add_argument("--list", action="store_true", help="print the checks and their commands, run nothing")
    args = ap.parse_args(argv)
    known = {c.name for c in CHECKS}
    unknown = sorted(set(args.only or ()) - known)
    if unknown:
        ap.error(f"--only: unknown check(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1 (got {args.jobs})")
    checks = [c for c in CHECKS if not args.only or c.name in args.only]
    if args.list:
        for c in checks:
            print(f"{c.name:26} python tools/crosscheck/{' '.join(c.args)}")
        return 0
    start = time.perf_counter()
    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run, c) for c in sorted(checks, key=lambda c: -c.cost)]
        for f in as_completed(futures):
            o = f.result()
            outcomes.append(o)
            verdict = "ok" if o.code == 0 else f"FAILED (exit {o.code})"
            print(f"+ cross-check {o.check.name}: python tools/crosscheck/{' '.join(o.check.args)}", flush=True)
            print(o.output.rstrip(), flush=True)
            print(f"+ cross-check {o.check.name}: {verdict} in {o.seconds:.0f} s", flush=True)
    wall = time.perf_counter() - start
    print(f"+ cross-checks: {len(outcomes)} in {wall:.0f} s with {args.jobs} at a time "
          f"(sum of their times {sum(o.seconds for o in outcomes):.0f} s)")
    for o in sorted(outcomes, key=lambda o: -o.seconds):
        print(f"  {o.check.name:26} {o.seconds:6.0f} s  {'ok' if o.code == 0 else 'FAILED'}")
    failed = [o.check.name for o in outcomes if o.code != 0]
    if failed:
        print(f"cross-checks failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
