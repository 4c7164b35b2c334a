"""What every display shares: the output formats (JSON, YAML, CSV), number formats, the table style,
the model line and the checkpoint table."""

from __future__ import annotations

import json
from enum import Enum
from typing import Any




def console(file: Any, width: int | None = None) -> Any:
    """The rich Console every table goes through: each string it renders (a cell, a title, a line)
    passes `errors.printable` first, so control characters in a result (a GGUF file's name, a Hub
    config's text) are shown escaped, never sent to the terminal raw, and rich markup in them is
    text, not a style. Once, here, for every table."""
    from rich.console import Console

    from transformer_calc.errors import printable

    class SafeConsole(Console):
        def render_str(self, text: str, **kwargs: Any) -> Any:
            return super().render_str(printable(text, keep_newlines=True), **kwargs)

    # no markup and no emoji codes: a name such as "[/bold]" or ":x:" is text (tables style with Style objects)
    options: dict[str, Any] = {"file": file, "markup": False, "emoji": False}
    return SafeConsole(**options, width=width) if width is not None else SafeConsole(**options)


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    yaml = "yaml"
    csv = "csv"






# ---------------------------------------------------------------------------- number formatting
def fmt_count(n: int) -> str:
    """1_557_611_200 -> '1.56 B' (decimal: K, M, B, T)."""
    for unit, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return str(n)


def fmt_bytes(n: int | float) -> str:
    """Binary units (GiB = 2^30 bytes), as GPU memory is reported by nvidia-smi and PyTorch."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            return f"{value:.4g} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    raise AssertionError("unreachable")


def fmt_rate(x: float, unit: str) -> str:
    """Decimal prefixes for rates: 3.12e14 FLOP/s -> '312 TFLOP/s'."""
    for prefix, scale in (("Y", 1e24), ("Z", 1e21), ("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.4g} {prefix}{unit}"
    return f"{x:.4g} {unit}"


def fmt_pct(x: float) -> str:
    return f"{100 * x:+.2f} %"


# ---------------------------------------------------------------------------- machine formats
def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def schema_json(schema: dict[str, Any]) -> str:
    """A JSON Schema as `tcalc schema` prints it and docs/schemas/ stores it: keys sorted, so that
    the files diff cleanly."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def to_yaml(data: Any) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def csv_cell(value: Any) -> Any:
    """A CSV scalar: booleans lowercase (as JSON writes them), None empty."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else value


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}; lists of scalars become ';'-joined strings, lists of records
    dotted columns with an index (for CSV: every cell a scalar)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, list):
            if any(isinstance(v, (dict, list)) for v in value):
                for i, v in enumerate(value):
                    out.update(flatten(v if isinstance(v, dict) else {"value": v}, f"{name}.{i}."))
            else:
                out[name] = ";".join(str(csv_cell(v)) for v in value)
        else:
            out[name] = csv_cell(value)
    return out


def terminal_width() -> int:
    """The terminal's width (80 when stdout is a pipe, as rich assumes)."""
    import shutil
    import sys

    if not sys.stdout.isatty() and "COLUMNS" not in __import__("os").environ:
        return 80
    return shutil.get_terminal_size((80, 24)).columns


def to_csv(rows: list[dict[str, Any]]) -> str:
    """One header row, one row per record; nested keys flattened with dots."""
    import csv
    import io

    flat = [flatten(r) for r in rows]
    header: list[str] = []
    for row in flat:
        header.extend(k for k in row if k not in header)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(flat)
    return buf.getvalue()


def to_text(data: Any, fmt: OutputFormat) -> str:
    """JSON, YAML or CSV text of a report (a dict, or a list of row dicts)."""
    if fmt is OutputFormat.json:
        return to_json(data)
    if fmt is OutputFormat.yaml:
        return to_yaml(data)
    if fmt is OutputFormat.csv:
        return to_csv(data if isinstance(data, list) else [data])
    raise ValueError(f"no text form for {fmt}")


