"""Charts as inline SVG, drawn on the server from a command's typed result (no JavaScript, no
library): the memory timeline and breakdown, the roofline, the serving layouts' latency against
throughput, serve's latency-throughput curve (--concurrency) and disaggregated pools, a sweep's
metric, the step-time breakdown and the ranked layouts. Each function reads the result's
fields and returns SVG text; every number it draws is one the result holds (the tables beside
the charts show them exactly)."""

from __future__ import annotations

import math
from html import escape
from typing import Any

from transformer_calc.render.common import fmt_bytes, fmt_rate, fmt_s
from transformer_calc.render.serve import layout_words

WIDTH = 720
COLORS = {  # one colour per memory component / time part, the same on every page
    "weights": "#4e79a7", "gradients": "#f28e2b", "optimizer": "#e15759", "activations": "#76b7b2",
    "transient": "#59a14f", "gathered": "#edc948", "buckets": "#b07aa1",
    "compute": "#4e79a7", "memory_bound": "#76b7b2", "tp_comm": "#f28e2b", "pp_bubble": "#e15759",
    "pp_comm": "#ff9da7", "dp_comm_exposed": "#edc948", "optimizer_s": "#b07aa1", "moe_all_to_all": "#9c755f",
    "cp_comm": "#bab0ac", "offload_pcie": "#59a14f",
}
MEMORY_PARTS = ("weights", "gradients", "optimizer", "activations", "transient", "gathered", "buckets")


def _svg(height: int, body: list[str], title: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(title)}" viewBox="0 0 {WIDTH} {height}" '
            f'width="{WIDTH}" height="{height}" class="chart"><title>{escape(title)}</title>' + "".join(body) + "</svg>")


def _text(x: float, y: float, text: str, anchor: str = "start", size: int = 12, extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" {extra}>{escape(text)}</text>'


def _legend(names: list[str], y: float, colors: dict[str, str]) -> list[str]:
    out, x = [], 10.0
    for name in names:
        out.append(f'<rect x="{x:.1f}" y="{y - 10:.1f}" width="10" height="10" fill="{colors[name]}"/>')
        out.append(_text(x + 14, y, name.replace("_", " ")))
        x += 24 + 7 * len(name)
    return out


def _stacked_phases(title: str, svg_title: str, phases: list[Any], labels: list[str], peaks: list[bool],
                    parts: tuple[str, ...], colors: dict[str, str], capacity: int | None, capacity_label: str | None) -> str:
    """One bar per phase, stacked by the parts it holds (`<part>_bytes` of each phase), the total after
    it; the GPU's memory as a dashed line (labelled when `capacity_label` is given)."""
    used = [p for p in parts if any(getattr(ph, f"{p}_bytes") for ph in phases)]
    top = max([ph.total_bytes for ph in phases] + ([capacity] if capacity else [])) or 1
    left, row, bar = 200, 26, 18
    height = 40 + row * len(phases) + 30
    scale = (WIDTH - left - 100) / top  # room for the total after the bar
    body = [_text(10, 16, title, size=13, extra='font-weight="bold"')]
    for i, (ph, label, peak) in enumerate(zip(phases, labels, peaks)):
        y = 30 + i * row
        body.append(_text(left - 6, y + 13, label, anchor="end", extra='font-weight="bold"' if peak else ""))
        x = float(left)
        for part in used:
            w = getattr(ph, f"{part}_bytes") * scale
            if w > 0:
                body.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar}" fill="{colors[part]}">'
                            f'<title>{escape(label)}: {part} {escape(fmt_bytes(getattr(ph, f"{part}_bytes")))}</title></rect>')
                x += w
        body.append(_text(x + 4, y + 13, fmt_bytes(ph.total_bytes) + (" (peak)" if peak else ""), size=11))
    if capacity:
        x = left + capacity * scale
        body.append(f'<line x1="{x:.1f}" y1="24" x2="{x:.1f}" y2="{34 + row * len(phases)}" stroke="#c00" '
                    f'stroke-dasharray="4 3"/>')
        if capacity_label is not None:
            body.append(_text(x, 36 + row * len(phases) + 10, capacity_label,
                              anchor="end" if x > WIDTH / 2 else "start", size=11, extra='fill="#c00"'))
    body += _legend(used, height - 6, colors)
    return _svg(height, body, svg_title)


