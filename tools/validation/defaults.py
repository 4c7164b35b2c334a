"""What a user gets from tcalc's defaults on the published training runs (issue 34).

Each row of train_runs.yaml is priced as a person would type it: `tc.train` with the layout the
source states (GPUs, GPU, S, global batch, micro-batch, T, P, v, CP, EP, etp, the uneven split),
the recomputation, the precision recipe and the stack (`--framework`, the row's time profile), and
NOTHING else: the attention kernel, sequence parallelism and ZeRO are left to the framework's
defaults (requests/defaults.py). It reports how many runs (each
of which ran) tcalc calls "does not fit", and the median step-time error of those it prices,
against the measured throughput (the same comparison as train_runs.py).

The previous release's `tcalc train` defaults differ from today's in two settings that shape these
rows (sequence parallelism was off unless --sp, and ZeRO-1 whatever the framework, where torchtitan
now defaults to its FSDP2, ZeRO-3; flash attention was already train's default), so `--before`
prices the same rows with those two given (PREVIOUS):

    PYTHONPATH=. python tools/validation/defaults.py [--before]

No network access.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import train_runs  # noqa: E402  (the rows and the measured step times)

import transformer_calc as tc  # noqa: E402

PREVIOUS = {"sp": False, "zero": 1}  # the previous release's `tcalc train` defaults where they differ

LAYOUT_KEYS = {"tensor": "T", "pipeline": "P", "virtual_stages": "virtual_stages", "context": "cp", "expert": "ep",
               "expert_tensor": "etp", "first_stage_layers": "first_stage_layers",
               "last_stage_layers": "last_stage_layers", "embedding_in_split": "embedding_in_split",
               "loss_in_split": "loss_in_split", "cp_comm_type": "cp_comm_type"}


def typed(row: dict[str, Any]) -> dict[str, Any]:
    """The options a person gives for this run: its layout, batch, recomputation and precision."""
    options: dict[str, Any] = {"gpus": row["gpus"], "gpu": row["gpu"], "S": row["seq_len"],
                               "global_batch": row["global_batch"], "micro_batch": row["micro_batch"],
                               "recompute": row["recompute"], "framework": row.get("framework", "pytorch")}
    options.update({flag: row[key] for key, flag in LAYOUT_KEYS.items() if key in row})
    if options.get("virtual_stages") == 1:
        options.pop("virtual_stages")
    if row["precision"] == "fp8":
        options["fp8_recipe"] = row.get("fp8_recipe", "delayed")
    elif row["precision"] in ("bf16", "fp32"):
        options["precision"] = row["precision"]
    return options


def model_of(row: dict[str, Any]) -> Any:
    spec = row["model"]
    if isinstance(spec, str) and not row.get("model_overrides"):
        return spec
    return train_runs.row_model(row)


def main() -> int:
    before = "--before" in sys.argv[1:]
    rows = train_runs.load_rows()
    misfits, errors, refused = [], [], []
    for row in rows:
        try:
            r = tc.train(model_of(row), **typed(row), **(PREVIOUS if before else {}))
        except Exception as exc:  # noqa: BLE001  (an option an older checkout does not take)
            refused.append((row["id"], str(exc).splitlines()[0][:100]))
            continue
        measured = train_runs.evaluate(row).measured_step_s
        fits = getattr(r, "fits", r.memory.fits)
        if not fits:
            misfits.append(row["id"])
        if r.step_time_s is not None:
            errors.append(abs(measured / r.step_time_s - 1))
    priced = len(rows) - len(refused)
    print(f"{len(rows)} published runs priced with tcalc's {'previous ' if before else ''}defaults "
          "(layout, batch, recompute, precision and framework given):")
    print(f"  called 'does not fit': {len(misfits)} of {priced}")
    print(f"  step time given: {len(errors)}; median |error| {100 * statistics.median(errors):.1f} %, "
          f"within ±25 %: {sum(e <= 0.25 for e in errors)}")
    for rid, why in refused:
        print(f"  refused: {rid}: {why}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
