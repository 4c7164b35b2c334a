"""`tcalc presets` and `tcalc hardware` as tables."""

from __future__ import annotations

from typing import Any

from transformer_calc.model.units import GB
from transformer_calc.render.common import fmt_bytes, fmt_count, short_source, styled_table, terminal_width


def presets_table(r: Any) -> Any:
    """The presets (a PresetsResult); narrow terminals (and pipes: 80 columns) drop d_ff, the MLP
    and the source, never the name users type."""
    wide = terminal_width() >= 120
    cols = ["name", "params", "L", "D", "A", "kv", "V"] + (["d_ff", "mlp", "source"] if wide else [])
    t = styled_table("Model presets (" + ("full sources" if wide else "d_ff, MLP and sources") + ": -f json)", *cols)
    t.columns[0].no_wrap = True
    t.columns[0].overflow = "fold"
    for p in r.root:
        cells = [p.name, fmt_count(p.params), str(p.n_layers), str(p.d_model), str(p.n_heads), str(p.n_kv_heads),
                 str(p.vocab_size)]
        if wide:
            mlp = p.mlp + (f" {p.n_experts}x" if p.n_experts > 1 else "")
            cells += [str(p.d_ff), mlp, short_source(p.source)]
        t.add_row(*cells)
    if wide:
        t.columns[-1].justify = "left"
    return t


def hardware_table(r: Any) -> Any:
    """Every accelerator (a HardwareResult), numbers in the header's unit so the table fits a
    terminal; `-f json` has everything."""
    wide = terminal_width() >= 110
    cols = ["name", "alias", "GB", "GB/s", "16-bit TF", "fp8 TF"] + (["fp32 TF", "λ_math", "link GB/s"] if wide else [])
    t = styled_table("Accelerators: dense peaks, GB = 1e9 B" + (" (λ_math = 16-bit peak / bandwidth)" if wide else ""), *cols)
    t.columns[0].no_wrap = True
    t.columns[1].no_wrap = True  # the alias users type is never cut

    def num(x: float) -> str:  # short enough for 80 columns; -f json has every digit
        return f"{x:.0f}" if x >= 100 else f"{x:.3g}"

    for g in r.root:
        peaks, lam = g.peak_flops, g.math_bandwidth
        half = "bf16" if "bf16" in peaks else ("fp16" if "fp16" in peaks else None)
        link = g.interconnect_bytes_s
        cells = [
            g.name,
            min(g.aliases, key=len) if g.aliases else "",
            num((g.marketed_memory_bytes or g.memory_bytes) / GB),  # as marketed; the detail has the driver's
            num(g.memory_bw_bytes_s / GB),
            num(peaks[half] / 1e12) if half else "-",
            num(peaks["fp8"] / 1e12) if "fp8" in peaks else "-",
        ]
        if wide:
            cells += [f"{peaks['fp32'] / 1e12:g}" if "fp32" in peaks else "-",
                      f"{lam[half]:.0f}" if half else "-", f"{link / GB:g}" if link else "-"]
        t.add_row(*cells)
    return t


def gpu_detail(r: Any) -> Any:
    """One accelerator (a HardwareResult of one GpuSection): every dtype's dense peak and λ_math,
    links, source and notes."""
    from rich.console import Group
    from rich.text import Text

    g = r.root
    head = (
        f"{g.name} ({g.vendor}; also: {', '.join(g.aliases)})\n"
        + (f"memory {fmt_bytes(g.memory_bytes)} as the driver reports it ({g.marketed_memory_bytes / GB:g} GB marketed), "
           if g.marketed_memory_bytes else f"memory {g.memory_bytes / GB:g} GB = {fmt_bytes(g.memory_bytes)}, ")
        + f"bandwidth {g.memory_bw_bytes_s / GB:g} GB/s"
    )
    if g.interconnect_bytes_s:
        head += f", {g.interconnect or 'interconnect'} {g.interconnect_bytes_s / GB:g} GB/s (bidirectional)"
    t = styled_table("Dense peak per dtype", "dtype", "TFLOP/s (TOPS for int)", "λ_math FLOP/B")
    for dtype, peak in g.peak_flops.items():
        t.add_row(dtype, f"{peak / 1e12:g}", f"{g.math_bandwidth[dtype]:.1f}")
    foot = f"source: {g.source}" + ("" if g.verified else " (not re-verified)")
    if g.memory_source:
        foot += f"\nmemory as the driver reports it: {g.memory_source}"
    if g.notes:
        foot += f"\nnotes: {g.notes}"
    return Group(Text(head), t, Text(foot, style="dim"))