def memory_timeline(result: Any) -> str:
    """The peak of each phase of a step, stacked by component; the GPU's usable memory as a line."""
    phases = result.memory.phases
    capacity = result.gpu.usable_bytes if result.gpu is not None else None
    return _stacked_phases("Memory per GPU, phase by phase (bytes held at each phase's peak)", "memory timeline",
                           phases, [ph.phase for ph in phases], [ph.phase == result.memory.peak_phase for ph in phases],
                           MEMORY_PARTS, COLORS, capacity,
                           f"{result.gpu.name}: {fmt_bytes(capacity)} usable" if capacity else None)


def memory_breakdown(result: Any) -> str:
    """The peak's components as bars, largest first."""
    peak = result.memory.peak
    parts = sorted(((p, getattr(peak, f"{p}_bytes")) for p in MEMORY_PARTS), key=lambda kv: -kv[1])
    parts = [(p, v) for p, v in parts if v > 0]
    left, row = 110, 24
    height = 30 + row * max(len(parts), 1) + 6
    top = max((v for _, v in parts), default=1)
    scale = (WIDTH - left - 150) / top
    body = [_text(10, 16, f"The peak ({result.memory.peak_phase}): {fmt_bytes(peak.total_bytes)}", size=13,
                  extra='font-weight="bold"')]
    for i, (part, value) in enumerate(parts):
        y = 26 + i * row
        body.append(_text(left - 6, y + 13, part, anchor="end"))
        body.append(f'<rect x="{left}" y="{y}" width="{max(value * scale, 1):.1f}" height="16" fill="{COLORS[part]}"/>')
        body.append(_text(left + value * scale + 6, y + 13,
                          f"{fmt_bytes(value)} ({100 * value / peak.total_bytes:.1f} %)", size=11))
    return _svg(height, body, "memory breakdown")


def _nice_ticks(high: float, count: int = 6) -> list[float]:
    """Round ticks from 0 to `high` (1, 2 or 5 times a power of ten apart), about `count` of them."""
    if high <= 0:
        return [0.0]
    raw = high / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(high / step + 1e-9) + 1)]


def _y_label(x: float, y: float, text: str) -> str:
    """An axis title set vertically beside the y axis."""
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="middle" font-size="11" '
            f'transform="rotate(-90 {x:.1f} {y:.1f})">{escape(text)}</text>')


def _log_ticks(low: float, high: float) -> list[float]:
    return [10.0 ** k for k in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)]


