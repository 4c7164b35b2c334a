"""Sweep benchmark: wall time, points per second and peak RSS of whole `tcalc sweep` runs
(start-up included), per metric family, and the peak memory of a streamed 10^6-point sweep (the
process and its worker processes together).

    python bench/sweep.py [--repeats 3] [--quick] [--workers N] [--points 100000]

Targets (issue 39, on the project's 2-core machine): 10^4 points <= 2 s; 10^5 points with
training metrics <= 1.0 s and with inference metrics <= 2.5 s, each under 200 MB peak RSS; 10^6
points streamed to CSV under 200 MB peak RSS. `--workers N` sets TCALC_SWEEP_WORKERS (1: one
process, as before issue 12); `--points N` runs only the cases of N points.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

from _common import machine, tcalc_command

# (label, points, target seconds or None, command)
CASES = [
    ("training metrics (peak_bytes, fits, model_flops), CSV", 10_000, 2.0,
     "sweep --preset llama-2-7b --B 1..1000:1 --T 1,2,4,8,16 --P 1,2 --gpu a100-80gb --format csv"),
    ("training, two models x 5000, with train_days, JSON", 10_000, 2.0,
     "sweep --preset llama-2-7b,gpt3 --B 1..500:1 --T 1,2,4,8,16 --P 1,2 --gpu a100-80gb "
     "--metrics peak_bytes,fits,model_flops,train_days --tokens 1e12 --format json"),
    ("inference metrics (kv_cache_bytes, decode), CSV", 10_000, 2.0,
     "sweep --preset llama-2-7b --B 1..1000:1 --S 1024,4096 --T 1,2,4,8,16 --gpu a100-80gb "
     "--metrics kv_cache_bytes,time_per_output_token_s,decode_tokens_per_s,decode_bound --format csv"),
    ("table view (the first 200 rows rendered)", 10_000, 2.0,
     "sweep --preset llama-2-7b --B 1..1000:1 --T 1,2,4,8,16 --P 1,2 --gpu a100-80gb"),
    ("training metrics, CSV", 100_000, 1.0,
     "sweep --preset llama-2-7b --B 1..10000:1 --T 1,2,4,8,16 --P 1,2 --gpu a100-80gb --format csv"),
    ("inference metrics, CSV", 100_000, 2.5,
     "sweep --preset llama-2-7b --B 1..10000:1 --S 1024,4096 --T 1,2,4,8,16 --gpu a100-80gb "
     "--metrics kv_cache_bytes,time_per_output_token_s,decode_tokens_per_s,decode_bound --format csv"),
]
STREAMED = ("streamed training sweep, CSV", 1_000_000,
            "sweep --preset llama-2-7b --B 1..100000:1 --T 1,2,4,8,16 --P 1,2 --format csv")
RSS_TARGET_MB = 200


def _tree_rss_kb(root: int) -> int:
    """Resident memory of a process and all its descendants now (Linux /proc), in KiB."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
            with open(f"/proc/{entry}/status") as fh:
                vm = next((line for line in fh if line.startswith("VmRSS:")), None)
        except OSError:
            continue
        pid = int(entry)
        parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
        rss[pid] = int(vm.split()[1]) if vm else 0
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in tree:
                tree.add(child)
                frontier.append(child)
    return sum(rss.get(pid, 0) for pid in tree)


def run_measured(argv: list[str], env: dict[str, str]) -> tuple[float, int, float]:
    """(wall seconds, peak RSS of the process tree in KiB sampled every 20 ms, CPU seconds of the
    tree: user + system, workers included). The CPU time is what a busy machine does not inflate."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss_kb(proc.pid))
        time.sleep(0.02)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}")
    return wall, peak, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="skip the 10^6-point run")
    parser.add_argument("--workers", type=int, default=None, help="TCALC_SWEEP_WORKERS for every run")
    parser.add_argument("--points", type=int, default=None, help="only the cases of this many points")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.workers is not None:
        env["TCALC_SWEEP_WORKERS"] = str(args.workers)
    tcalc = tcalc_command()
    print(f"machine: {machine()}; workers: {env.get('TCALC_SWEEP_WORKERS', 'default')}")
    for label, points, target, case in CASES:
        if args.points is not None and points != args.points:
            continue
        argv = tcalc + case.split()
        run_measured(argv, env)  # warm-up
        samples = [run_measured(argv, env) for _ in range(args.repeats)]
        walls = [s[0] for s in samples]
        median = statistics.median(walls)
        peak_mb = max(s[1] for s in samples) / 1024
        verdict = ("ok" if median <= target else "SLOW") + ("" if peak_mb < RSS_TARGET_MB else ", RSS OVER")
        cpu = statistics.median(s[2] for s in samples)
        print(f"{label:<56} {points:>9,} points  median {median:6.2f} s  min {min(walls):6.2f} s  "
              f"{points / median:9,.0f} points/s  CPU {cpu:6.2f} s  peak RSS {peak_mb:4.0f} MB  "
              f"{verdict} (<= {target} s, < {RSS_TARGET_MB} MB)")
    if not args.quick and args.points is None:
        label, points, case = STREAMED
        wall, peak, cpu = run_measured(tcalc + case.split(), env)
        verdict = "ok" if peak / 1024 <= RSS_TARGET_MB else "OVER"
        print(f"{label:<56} {points:>9,} points  {wall:6.1f} s  CPU {cpu:6.1f} s  peak RSS {peak / 1024:5.0f} MB (all processes)  "
              f"{verdict} (< {RSS_TARGET_MB} MB)")


if __name__ == "__main__":
    main()