# ---------------------------------------------------------------------------- tables
def styled_table(title: str, *columns: str, **kwargs: Any) -> Any:
    from rich.table import Table

    # at least as wide as its title (capped by the terminal): a narrow table would wrap its title
    kwargs.setdefault("min_width", len(title) + 1)
    table = Table(title=title, title_justify="left", **kwargs)
    for i, col in enumerate(columns):
        # never narrower than its header's longest word: "expect…" for "expected" at 80 columns (issue 38)
        table.add_column(col, justify="left" if i == 0 else "right", min_width=max(map(len, col.split()), default=0))
    return table


def model_summary(model: Any) -> str:
    """One line describing the model section (a result's typed `model`, or its JSON)."""
    m = model if isinstance(model, dict) else model.model_dump(mode="json")
    attn = "MHA" if m["n_kv_heads"] == m["n_heads"] else ("MQA" if m["n_kv_heads"] == 1 else "GQA")
    heads = f"A={m['n_heads']} ({attn}, kv={m['n_kv_heads']}, head_dim={m['head_dim']})"
    if m.get("kv_lora_rank") is not None:
        heads = (f"A={m['n_heads']} (MLA, r_kv={m['kv_lora_rank']}, r_q={m.get('q_lora_rank')}, "
                 f"h_d={m['head_dim']}, h_v={m.get('v_head_dim')})")
    parts = [
        f"L={m['n_layers']}",
        f"D={m['d_model']}",
        heads,
        f"d_ff={m['d_ff']} {m['mlp']}",
        f"V={m['vocab_size']}",
        f"K={m['max_seq_len']}",
        f"{m['positional']}",
        f"{m['norm']}",
    ]
    pattern = m.get("attention_pattern") or ["full"]
    if set(pattern) != {"full"}:
        window = {"sliding": m.get("sliding_window"), "chunked": m.get("attention_chunk_size")}
        kinds = sorted(set(pattern) - {"full"})
        spans = ", ".join(f"{k} {window[k]}" if k in window else k for k in kinds)  # mixers: no span
        parts.append(f"layers {'/'.join(pattern) if len(pattern) <= 6 else str(len(pattern)) + '-layer pattern'} ({spans})")
    if m["n_experts"] > 1:
        moe = f"MoE {m['experts_per_token']}/{m['n_experts']}"
        if m.get("moe_d_ff") and m["moe_d_ff"] != m["d_ff"]:
            moe += f" of width {m['moe_d_ff']}"
        if m.get("shared_expert_d_ff"):
            moe += f" + shared {m['shared_expert_d_ff']}"
        parts.append(moe)
    if m["parallel_attn"]:
        parts.append("parallel attn")
    parts.append("tied" if m["tied_embeddings"] else "untied")
    return " ".join(parts)


def short_source(source: str | None) -> str:
    """'https://huggingface.co/org/name/blob/main/config.json; paper' -> 'hf:org/name'."""
    import re

    first = (source or "").split(";")[0].strip()
    first = re.sub(r"https://huggingface\.co/([^/]+/[^/]+)/.*", r"hf:\1", first)
    first = re.sub(r"\s*\(arXiv:[^)]*\)", "", first)
    return first.split(": ")[0]


def bar(fraction: float, width: int = 24) -> str:
    """A horizontal bar of `fraction` (0..1) of `width` cells, eighth-block resolution."""
    eighths = max(0, min(width * 8, round(fraction * width * 8)))
    full, part = divmod(eighths, 8)
    return "█" * full + ("▏▎▍▌▋▊▉"[part - 1] if part else "")


def fmt_flops(n: int | float) -> str:
    return fmt_rate(float(n), "FLOP")