def roofline(result: Any) -> str | None:
    """Prefill and decode steps on the GPU's roofline: attainable FLOP/s = min(peak, bandwidth x
    intensity) (Williams et al. 2009), the peak and bandwidth read back from the result's step
    (FLOPs / compute time, bytes / memory time), the steps at the rate their bound time gives."""
    steps = [("prefill", result.prefill), ("decode, first step", result.decode.first_step),
             ("decode, last step", result.decode.last_step)]
    steps = [(n, s) for n, s in steps if s.compute_s > 0 and s.memory_s > 0 and s.bytes_moved > 0]
    if len(steps) == 3 and (steps[1][1].intensity, steps[1][1].time_s) == (steps[2][1].intensity, steps[2][1].time_s):
        steps = [steps[0], ("decode", steps[1][1])]  # one new token: the first step is the last
    if not steps:
        return None
    peak = steps[0][1].flops / steps[0][1].compute_s
    bandwidth = steps[0][1].bytes_moved / steps[0][1].memory_s
    ridge = peak / bandwidth
    xs = [s.intensity for _, s in steps] + [ridge]
    x_lo, x_hi = min(xs) / 4, max(xs) * 4
    y_lo, y_hi = min(bandwidth * x_lo, min(s.flops / s.time_s for _, s in steps)) / 2, peak * 2
    left, right, top, bottom = 84, WIDTH - 20, 30, 250
    height = bottom + 40

    def px(x: float) -> float:
        return left + (math.log10(x) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * (right - left)

    def py(y: float) -> float:
        return bottom - (math.log10(y) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)) * (bottom - top)

    body = [_text(10, 16, f"Roofline on {result.inference.gpu}: ridge at {ridge:.4g} FLOP/byte", size=13,
                  extra='font-weight="bold"'),
            f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="none" stroke="#999"/>']
    for t in _log_ticks(x_lo, x_hi):
        if x_lo <= t <= x_hi:
            body.append(f'<line x1="{px(t):.1f}" y1="{top}" x2="{px(t):.1f}" y2="{bottom}" stroke="#eee"/>')
            body.append(_text(px(t), bottom + 14, f"{t:g}", anchor="middle", size=10))
    for t in _log_ticks(y_lo, y_hi):
        if y_lo <= t <= y_hi:
            body.append(f'<line x1="{left}" y1="{py(t):.1f}" x2="{right}" y2="{py(t):.1f}" stroke="#eee"/>')
            body.append(_text(left - 4, py(t) + 4, fmt_rate(t, "FLOP/s"), anchor="end", size=9))
    body.append(_text((left + right) / 2, bottom + 30, "arithmetic intensity (FLOPs per byte moved)", anchor="middle", size=11))
    body.append(_y_label(14, (top + bottom) / 2, "attainable FLOP/s"))
    x_mem_lo = max(x_lo, y_lo / bandwidth)
    body.append(f'<polyline fill="none" stroke="#333" stroke-width="2" points="{px(x_mem_lo):.1f},{py(bandwidth * x_mem_lo):.1f} '
                f'{px(ridge):.1f},{py(peak):.1f} {px(x_hi):.1f},{py(peak):.1f}"/>')
    body.append(_text(px(x_hi) - 4, py(peak) - 6, f"peak {fmt_rate(peak, 'FLOP/s')}", anchor="end", size=11))
    body.append(_text(px(x_mem_lo) + 4, py(bandwidth * x_mem_lo) - 8, f"{fmt_rate(bandwidth, 'B/s')}", size=11))
    for (name, s), color in zip(steps, ("#e15759", "#4e79a7", "#59a14f")):
        rate = s.flops / s.time_s
        body.append(f'<circle cx="{px(s.intensity):.1f}" cy="{py(rate):.1f}" r="5" fill="{color}">'
                    f'<title>{escape(name)}: {s.intensity:.4g} FLOP/byte, {escape(fmt_rate(rate, "FLOP/s"))}, '
                    f'{escape(s.bound)}-bound</title></circle>')
        label = f"{name} ({s.bound})"
        near_right = px(s.intensity) + 8 + 6.5 * len(label) > WIDTH - 4  # about 6.5 px a character at size 11
        body.append(_text(px(s.intensity) + (-8 if near_right else 8), py(rate) + 14, label, size=11,
                          anchor="end" if near_right else "start", extra=f'fill="{color}"'))
    return _svg(height, body, "roofline")


def serve_layouts(result: Any) -> str | None:
    """Each layout's TPOT against its throughput per GPU (the latency-throughput trade of T
    against replicas), the TPOT target as a line; infeasible layouts hollow."""
    layouts = [lay for lay in result.layouts if lay.tpot_s and lay.tokens_per_s_per_gpu]
    if not layouts:
        return None
    target = result.serve.targets.tpot_s
    x_hi = max([lay.tpot_s for lay in layouts] + [target or 0]) * 1.15
    y_hi = max(lay.tokens_per_s_per_gpu for lay in layouts) * 1.15
    left, right, top, bottom = 90, WIDTH - 30, 30, 240
    height = bottom + 44

    def px(x: float) -> float:
        return left + x / x_hi * (right - left)

    def py(y: float) -> float:
        return bottom - y / y_hi * (bottom - top)

    body = [_text(10, 16, "Layouts: time per output token against throughput per GPU", size=13, extra='font-weight="bold"'),
            f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="none" stroke="#999"/>',
            _text((left + right) / 2, bottom + 32, "TPOT (time per output token)", anchor="middle", size=11),
            _y_label(16, (top + bottom) / 2, "output tokens/s per GPU")]
    for t in _nice_ticks(x_hi):
        body.append(f'<line x1="{px(t):.1f}" y1="{top}" x2="{px(t):.1f}" y2="{bottom}" stroke="#eee"/>')
        body.append(_text(px(t), bottom + 14, fmt_s(t) if t else "0", anchor="middle", size=9))
    for t in _nice_ticks(y_hi):
        body.append(f'<line x1="{left}" y1="{py(t):.1f}" x2="{right}" y2="{py(t):.1f}" stroke="#eee"/>')
        body.append(_text(left - 4, py(t) + 3, f"{t:,.0f}", anchor="end", size=9))
    if target:
        # the target's label at the line's foot, away from the points (they sit high: the best throughput)
        body.append(f'<line x1="{px(target):.1f}" y1="{top}" x2="{px(target):.1f}" y2="{bottom}" stroke="#c00" stroke-dasharray="4 3"/>')
        body.append(_text(px(target) - 4, bottom - 6, f"target {fmt_s(target)}", anchor="end", size=11, extra='fill="#c00"'))
    for lay in layouts:
        fill = "#4e79a7" if lay.feasible else "none"
        body.append(f'<circle cx="{px(lay.tpot_s):.1f}" cy="{py(lay.tokens_per_s_per_gpu):.1f}" r="6" fill="{fill}" '
                    f'stroke="#4e79a7" stroke-width="2"><title>{escape(layout_words(lay.tensor, lay.replicas))}: '
                    f'{escape(fmt_s(lay.tpot_s))}, {lay.tokens_per_s_per_gpu:,.0f} tokens/s per GPU'
                    f'{"" if lay.feasible else ", " + escape(lay.reason or "infeasible")}</title></circle>')
        body.append(_text(px(lay.tpot_s) + 9, py(lay.tokens_per_s_per_gpu) + 4, f"T={lay.tensor}", size=11))
    return _svg(height, body, "serving layouts")


def _axis_scale(lo: float, hi: float, log: bool, a: float, b: float) -> Any:
    """x or y in data units -> pixels between a and b (linear or log10, from lo to hi)."""
    if log:
        return lambda v: a + (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (b - a)
    return lambda v: a + (v - lo) / ((hi - lo) or 1.0) * (b - a)


def _curve_panel(points: list[Any], latency: str, target: float | None, title: str, y0: int) -> tuple[list[str], int]:
    """One panel of the serving curve: `latency` (ttft_s or tpot_s) of each point against its output
    tokens/s per GPU, the points joined in concurrency order and labelled with it; x on a log
    scale when the points span more than a decade (concurrency 1 to 256 does)."""
    xs = [p.tokens_per_s_per_gpu for p in points]
    ys = [getattr(p, latency) for p in points]
    log_x = max(xs) / min(xs) > 10
    x_lo, x_hi = (min(xs) / 1.5, max(xs) * 1.5) if log_x else (0.0, max(xs) * 1.15)
    y_hi = max(ys + [target or 0]) * 1.15
    left, right, top, bottom = 80, WIDTH - 30, y0 + 28, y0 + 200
    px = _axis_scale(x_lo, x_hi, log_x, left, right)
    py = _axis_scale(0.0, y_hi, False, bottom, top)
    body = [_text(10, y0 + 16, title, size=13, extra='font-weight="bold"'),
            f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="none" stroke="#999"/>',
            _text((left + right) / 2, bottom + 30, "output tokens/s per GPU" + (" (log scale)" if log_x else ""),
                  anchor="middle", size=11), _y_label(16, (top + bottom) / 2, latency.removesuffix("_s").upper())]
    for t in _nice_ticks(y_hi):
        body.append(f'<line x1="{left}" y1="{py(t):.1f}" x2="{right}" y2="{py(t):.1f}" stroke="#eee"/>')
        body.append(_text(left - 4, py(t) + 3, fmt_s(t) if t else "0", anchor="end", size=9))
    ticks = [t for t in _log_ticks(x_lo, x_hi) if x_lo <= t <= x_hi] if log_x else _nice_ticks(x_hi)
    for t in ticks:
        body.append(f'<line x1="{px(t):.1f}" y1="{top}" x2="{px(t):.1f}" y2="{bottom}" stroke="#eee"/>')
        body.append(_text(px(t), bottom + 14, f"{t:,.0f}", anchor="middle", size=9))
    if target:
        body.append(f'<line x1="{left}" y1="{py(target):.1f}" x2="{right}" y2="{py(target):.1f}" stroke="#c00" '
                    f'stroke-dasharray="4 3"/>')
        body.append(_text(right - 4, py(target) - 4, f"target {fmt_s(target)}", anchor="end", size=11, extra='fill="#c00"'))
    line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys))
    body.append(f'<polyline fill="none" stroke="#4e79a7" stroke-width="2" points="{line}"/>')
    for p, x, y in zip(points, xs, ys):
        body.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="5" fill="#4e79a7" data-concurrency="{p.concurrency}">'
                    f'<title>concurrency {p.concurrency}: {escape(fmt_s(y))}, {x:,.0f} tokens/s per GPU</title></circle>')
        body.append(_text(px(x) + 7, py(y) - 7, f"c={p.concurrency}", size=10))
    return body, bottom + 40 - y0


