"""`tcalc calibrate` on 100 runs (issue 37: under 2 s): wall time of the whole command, start-up
included, and of the fit alone in process.

    python bench/calibrate.py [--repeats 5] [--runs 100]

The runs are tools/validation/train_runs.yaml's published runs measured in step time or tokens/s
(the first N, repeated when there are fewer), written to a temporary runs file: 100 layouts priced
once each, then the constants fitted on all of them and once per run left out.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from _common import machine, tcalc_command, time_command

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
LAYOUT_KEYS = ("model", "model_overrides", "gpu", "gpus", "seq_len", "global_batch", "micro_batch", "tensor", "pipeline",
               "virtual_stages", "context", "expert", "expert_tensor", "sequence_parallel", "recompute", "flash", "zero",
               "precision", "fp8_recipe", "framework", "compile", "grad_bytes", "overlap_grad_reduce", "tp_comm_overlap",
               "moe_a2a_overlap", "first_stage_layers", "last_stage_layers", "embedding_in_split", "loss_in_split",
               "cp_comm_type")
TARGET_S = 2.0


def runs_file(n: int, directory: Path) -> Path:
    import yaml

    data = yaml.safe_load((REPO / "tools" / "validation" / "train_runs.yaml").read_text(encoding="utf-8"))
    rows = [r for r in data["rows"] if r["compare"] in ("step_time_s", "tokens_per_s_per_gpu")]
    runs = []
    for i in range(n):
        r = rows[i % len(rows)]
        run = {k: r[k] for k in LAYOUT_KEYS if k in r}
        run.setdefault("framework", "pytorch")
        run["id"] = f"{r['id']}#{i // len(rows)}"
        run[r["compare"]] = r["measured"][r["compare"]]
        runs.append(run)
    path = directory / "runs.yaml"
    path.write_text(yaml.safe_dump({"runs": runs}, sort_keys=False), encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = runs_file(args.runs, Path(tmp))
        from transformer_calc.results.calibrate import run_calibrate
        from transformer_calc.requests.calibrate import CalibrateRequest

        start = time.perf_counter()
        result = run_calibrate(CalibrateRequest.from_keywords({"files": [str(path)]}))
        inside = time.perf_counter() - start
        median, best = time_command(tcalc_command() + ["calibrate", str(path), "--format", "json"], args.repeats)
    print(f"machine: {machine()}")
    print(f"{args.runs} runs, {len(result.constants)} constants ({', '.join(c.name for c in result.constants)})")
    print(f"in process (pricing, fit, {args.runs} leave-one-out fits): {inside:.2f} s")
    verdict = "ok" if median <= TARGET_S else "SLOW"
    print(f"tcalc calibrate (whole command): median {median:.2f} s, min {best:.2f} s  {verdict} (<= {TARGET_S:.0f} s)")


if __name__ == "__main__":
    main()
