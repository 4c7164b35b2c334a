"""Start-up benchmark: wall time of whole `tcalc` invocations, against the stack's import floor.

    python bench/startup.py [--repeats 21] [--quick] [--baseline PATH/TO/OTHER/tcalc]

The headline (issue 39): `tcalc memory --preset gpt3 -f json` takes at most 1.25x the import floor
(`python -c "import typer, typer._adapters, pydantic"`, what any typer CLI on pydantic pays before
its own code runs) and at most 0.35x llm-analysis (`python -m llm_analysis.analysis train` on the
same GPT-3 job as compare_llm_analysis.py, when it is installed: in this interpreter's environment or
in bench/.venv-llm-analysis, which compare_llm_analysis.py creates). The three are run in turn, round after round, so that a busy
machine slows them alike and the ratios hold even when the times do not; `--baseline` adds another
install's tcalc (the code before a change) to the rounds. Each is reported by wall time and by CPU
time (user + system: what other work on the machine inflates least). Then the other commands,
median and min each (`--quick` skips them).

Run it with the interpreter of the environment tcalc is installed in (a wheel install, as
`pip install .`, is what users get; an editable install adds an import hook per module).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import machine, tcalc_command, time_command

FLOOR = "import typer, typer._adapters, pydantic"
HEADLINE = "memory --preset gpt3 --format json"
FLOOR_RATIO_TARGET = 1.25
LLM_ANALYSIS_RATIO_TARGET = 0.35
# llm-analysis's run of the same job (bench/compare_llm_analysis.py's flags)
LLM_ANALYSIS_ARGS = [
    "train", "--model_name=megatron-lm-175b", "--gpu_name=a100-sxm-80gb", "--dtype_name=w16a16e16",
    "--seq_len=2048", "--batch_size_per_gpu=1", "--tp_size=8", "--pp_size=8", "--total_num_gpus=64",
    "--flash_attn=False", "--softmax_dropout=True", "--activation_recomputation=0", "--log_level=ERROR",
]

CASES = [
    "memory --preset gpt3",
    "memory --preset gpt3 --T 8 --sp --recompute selective --gpu a100-80gb --format json",
    "params --preset llama-2-7b --format json",
    "flops --preset gpt3 --format json",
    "inference --preset falcon-40b --T 4 --format json",
    "--version",
]


def llm_analysis_command() -> list[str] | None:
    """llm-analysis 0.2.2 (`python -m llm_analysis.analysis`: it installs no script) in this
    interpreter's environment, else in bench/.venv-llm-analysis; None where neither has it."""
    here = Path(__file__).resolve().parent
    for python in (Path(sys.executable), here / ".venv-llm-analysis" / "bin" / "python"):
        if not python.exists():
            continue
        probe = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('llm_analysis') is not None)"],
                               capture_output=True, text=True)
        if probe.stdout.strip() == "True":
            return [str(python), "-m", "llm_analysis.analysis"]
    return None


def _once(argv: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run, output discarded; CPU is user + system of the process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def side_by_side(commands: dict[str, list[str]], repeats: int) -> dict[str, list[tuple[float, float]]]:
    """Each command once per round, `repeats` rounds after a warm-up round: (wall, CPU) seconds."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for argv in commands.values():
        _once(argv)
    for _ in range(repeats):
        for name, argv in commands.items():
            samples[name].append(_once(argv))
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--quick", action="store_true", help="the headline only")
    parser.add_argument("--baseline", help="another install's tcalc executable, run in the same rounds")
    args = parser.parse_args()
    tcalc = tcalc_command()
    print(f"machine: {machine()}")
    print(f"command: {' '.join(tcalc)}")
    commands = {"floor": [sys.executable, "-c", FLOOR], "tcalc": tcalc + HEADLINE.split()}
    if args.baseline:
        commands["baseline"] = [args.baseline, *HEADLINE.split()]
    llm = llm_analysis_command()
    if llm is not None:
        commands["llm-analysis"] = llm + LLM_ANALYSIS_ARGS
    samples = side_by_side(commands, args.repeats)
    _report(samples, args.repeats, args.baseline, llm is not None)
    if args.quick:
        return
    print(f"\n{'tcalc ...':<86} {'median':>8} {'min':>8}")
    for case in CASES:
        med, best = time_command(tcalc + case.split(), args.repeats)
        print(f"{case:<86} {1e3 * med:7.1f}ms {1e3 * best:7.1f}ms")


def _report(samples: dict[str, list[tuple[float, float]]], repeats: int, baseline: str | None, llm: bool) -> None:
    """Median and min wall time, median CPU time of each command; the ratios by wall and by CPU."""
    labels = {"floor": f'python -c "{FLOOR}"', "tcalc": f"tcalc {HEADLINE}", "baseline": f"baseline: {baseline}",
              "llm-analysis": "llm-analysis 0.2.2 train (the same GPT-3 job)"}
    wall = {name: statistics.median(w for w, _ in s) for name, s in samples.items()}
    cpu = {name: statistics.median(c for _, c in s) for name, s in samples.items()}
    print(f"\nside by side, {repeats} rounds (wall median / min, CPU median):")
    for name, s in samples.items():
        print(f"  {labels[name][:60]:<60} {1e3 * wall[name]:7.1f} ms {1e3 * min(w for w, _ in s):7.1f} ms "
              f"{1e3 * cpu[name]:7.1f} ms CPU")
    for other, target in (("floor", FLOOR_RATIO_TARGET), ("llm-analysis", LLM_ANALYSIS_RATIO_TARGET),
                          ("baseline", None)):
        if other not in samples:
            continue
        ratio, cpu_ratio = wall["tcalc"] / wall[other], cpu["tcalc"] / cpu[other]
        verdict = "" if target is None else ("  ok" if ratio <= target else "  SLOW") + f" (<= {target}x)"
        print(f"  tcalc / {other}: {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU{verdict}")
    if not llm:
        print("  llm-analysis: not installed (neither in this environment nor in bench/.venv-llm-analysis, "
              "which `python bench/compare_llm_analysis.py` creates); no ratio")


if __name__ == "__main__":
    main()