def serve_curve(result: Any) -> str | None:
    """`--concurrency`'s latency-throughput curve as engines publish it (vLLM's and SGLang's
    benchmark_serving sweeps, NVIDIA's NIM and TensorRT-LLM performance pages): for each
    concurrency, the time to first token and the time per output token against the output
    tokens/s per GPU, one point per concurrency. A point the engine cannot hold (its reason in the
    table) has no times and is left out."""
    curve = result.curve
    if curve is None:
        return None
    points = [p for p in curve.points if p.ttft_s is not None and p.tpot_s is not None and p.tokens_per_s_per_gpu]
    if not points:
        return None
    targets = result.serve.targets
    head = layout_words(curve.tensor, curve.replicas)
    body: list[str] = []
    y = 0
    for latency, target, name in (("ttft_s", targets.ttft_s, "TTFT (time to first token)"),
                                  ("tpot_s", targets.tpot_s, "TPOT (time per output token)")):
        panel, height = _curve_panel(points, latency, target, f"{name} against throughput, {head}", y)
        body += panel
        y += height
    return _svg(y, body, "latency-throughput curve")


def disaggregated_pools(result: Any) -> str | None:
    """`--disaggregate xPyD`: each pool's request rate (instances x the rate of one, the section's
    prefill_requests_per_s and decode_requests_per_s) as bars; the deployment runs at the slower
    one's (requests_per_s, the bottleneck), the other pool's surplus is idle."""
    d = result.disaggregated
    if d is None:
        return None
    pools = [("prefill", d.prefill_instances, d.prefill_requests_per_s), ("decode", d.decode_instances, d.decode_requests_per_s)]
    rates = [n * r for _, n, r in pools]
    left, row = 150, 28
    scale = (WIDTH - left - 220) / max(max(rates), 1e-30)
    height = 30 + row * 2 + 26
    body = [_text(10, 16, f"Disaggregated {d.prefill_instances}P{d.decode_instances}D (T={d.tensor}, {d.gpus} GPUs): "
                          f"{d.requests_per_s:,.3g} requests/s, {d.bottleneck}-bound", size=13, extra='font-weight="bold"')]
    for i, ((name, n, one), rate) in enumerate(zip(pools, rates)):
        y = 28 + i * row
        color = "#e15759" if name == d.bottleneck else "#4e79a7"
        body.append(_text(left - 6, y + 14, f"{name} pool ({n} x)", anchor="end", extra='font-weight="bold"' if name == d.bottleneck else ""))
        body.append(f'<rect x="{left}" y="{y}" width="{max(rate * scale, 1):.1f}" height="18" fill="{color}" data-pool="{name}">'
                    f'<title>{name}: {n} instances x {one:,.4g} requests/s</title></rect>')
        body.append(_text(left + rate * scale + 6, y + 14, f"{rate:,.4g} requests/s ({n} x {one:,.4g})", size=11))
    x = left + d.requests_per_s * scale
    body.append(f'<line x1="{x:.1f}" y1="24" x2="{x:.1f}" y2="{30 + row * 2}" stroke="#333" stroke-dasharray="4 3"/>')
    body.append(_text(10, height - 6, f"TTFT {fmt_s(d.ttft_s)}, KV transfer {fmt_s(d.kv_transfer_s)} over {d.link} "
                                      f"(delays the second token), TPOT {fmt_s(d.tpot_s)}; balanced at {d.balanced_decode_per_prefill:.3g} decode per prefill", size=11))
    return _svg(height, body, "disaggregated pools")


