"""`tcalc train` and `tcalc plan` as tables."""

from __future__ import annotations
from typing import Any
from transformer_calc.render.common import fmt_bytes, styled_table, with_assumed


def train_table(r: Any) -> Any:
    """`tcalc train`: the step-time breakdown, throughput, MFU, memory, budget (a TrainResult)."""
    from rich.text import Text

    lay, batch = r.layout, r.batch
    mem = r.memory
    given = r.assumptions.model_fields_set  # the offload assumptions with --offload only
    layout = (
        f"T={lay.tensor}{' +SP' if lay.sequence_parallel else ''} P={lay.pipeline}{split_text(lay)} v={lay.virtual_stages} "
        + (f"({lay.pipeline_schedule}) " if lay.pipeline > 1 else "") + f"CP={lay.context} EP={lay.expert} dp={lay.data} ZeRO-{lay.zero}; S={batch.seq_len}, global batch "
        f"{batch.global_batch} sequences ({batch.global_batch_tokens:,} tokens), micro-batch {batch.micro_batch}"
        + ((" (the fastest that fits)" if r.fits else " (none of those tried fits)") if batch.micro_batch_chosen else "")
        + f", {batch.micro_batches} micro-batches per replica")
    memory = (f"peak memory {fmt_bytes(mem.peak_bytes)} ({mem.peak_phase}) of {fmt_bytes(mem.usable_bytes)} usable: "
              + ("fits" if mem.fits else "does NOT fit"))
    if not r.fits:  # no step time for a layout that cannot run: what would make it fit instead
        lines = [f"Training step: {r.model.name or 'custom model'} on {lay.gpus} x {r.gpu}: does NOT fit, no step time",
                 layout, memory, "would fit with any one of:"] + [f"  {n}" for n in r.needs]
        return with_assumed(r, Text("\n".join(lines)))
    step = r.step_time_s
    cal = getattr(r, "calibration", None)
    t = styled_table(
        f"Training step: {r.model.name or 'custom model'} on {lay.gpus} x {r.gpu}" + (", calibrated" if cal else ""),
        "term", "seconds", "share",
    )
    for key, value in r.breakdown:  # (field, seconds) in the JSON's order
        if value:
            t.add_row(key.removesuffix("_s").replace("_", " "), f"{value:.4g}", f"{100 * value / step:.1f} %")
    if cal is not None and cal.step_overhead_s:
        t.add_row("step overhead (calibrated)", f"{cal.step_overhead_s:.4g}", f"{100 * cal.step_overhead_s / step:.1f} %")
    t.add_section()
    ve = getattr(r, "validation_error", None)
    spread = (f"±{100 * cal.median_abs_error_left_out:.0f} %" if cal else
              f"±{100 * ve.median_abs_error:.0f} %" if ve is not None else "")
    t.add_row("step time", f"{step:.4g}", spread, style="bold")
    lines = [
        layout,
        f"MFU {100 * r.mfu:.1f} %, HFU {100 * r.hfu:.1f} %, {r.tflops_per_gpu:.0f} TFLOP/s per GPU (model), "
        f"{r.tokens_per_s:,.0f} tokens/s ({r.tokens_per_s_per_gpu:,.0f} per GPU)",
        memory,
        "assumptions: " + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                                    for k, v in r.assumptions if k in given and k != "defaults"),
    ]
    b = r.budget
    if b is not None:
        lines.append(f"{b.tokens:,} tokens: {b.days:.1f} days, {b.gpu_hours:,.0f} GPU-hours"
                     + (f", cost ${b.cost:,.0f}" if b.cost is not None else ""))
        lines.extend(cost_lines(b))
    if cal is not None:
        from transformer_calc.render.calibrate import calibration_line

        lines.append(calibration_line(cal))
    elif ve is not None:
        lines.append(f"uncertainty ±{100 * ve.median_abs_error:.0f} %: the median |error| of the {ve.framework} profile on "
                     f"{ve.runs} published {ve.generation} {ve.kind} runs ({100 * ve.within_25pct:.0f} % within ±25 %; "
                     "docs/validation.md); calibrate on your own runs with tcalc calibrate")
    if getattr(r, "towers", None) is not None:  # a multimodal model: what this result does with its towers
        lines.append(f"towers: {r.towers.note}")
    return with_assumed(r, t, Text("\n".join(lines)))


