"""`tcalc serve` as a table of layouts."""

from __future__ import annotations

from typing import Any

from transformer_calc.render.common import with_assumed, fmt_s, styled_table


def layout_words(tensor: int, replicas: int) -> str:
    """A layout in words: "T=4 × 2 replicas", "T=8, one replica" (not "T=1 × 1 replicas")."""
    return f"T={tensor} × {replicas} replicas" if replicas != 1 else f"T={tensor}, one replica"


def serve_table(r: Any) -> Any:
    """Layouts, best first: throughput, TTFT and TPOT at their concurrency; rejections with reasons
    (a ServeResult)."""
    from rich.text import Text

    sv, best = r.serve, r.best
    tg = sv.targets
    title = (f"Serve: {r.model.name or 'custom model'} on {sv.gpus} × {sv.gpu}, "
             f"prompt {sv.prompt_len:,} + output {sv.output_len:,} tokens")
    t = styled_table(title, "T", "replicas", "B", "TTFT", "TPOT", "tok/s", "tok/s/GPU", "verdict")
    # a feasible layout's verdict: "meets targets" only when there are targets to meet
    verdict = ("meets targets" if tg.ttft_s is not None or tg.tpot_s is not None
               else "meets the load" if sv.request_rate else "fits")  # no targets: "targets: none" below
    # a rejected layout's cell is the reason's first clause; the whole reason is a line under the table
    # (issue 38: a reason in a column wrapped one or two words a line at 80 columns)
    rejected: list[str] = []
    t.columns[-1].no_wrap = False  # "meets targets" may wrap when the numbers fill 80 columns

    def short(row: Any) -> str:
        if not row.reason:
            return ""
        rejected.append(f"{layout_words(row.tensor, row.replicas)}: {row.reason}")
        return f"{'no fit' if row.reason.startswith('does not fit') else 'rejected'} [{len(rejected)}]"

    for row in r.layouts:
        if row.concurrency is None:
            t.add_row(str(row.tensor), str(row.replicas), "—", "—", "—", "—", "—", short(row), style="dim")
            continue
        t.add_row(str(row.tensor), str(row.replicas), str(row.concurrency), fmt_s(row.ttft_s),
                  fmt_s(row.tpot_s), f"{row.tokens_per_s:,.0f}", f"{row.tokens_per_s_per_gpu:,.0f}",
                  verdict if row.feasible else short(row),
                  style=None if row.feasible else "dim")
    targets = ", ".join(f"{k} ≤ {v:g} s" for k, v in (("TTFT", tg.ttft_s), ("TPOT", tg.tpot_s)) if v is not None)
    lines = [
        *(f"[{i}] {reason}" for i, reason in enumerate(rejected, 1)),
        f"targets: {targets or 'none'}" + (f"; load {sv.request_rate:g} requests/s" if sv.request_rate else ""),
        f"engine: {sv.engine.engine} (max {sv.engine.max_num_batched_tokens:,} tokens and "
        f"{'no cap on' if sv.engine.max_num_seqs is None else f'{sv.engine.max_num_seqs:,}'} sequences per step, "
        f"block {sv.engine.block_size}, chunked prefill {'on' if sv.engine.chunked_prefill else 'off'}); "
        f"capacity: the paged KV cache",
        f"model: {sv.batching}",
        f"KV cache: {sv.kv_dtype}" + ("" if getattr(sv, "kv_dtype_source", None) in (None, "given")
                                      else f" (assumed: {sv.kv_dtype_source})"),
        "best: " + (f"{layout_words(best.tensor, best.replicas)}, "
                    f"B={best.concurrency}, {best.tokens_per_s:,.0f} output tokens/s"
                    if best else "no layout meets the targets"),
    ]
    lines += _cost_lines(getattr(r, "cost", None)) + _disaggregated_lines(getattr(r, "disaggregated", None))
    if getattr(r, "calibration", None) is not None:
        from transformer_calc.render.calibrate import calibration_line

        lines.append(calibration_line(r.calibration))
    cv = getattr(r, "curve", None)
    if cv is None:
        return with_assumed(r, t, Text("\n".join(lines)))
    return with_assumed(r, t, Text("\n".join(lines)), _curve_table(cv))


def _cost_lines(co: Any) -> list[str]:
    """The serving cost per hour and per million tokens, and the energy (when priced)."""
    if co is None:
        return []
    if co.price is None:
        lines = ["no price for this GPU in presets/prices.yaml: give --price-per-gpu-hour for $ per token"]
    else:
        lines = [
            f"cost ${co.cost_per_hour:,.2f}/hour at ${co.price.usd_per_gpu_hour:,.2f}/GPU-hour ({co.price.kind}: "
            f"{co.price.provider or co.price.source}, {co.price.date or 'given'}): ${co.cost_per_million_input_tokens:,.3f} "
            f"per million input tokens, ${co.cost_per_million_output_tokens:,.3f} per million output tokens"
            + (f"; {co.request_rate:g} requests/s need {co.gpus_for_request_rate} GPUs, "
               f"${co.cost_per_hour_for_request_rate:,.2f}/hour" if co.gpus_for_request_rate is not None else "")]
    if co.energy is not None:
        lines.append(f"energy {co.energy.kwh:,.2f} kWh per hour ({co.energy.kwh_per_million_tokens:,.3f} kWh per million "
                     f"output tokens), {co.energy.co2_tonnes * 1000:,.2f} kg CO2eq per hour at "
                     f"{co.energy.grid_intensity_g_per_kwh:g} g/kWh")
    return lines


def _disaggregated_lines(dg: Any) -> list[str]:
    """The prefill and decode pools of --disaggregate, in one line."""
    if dg is None:
        return []
    return [
        f"disaggregated {dg.prefill_instances}P{dg.decode_instances}D (T={dg.tensor}, {dg.gpus} GPUs): "
        f"prefill {dg.prefill_batch} prompt(s) per {fmt_s(dg.prefill_step_s)} step, "
        f"{dg.prefill_requests_per_s:.3g} requests/s per instance; KV {dg.kv_bytes_per_request / 2**20:,.0f} MiB "
        f"per request over {dg.link} in {fmt_s(dg.kv_transfer_s)}; decode B={dg.decode_concurrency} at TPOT "
        f"{fmt_s(dg.tpot_s)}, {dg.decode_requests_per_s:.3g} requests/s per instance; deployment "
        f"{dg.requests_per_s:.3g} requests/s, {dg.tokens_per_s:,.0f} output tokens/s "
        f"({dg.tokens_per_s_per_gpu:,.0f}/GPU), TTFT {fmt_s(dg.ttft_s)}; bound by {dg.bottleneck}; balanced at "
        f"{dg.balanced_decode_per_prefill:.3g} decode per prefill instance"]


def _curve_table(cv: Any) -> Any:
    """The latency-throughput curve of one layout: TTFT, TPOT and throughput by concurrency."""
    c = styled_table(f"Latency-throughput curve: {layout_words(cv.tensor, cv.replicas)}",
                     "B", "TTFT", "TPOT", "tok/s", "tok/s/GPU", "tok/s/user", "note")
    for p in cv.points:
        if p.ttft_s is None:
            c.add_row(str(p.concurrency), "—", "—", "—", "—", "—",
                      p.reason or "", style="dim")
            continue
        c.add_row(str(p.concurrency), fmt_s(p.ttft_s), fmt_s(p.tpot_s), f"{p.tokens_per_s:,.0f}",
                  f"{p.tokens_per_s_per_gpu:,.0f}", f"{1 / p.tpot_s:,.1f}", "")
    return c