BREAKDOWN_PARTS = ("compute_s", "memory_bound_s", "tp_comm_s", "pp_bubble_s", "pp_comm_s", "dp_comm_exposed_s",
                   "optimizer_s", "moe_all_to_all_s", "cp_comm_s", "offload_pcie_s")


def _color(part: str) -> str:
    return COLORS.get(part, COLORS.get(part.removesuffix("_s"), "#999"))  # optimizer_s: a time, not the states


def step_breakdown(breakdown: Any, step_time_s: float, title: str) -> str:
    """A step's time by part, as bars: compute, memory-bound time, exposed communication, bubble."""
    parts = [(p, getattr(breakdown, p)) for p in BREAKDOWN_PARTS if getattr(breakdown, p) > 0]
    left, row = 150, 24
    height = 30 + row * max(len(parts), 1) + 6
    top = max((v for _, v in parts), default=1.0)
    scale = (WIDTH - left - 140) / top
    body = [_text(10, 16, f"{title}: {fmt_s(step_time_s)}", size=13, extra='font-weight="bold"')]
    for i, (part, value) in enumerate(parts):
        y = 26 + i * row
        body.append(_text(left - 6, y + 13, part.removesuffix("_s").replace("_", " "), anchor="end"))
        body.append(f'<rect x="{left}" y="{y}" width="{max(value * scale, 1):.1f}" height="16" fill="{_color(part)}"/>')
        body.append(_text(left + value * scale + 6, y + 13, fmt_s(value), size=11))
    return _svg(height, body, "step time breakdown")


