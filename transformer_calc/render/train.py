"""`tcalc train` and `tcalc plan` as tables."""

from __future__ import annotations
import json
from enum import Enum
from typing import Any
from transformer_calc.render.common import fmt_bytes, styled_table


def train_table(report: dict[str, Any]) -> Any:
    """`tcalc train`: the step-time breakdown, throughput, MFU, memory, budget."""
    from rich.console import Group
    from rich.text import Text

    lay, batch = report["layout"], report["batch"]
    step = report["step_time_s"]
    t = styled_table(
        f"Training step: {report['model'].get('name') or 'custom model'} on {lay['gpus']} x {report['gpu']}",
        "term", "seconds", "share",
    )
    for key, value in report["breakdown"].items():
        if value:
            t.add_row(key.removesuffix("_s").replace("_", " "), f"{value:.4g}", f"{100 * value / step:.1f} %")
    t.add_section()
    t.add_row("step time", f"{step:.4g}", "", style="bold")
    mem = report["memory"]
    lines = [
        f"T={lay['tensor']}{' +SP' if lay['sequence_parallel'] else ''} P={lay['pipeline']} v={lay['virtual_stages']} "
        f"CP={lay['context']} EP={lay['expert']} dp={lay['data']} ZeRO-{lay['zero']}; S={batch['seq_len']}, global batch "
        f"{batch['global_batch']} sequences ({batch['global_batch_tokens']:,} tokens), micro-batch {batch['micro_batch']}"
        + (" (the fastest that fits)" if batch["micro_batch_chosen"] else "") + f", {batch['micro_batches']} micro-batches per replica",
        f"MFU {100 * report['mfu']:.1f} %, HFU {100 * report['hfu']:.1f} %, {report['tflops_per_gpu']:.0f} TFLOP/s per GPU (model), "
        f"{report['tokens_per_s']:,.0f} tokens/s ({report['tokens_per_s_per_gpu']:,.0f} per GPU)",
        f"peak memory {fmt_bytes(mem['peak_bytes'])} ({mem['peak_phase']}) of {fmt_bytes(mem['usable_bytes'])} usable: "
        + ("fits" if mem["fits"] else "does NOT fit"),
        "assumptions: " + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in report["assumptions"].items()),
    ]
    if "budget" in report:
        b = report["budget"]
        lines.append(f"{b['tokens']:,} tokens: {b['days']:.1f} days, {b['gpu_hours']:,.0f} GPU-hours"
                     + (f", cost {b['cost']:,.0f}" if "cost" in b else ""))
    return Group(t, Text("\n".join(lines)))


def plan_table(report: dict[str, Any]) -> Any:
    """`tcalc plan`: the fastest layouts that fit, and the rejected counted by reason."""
    from rich.console import Group
    from rich.text import Text

    t = styled_table(
        f"Layouts for {report['model'].get('name') or 'custom model'} on {report['gpus']} x {report['gpu']}, "
        f"S={report['seq_len']}, global batch {report['global_batch']}",
        "T", "P", "v", "CP", "EP", "dp", "b", "recompute", "step s", "MFU", "peak",
    )
    for r in report["plans"]:
        lay = r["layout"]
        t.add_row(str(lay["tensor"]), str(lay["pipeline"]), str(lay["virtual_stages"]), str(lay["context"]),
                  str(lay["expert"]), str(lay["data"]), str(r["micro_batch"]), r["recompute"],
                  f"{r['step_time_s']:.3g}", f"{100 * r['mfu']:.1f} %", fmt_bytes(r["peak_bytes"]))
    lines = [f"{report['feasible']} of {report['evaluated']} layouts fit"]
    lines += [f"  rejected {n}: {why}" for why, n in sorted(report["rejected"].items(), key=lambda kv: -kv[1])]
    if report["best_command"]:
        lines.append("best: " + report["best_command"])
    return Group(t, Text("\n".join(lines)))
