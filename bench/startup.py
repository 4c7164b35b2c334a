"""Start-up benchmark: median wall time of whole `tcalc` invocations (issue: <= 150 ms for JSON,
<= 200 ms for a table, on the 2-core CI machine).

    python bench/startup.py [--repeats 21]

Run it with the interpreter of the environment tcalc is installed in (a wheel install, as
`pip install .`, is what users get; an editable install adds an import hook per module).
"""

from __future__ import annotations

import argparse

from _common import machine, tcalc_command, time_command

CASES = [
    ("memory --preset gpt3 --format json", 0.150),
    ("memory --preset gpt3", 0.200),
    # informational: no target in the issue
    ("memory --preset gpt3 --T 8 --sp --recompute selective --gpu a100-80gb --format json", None),
    ("params --preset llama-2-7b --format json", None),
    ("flops --preset gpt3 --format json", None),
    ("inference --preset falcon-40b --T 4 --format json", None),
    ("--version", None),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    tcalc = tcalc_command()
    print(f"machine: {machine()}")
    print(f"command: {' '.join(tcalc)}")
    print(f"{'tcalc ...':<86} {'median':>8} {'min':>8}  target")
    for case, target in CASES:
        median, best = time_command(tcalc + case.split(), args.repeats)
        verdict = "" if target is None else ("ok" if median <= target else "SLOW") + f" (<= {1e3 * target:.0f} ms)"
        print(f"{case:<86} {1e3 * median:7.1f}ms {1e3 * best:7.1f}ms  {verdict}")


if __name__ == "__main__":
    main()