def cost_panel(result: Any) -> str | None:
    """What a run costs (results/run_cost.py): train's budget (failure-free and with failures:
    days, GPU-hours, $; energy and CO2eq) or serve's cost (per hour and per million tokens)."""
    rows: list[tuple[str, float, str]] = []  # (label, bar value, text); bars share one scale per panel
    lines: list[str] = []
    b = getattr(result, "budget", None)
    c = getattr(result, "cost", None) if not isinstance(getattr(result, "cost", None), (int, float)) else None
    if b is not None:
        title = f"Cost and energy: {b.tokens:,} tokens"
        usd = (lambda v: f", ${v:,.0f}") if b.price is not None else (lambda v: "")
        rows.append(("failure-free", b.gpu_hours, f"{b.days:,.1f} days, {b.gpu_hours:,.0f} GPU-hours" + usd(b.cost or 0)))
        if b.goodput is not None:
            g = b.goodput
            rows.append((f"goodput {100 * g.goodput:.1f} %", g.gpu_hours,
                         f"{g.days:,.1f} days, {g.gpu_hours:,.0f} GPU-hours" + usd(g.cost or 0)))
            lines.append(f"{g.interruptions:,.0f} interruptions (one per {g.mtti_s / 3600:.1f} h); checkpoint "
                         f"{fmt_bytes(g.checkpoint_bytes)} every {fmt_s(g.interval_s)} ({g.checkpoint_mode}, {fmt_s(g.save_s)})")
        if b.price is not None:
            lines.append(f"${b.price.usd_per_gpu_hour:,.2f}/GPU-hour ({b.price.kind}, {b.price.provider or 'given'}"
                         f"{', ' + b.price.date if b.price.date else ''}): ${b.cost_per_day:,.0f}/day, "
                         f"${b.cost_per_billion_tokens:,.2f} per billion tokens")
        energy = b.energy
    elif c is not None:
        title = "Cost and energy: the best layout"
        if c.price is not None:
            rows.append(("input", c.cost_per_million_input_tokens, f"${c.cost_per_million_input_tokens:,.3f} per million tokens"))
            rows.append(("output", c.cost_per_million_output_tokens, f"${c.cost_per_million_output_tokens:,.3f} per million tokens"))
            lines.append(f"${c.cost_per_hour:,.2f}/hour on {c.gpus} GPUs at ${c.price.usd_per_gpu_hour:,.2f}/GPU-hour "
                         f"({c.price.kind}, {c.price.provider or 'given'})")
        if c.gpus_for_request_rate is not None:
            lines.append(f"{c.request_rate:g} requests/s: {c.gpus_for_request_rate} GPUs"
                         + (f", ${c.cost_per_hour_for_request_rate:,.2f}/hour" if c.cost_per_hour_for_request_rate is not None else ""))
        energy = c.energy
    else:
        return None
    if energy is not None:
        lines.append(f"{energy.kwh:,.0f} kWh ({energy.power_w_per_gpu:,.0f} W per GPU, PUE {energy.pue:g}), "
                     f"{energy.co2_tonnes:,.2f} t CO2eq at {energy.grid_intensity_g_per_kwh:g} g/kWh")
    left, row = 150, 24
    top = max((v for _, v, _ in rows), default=1.0) or 1.0
    scale = (WIDTH - left - 330) / top
    body = [_text(10, 16, title, size=13, extra='font-weight="bold"')]
    for i, (label, value, text) in enumerate(rows):
        y = 26 + i * row
        body.append(_text(left - 6, y + 13, label, anchor="end"))
        body.append(f'<rect x="{left}" y="{y}" width="{max(value * scale, 1):.1f}" height="16" fill="#4c78a8"/>')
        body.append(_text(left + value * scale + 6, y + 13, text, size=11))
    y = 26 + len(rows) * row + 14
    for i, line in enumerate(lines):
        body.append(_text(10, y + i * 18, line, size=11))
    return _svg(y + 18 * len(lines) + 4, body, "cost and energy")