def cost_lines(b: Any) -> list[str]:
    """The budget's price, energy and goodput, one line each (results/run_cost.py)."""
    out = []
    if b.price is not None:
        where = f"{b.price.provider}, {b.price.date}" if b.price.provider else b.price.source
        out.append(f"price ${b.price.usd_per_gpu_hour:,.2f}/GPU-hour ({b.price.kind}: {where}): ${b.cost_per_day:,.0f} "
                   f"per day, ${b.cost_per_billion_tokens:,.2f} per billion tokens")
    else:
        out.append("no price for this GPU in presets/prices.yaml: give --price-per-gpu-hour")
    if b.energy is not None:
        e = b.energy
        out.append(f"energy {e.kwh / 1000:,.1f} MWh ({e.power_w_per_gpu:.0f} W per GPU at {e.active_share:.0%} active of "
                   f"{e.board_power_w:.0f} W, node x{e.node_overhead:g}, PUE {e.pue:g}), {e.co2_tonnes:,.1f} t CO2eq at "
                   f"{e.grid_intensity_g_per_kwh:g} g/kWh")
    g = b.goodput
    if g is not None:
        count = f"{g.interruptions:.1f}" if g.interruptions < 10 else f"{g.interruptions:,.0f}"  # an expected count
        out.append(f"with failures: {count} interruptions expected (one per {g.mtti_s / 3600:.1f} h), checkpoint "
                   f"{fmt_bytes(g.checkpoint_bytes)} every {g.interval_s / 60:.0f} min ({g.checkpoint_mode}, "
                   f"{g.save_s:.1f} s each), goodput {g.goodput:.1%}: {g.days:.1f} days, {g.gpu_hours:,.0f} GPU-hours"
                   + (f", ${g.cost:,.0f}" if g.cost is not None else ""))
    return out


def split_text(lay: Any) -> str:
    """An uneven pipeline split in a few characters: ' (first 4, last 1)', ' (+emb +loss)'."""
    parts = [f"first {lay.first_stage_layers}" if lay.first_stage_layers is not None else "",
             f"last {lay.last_stage_layers}" if lay.last_stage_layers is not None else "",
             "+emb" if lay.embedding_in_split else "", "+loss" if lay.loss_in_split else ""]
    text = ", ".join(x for x in parts[:2] if x) or " ".join(x for x in parts[2:] if x)
    return f" ({text})" if text else ""


def plan_table(r: Any) -> Any:
    """`tcalc plan`: the fastest layouts that fit, and the rejected counted by reason (a PlanResult)."""
    from rich.text import Text

    t = styled_table(
        f"Layouts for {r.model.name or 'custom model'} on {r.gpus} x {r.gpu}, "
        f"S={r.seq_len}, global batch {r.global_batch}",
        "T", "P", "v", "CP", "EP", "dp", "b", "recompute", "step s", "MFU", "peak",
    )
    for row in r.plans:
        lay = row.layout
        t.add_row(str(lay.tensor), str(lay.pipeline) + split_text(lay), str(lay.virtual_stages), str(lay.context),
                  str(lay.expert), str(lay.data), str(row.micro_batch), row.recompute,
                  f"{row.step_time_s:.3g}", f"{100 * row.mfu:.1f} %", fmt_bytes(row.peak_bytes))
    lines = [f"{r.feasible} of {r.evaluated} layouts fit"]
    lines += [f"  rejected {n}: {why}" for why, n in sorted(r.rejected.items(), key=lambda kv: -kv[1])]
    if r.best_command:
        lines.append("best: " + r.best_command)
    if getattr(r, "calibration", None) is not None:
        from transformer_calc.render.calibrate import calibration_line

        lines.append(calibration_line(r.calibration) + "; the plans are ranked by the calibrated step")
    return with_assumed(r, t, Text("\n".join(lines)))