def num(x: float) -> str:
    """4 significant digits without exponents for table cells: 10180 -> '10,180', 4.443 -> '4.443'."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def fmt_s(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


def checkpoint_table(ck: Any) -> Any:
    """What a checkpoint stores (its headers), per component and per dtype, beside the config
    (a typed `results.common.CheckpointSection`)."""
    from rich.console import Group
    from rich.text import Text

    if not ck.available:
        return Text(f"checkpoint: stored bytes unknown ({ck.note})", style="dim")
    t = styled_table(f"Checkpoint: {ck.source} ({ck.format}, {ck.files} file{'s' if ck.files != 1 else ''}, "
                     f"{ck.tensors:,} tensors)", "component", "params", "config's", "bytes", "scales")
    for comp, row in ck.by_component.items():
        t.add_row(comp, f"{row.params:,}", f"{row.expected_params:,}", fmt_bytes(row.bytes),
                  fmt_bytes(row.scale_bytes) if row.scale_bytes else "")
    t.add_section()
    t.add_row("total", f"{ck.params:,}", f"{ck.expected_params:,}", fmt_bytes(ck.stored_bytes - ck.scale_bytes),
              fmt_bytes(ck.scale_bytes) if ck.scale_bytes else "", style="bold")
    dtypes = ", ".join(f"{name} {fmt_bytes(row.bytes)}" for name, row in ck.by_dtype.items())
    lines = [f"stored: {fmt_bytes(ck.stored_bytes)} ({ck.stored_bytes:,} B) in {dtypes}"
             + (f"; quantization {ck.quantization}" if ck.quantization else "")]
    if ck.resident_bytes != ck.stored_bytes:
        lines.append(f"loaded for serving: {fmt_bytes(ck.resident_bytes)} (MTP modules left out)")
    for comp, u in ck.unaccounted.items():
        sign = "more" if u.params > 0 else "fewer"
        lines.append(f"{comp}: the checkpoint stores {abs(u.params):,} {sign} parameters than the config accounts for"
                     + (f" (e.g. {', '.join(u.examples)})" if u.examples else ""))
    if ck.note:
        lines.append(ck.note)
    return Group(t, Text("\n".join(lines)))


def assumed_text(assumptions: Any) -> str:
    """The header's lines of what an answer assumed (results.common.Assumptions): one per default,
    `option value: source`; empty when every option was given."""
    defaults = getattr(assumptions, "defaults", None) or []
    if not defaults:
        return ""

    def shown(value: Any) -> str:
        if isinstance(value, bool):
            return "on" if value else "off"
        return f"{value:,}" if isinstance(value, int) else str(value)

    return "\n".join(["assumed (not given; -f json: assumptions.defaults):"]
                     + [f"  {d.option} = {shown(d.value)}: {d.source}" for d in defaults])


def with_assumed(r: Any, *parts: Any) -> Any:
    """A result's renderables under the header of the defaults it assumed (`assumed_text`)."""
    from rich.console import Group
    from rich.text import Text

    header = assumed_text(r.assumptions)
    if not header:
        return Group(*parts)
    from rich.table import Table

    # each default's source wraps under itself, not under the option (issue 38: at 80 columns the
    # wrapped sources started at column 0, among the option names)
    first, *rows = header.splitlines()
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for row in rows:
        option, _, source = row.strip().partition(": ")
        grid.add_row(f"  {option}:", source, style="dim")
    return Group(Text(first, style="dim"), grid, *parts)


def help_names_wrap() -> None:
    """`--help`'s option names may wrap at their commas (typer joins "--micro-batch,--B,--batch-size"
    with no space: one word, cut to "--micro-batch,--B,--batch-s…" at 80 columns, issue 38). Typer
    highlights each joined list with rich_utils.highlighter; this one adds the space first. Only
    names lists hold ",--"; an older or newer typer without the hook keeps its own rendering."""
    try:
        import typer.rich_utils as ru
    except ImportError:  # pragma: no cover - typer without rich
        return
    for name in ("highlighter", "negative_highlighter"):  # the switches' names, and their --no- halves
        base = getattr(ru, name, None)
        if base is None or getattr(base, "tcalc_wraps", False):
            continue

        class Wrapping(type(base)):  # type: ignore[misc]
            tcalc_wraps = True

            def __call__(self, text: Any) -> Any:
                if isinstance(text, str):
                    text = text.replace(",--", ", --")
                out = super().__call__(text)
                out.overflow = "fold"  # a long flag folds onto the next line instead of ending in "…"
                return out

        setattr(ru, name, Wrapping())