def ranked_layouts(result: Any) -> str | None:
    """plan's layouts, fastest first: each step time stacked by part."""
    plans = result.plans
    if not plans:
        return None
    left, row = 250, 24
    height = 30 + row * len(plans) + 26
    top = max(p.step_time_s for p in plans)
    scale = (WIDTH - left - 150) / top  # room for "21.77 ms, MFU 31.0 %" after the bar
    body = [_text(10, 16, "Layouts that fit, fastest first (step time by part)", size=13, extra='font-weight="bold"')]
    used = set()
    for i, p in enumerate(plans):
        y = 26 + i * row
        lay = p.layout
        label = f"#{i + 1} T{lay.tensor} P{lay.pipeline} CP{lay.context} EP{lay.expert} dp{lay.data} b{p.micro_batch} {p.recompute}"
        body.append(_text(left - 6, y + 13, label, anchor="end", size=11))
        x = float(left)
        for part in BREAKDOWN_PARTS:
            w = getattr(p.breakdown, part) * scale
            if w > 0:
                used.add(part)
                body.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="16" fill="{_color(part)}"/>')
                x += w
        body.append(_text(x + 4, y + 13, f"{fmt_s(p.step_time_s)}, MFU {100 * p.mfu:.1f} %", size=11))
    names = [p for p in BREAKDOWN_PARTS if p in used]
    body += _legend([n.removesuffix("_s") for n in names], height - 6, {n.removesuffix("_s"): _color(n) for n in names})
    return _svg(height, body, "ranked layouts")


SWEEP_NOT_PLOTTED = ("fits", "inference_fits", "decode_bound")  # yes/no and words: in the table only
SWEEP_MAX_CHARTS = 3  # the first numeric metrics drawn; every metric is in the table
SERIES_COLORS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7")


def sweep_axes(result: Any) -> tuple[str, str | None]:
    """(x axis, series axis) as `tcalc sweep --plot` picks them without --x and --series (cli.py
    `_sweep_plot_args`): x the first axis that varies other than model and gpu, the series the
    next one that varies."""
    axes = result.axes.model_dump(exclude_none=True)
    varying = [a for a, v in axes.items() if len(v) > 1]
    x = next((a for a in varying if a not in ("model", "gpu")), varying[0] if varying else "batch_size")
    return x, next((a for a in varying if a != x), None)


def _metric_text(metric: str, value: float) -> str:
    if metric.endswith("_bytes"):
        return fmt_bytes(value)
    if metric.endswith("_s") and not metric.endswith("per_s"):
        return fmt_s(value)
    if "flops" in metric:
        return fmt_rate(value, "FLOP").removesuffix("/s")
    return f"{value:,.4g}"


def sweep_metric(result: Any, metric: str, x: str, series: str | None) -> str | None:
    """One metric of a sweep against its x axis, a line per value of the series axis (the other
    axes' points share a line as the CLI's plot draws them); x on a log2 scale when numeric and
    spanning 8x or more (as the CLI's), else one slot per value."""
    groups: dict[Any, list[tuple[Any, float]]] = {}
    for p in result.points:
        v = p.get(metric)
        if v is None or isinstance(v, (bool, str)):
            continue
        groups.setdefault(p.get(series) if series else None, []).append((p.get(x), float(v)))
    if not groups:
        return None
    xs_all = [pt[0] for pts in groups.values() for pt in pts]
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in xs_all)
    slots = sorted(set(xs_all), key=lambda v: (str(type(v)), v))
    log = numeric and min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 8
    y_hi = max(v for pts in groups.values() for _, v in pts) * 1.15 or 1.0
    left, right, top, bottom = 90, WIDTH - (150 if series else 30), 30, 230  # room for the legend
    if numeric:
        span = (max(xs_all) - min(xs_all)) or abs(max(xs_all)) or 1.0
        lo, hi = (min(xs_all) / 1.3, max(xs_all) * 1.3) if log else (min(xs_all) - span / 8, max(xs_all) + span / 8)
        px = _axis_scale(lo, hi, log, left, right)
    else:
        step = (right - left) / (len(slots) + 1)
        px = lambda v: left + step * (slots.index(v) + 1)  # noqa: E731
    py = _axis_scale(0.0, y_hi, False, bottom, top)
    body = [_text(10, 16, f"{metric} against {x}" + (f", a line per {series}" if series else ""), size=13,
                  extra='font-weight="bold"'),
            f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="none" stroke="#999"/>',
            _text(left - 4, top + 4, _metric_text(metric, y_hi), anchor="end", size=9),
            _text(left - 4, bottom, "0", anchor="end", size=9),
            _text((left + right) / 2, bottom + 30, x + (" (log scale)" if log else ""), anchor="middle", size=11)]
    for v in slots[:24]:
        body.append(_text(px(v), bottom + 14, f"{v:,}" if numeric else str(v), anchor="middle", size=9))
    legend: list[str] = []
    for i, (key, pts) in enumerate(groups.items()):
        color = SERIES_COLORS[i % len(SERIES_COLORS)]
        pts = sorted(pts, key=lambda pt: (str(type(pt[0])), pt[0]))
        body.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                    + " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in pts) + '"/>')
        for a, b in pts:
            body.append(f'<circle cx="{px(a):.1f}" cy="{py(b):.1f}" r="3.5" fill="{color}"><title>'
                        f'{escape(f"{series}={key}, " if series else "")}{escape(x)}={escape(str(a))}: '
                        f'{escape(_metric_text(metric, b))}</title></circle>')
        if series and i < len(SERIES_COLORS):
            legend.append(f'<rect x="{right + 8}" y="{top + 6 + 14 * i}" width="10" height="10" fill="{color}"/>'
                          + _text(right + 22, top + 15 + 14 * i, f"{series}={key}"[:20], size=10))
    return _svg(bottom + 40, body + legend, f"sweep {metric}")


