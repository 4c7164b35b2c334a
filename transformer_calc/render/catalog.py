"""`tcalc presets` and `tcalc hardware` as tables."""

from __future__ import annotations
import json
from enum import Enum
from typing import Any
from transformer_calc.render.common import GB, terminal_width, fmt_bytes, fmt_count, num, short_source, styled_table


def presets_table(rows: list[dict[str, Any]]) -> Any:
    """The presets; narrow terminals (and pipes: 80 columns) drop d_ff, the MLP and the source,
    never the name users type."""
    wide = terminal_width() >= 120
    cols = ["name", "params", "L", "D", "A", "kv", "V"] + (["d_ff", "mlp", "source"] if wide else [])
    t = styled_table("Model presets (" + ("full sources" if wide else "d_ff, MLP and sources") + ": -f json)", *cols)
    t.columns[0].no_wrap = True
    t.columns[0].overflow = "fold"
    for r in rows:
        cells = [r["name"], fmt_count(r["params"]), str(r["n_layers"]), str(r["d_model"]), str(r["n_heads"]),
                 str(r["n_kv_heads"]), str(r["vocab_size"])]
        if wide:
            mlp = r["mlp"] + (f" {r['n_experts']}x" if r["n_experts"] > 1 else "")
            cells += [str(r["d_ff"]), mlp, short_source(r["source"])]
        t.add_row(*cells)
    if wide:
        t.columns[-1].justify = "left"
    return t


def hardware_table(rows: list[dict[str, Any]]) -> Any:
    """Numbers in the header's unit so the table fits a terminal; `-f json` has everything."""
    wide = terminal_width() >= 110
    cols = ["name", "alias", "GB", "GB/s", "16-bit TF", "fp8 TF"] + (["fp32 TF", "λ_math", "link GB/s"] if wide else [])
    t = styled_table("Accelerators: dense peaks, GB = 1e9 B" + (" (λ_math = 16-bit peak / bandwidth)" if wide else ""), *cols)
    t.columns[0].no_wrap = True
    t.columns[1].no_wrap = True  # the alias users type is never cut
    for r in rows:
        peaks, lam = r["peak_flops"], r["math_bandwidth"]
        half = "bf16" if "bf16" in peaks else ("fp16" if "fp16" in peaks else None)
        link = r["interconnect_bytes_s"]
        def num(x: float) -> str:  # short enough for 80 columns; -f json has every digit
            return f"{x:.0f}" if x >= 100 else f"{x:.3g}"

        cells = [
            r["name"],
            min(r["aliases"], key=len) if r["aliases"] else "",
            num(r["memory_bytes"] / GB),
            num(r["memory_bw_bytes_s"] / GB),
            num(peaks[half] / 1e12) if half else "-",
            num(peaks["fp8"] / 1e12) if "fp8" in peaks else "-",
        ]
        if wide:
            cells += [f"{peaks['fp32'] / 1e12:g}" if "fp32" in peaks else "-",
                      f"{lam[half]:.0f}" if half else "-", f"{link / GB:g}" if link else "-"]
        t.add_row(*cells)
    return t


def gpu_detail(r: dict[str, Any]) -> Any:
    """One accelerator: every dtype's dense peak and λ_math, links, source and notes."""
    from rich.console import Group
    from rich.text import Text

    head = (
        f"{r['name']} ({r['vendor']}; also: {', '.join(r['aliases'])})\n"
        f"memory {r['memory_bytes'] / GB:g} GB = {fmt_bytes(r['memory_bytes'])}, "
        f"bandwidth {r['memory_bw_bytes_s'] / GB:g} GB/s"
    )
    if r["interconnect_bytes_s"]:
        head += f", {r['interconnect'] or 'interconnect'} {r['interconnect_bytes_s'] / GB:g} GB/s (bidirectional)"
    t = styled_table("Dense peak per dtype", "dtype", "TFLOP/s (TOPS for int)", "λ_math FLOP/B")
    for dtype, peak in r["peak_flops"].items():
        t.add_row(dtype, f"{peak / 1e12:g}", f"{r['math_bandwidth'][dtype]:.1f}")
    foot = f"source: {r['source']}" + ("" if r["verified"] else " (not re-verified)")
    if r["notes"]:
        foot += f"\nnotes: {r['notes']}"
    return Group(Text(head), t, Text(foot, style="dim"))