def sweep_charts(result: Any) -> list[str | None]:
    """The sweep's first numeric metrics, each against the CLI plot's default axes."""
    x, series = sweep_axes(result)
    metrics = [m for m in result.metrics if m not in SWEEP_NOT_PLOTTED][:SWEEP_MAX_CHARTS]
    return [sweep_metric(result, m, x, series) for m in metrics]


RL_COLORS = {"generation": "#4e79a7", "policy_log_prob": "#76b7b2", "reference_log_prob": "#59a14f",
             "critic_values": "#9c755f", "policy_update": "#f28e2b", "critic_update": "#e15759",
             "weight_sync": "#b07aa1", "offload": "#bab0ac"}
RL_MEMORY_PARTS = ("trainer", "trainer_work", "reference", "critic", "engine_weights", "kv_cache", "engine_reserve",
                   "sync_buffer", "cuda_context")
RL_MEMORY_COLORS = {"trainer": "#4e79a7", "trainer_work": "#76b7b2", "reference": "#59a14f", "critic": "#9c755f",
                    "engine_weights": "#f28e2b", "kv_cache": "#edc948", "engine_reserve": "#ff9da7",
                    "sync_buffer": "#b07aa1", "cuda_context": "#bab0ac"}


def rl_phases(result: Any) -> str:
    """`tcalc rl`: each phase's time as a bar, with its share of the phases' sum."""
    parts = [p for p in result.phases if p.time_s > 0]
    left, row = 150, 24
    height = 30 + row * max(len(parts), 1) + 6
    top = max((p.time_s for p in parts), default=1.0)
    scale = (WIDTH - left - 160) / top
    body = [_text(10, 16, f"RL step: {fmt_s(result.step_time_s)}", size=13, extra='font-weight="bold"')]
    for i, p in enumerate(parts):
        y = 26 + i * row
        body.append(_text(left - 6, y + 13, p.phase.replace("_", " "), anchor="end"))
        body.append(f'<rect x="{left}" y="{y}" width="{max(p.time_s * scale, 1):.1f}" height="16" '
                    f'fill="{RL_COLORS.get(p.phase, "#999")}"/>')
        body.append(_text(left + p.time_s * scale + 6, y + 13, f"{fmt_s(p.time_s)} ({100 * p.share:.1f} %)", size=11))
    return _svg(height, body, "RL step phases")


def rl_memory(result: Any) -> str:
    """`tcalc rl`: what one GPU holds in each phase (each pool's under split pools), stacked; the GPU's memory as a line."""
    mem = result.memory
    return _stacked_phases("Memory per GPU, phase by phase", "RL memory per phase", mem.phases,
                           [ph.phase if ph.pool == "all" else f"{ph.phase} ({ph.pool})" for ph in mem.phases],
                           [ph.phase == mem.peak_phase and ph.pool == mem.peak_pool for ph in mem.phases],
                           RL_MEMORY_PARTS, RL_MEMORY_COLORS, mem.capacity_bytes, None)


def charts(command: str, result: Any) -> list[str]:
    """The charts of a command's page (none for a command without one)."""
    out: list[str | None] = []
    if command == "memory":
        out = [memory_timeline(result), memory_breakdown(result)]
    elif command == "inference":
        out = [roofline(result)]
    elif command == "serve":
        out = [serve_curve(result), disaggregated_pools(result), serve_layouts(result), cost_panel(result)]
    elif command == "train":
        out = [step_breakdown(result.breakdown, result.step_time_s, "Step time") if result.breakdown else None,
               cost_panel(result)]
    elif command == "rl":
        out = [rl_phases(result), rl_memory(result)]
    elif command == "sweep":
        out = sweep_charts(result)
    elif command == "plan":
        out = [ranked_layouts(result)]
        if result.plans:
            out.append(step_breakdown(result.plans[0].breakdown, result.plans[0].step_time_s, "The fastest layout's step"))
    return [c for c in out if c]
