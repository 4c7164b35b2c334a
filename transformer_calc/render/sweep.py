"""`tcalc sweep` as a table, CSV or streamed JSON, and its plot."""

from __future__ import annotations

from transformer_calc.errors import TcalcError

import json
import sys
from typing import Any

from transformer_calc.render.common import csv_cell, fmt_bytes, fmt_flops, fmt_s, styled_table


TABLE_MAX_ROWS = 200  # a terminal table of 10,000 rows helps nobody and takes rich seconds


_SWEEP_FORMATS: dict[str, Any] = {
    **{m: fmt_bytes for m in ("peak_bytes", "weights_bytes", "activations_bytes", "headroom_bytes", "kv_cache_bytes",
                              "inference_memory_bytes")},
    "model_flops": fmt_flops, "hardware_flops": fmt_flops,
    **{m: (lambda x: fmt_s(x)) for m in ("time_to_first_token_s", "time_per_output_token_s", "total_s")},
    "tokens_per_s": lambda x: f"{x:,.0f}", "decode_tokens_per_s": lambda x: f"{x:,.0f}",
    "train_days": lambda x: f"{x:.2f}",
}  # fmt: skip


def sweep_table(report: Any) -> Any:
    """One row per point (a SweepResult); axes with a single value are shown once in the title
    instead. `shown_of` (when the result holds only the first rows) is how many points were kept."""
    from rich.console import Group
    from rich.text import Text

    rows = report.points
    kept = len(rows) if report.shown_of is None else report.shown_of
    axes = {a: v for a, v in report.axes if v is not None}
    varying = [a for a, v in axes.items() if len(v) > 1]
    fixed = {a: v[0] for a, v in axes.items() if len(v) == 1}
    title = "Sweep: " + (", ".join(f"{k}={csv_cell(v)}" for k, v in fixed.items()) or "all axes vary")
    t = styled_table(title, *varying, *report.metrics)
    for r in rows[:TABLE_MAX_ROWS]:
        cells = [str(r.get(a)) for a in varying]
        for m in report.metrics:
            value = r.get(m)
            fmt = _SWEEP_FORMATS.get(m)
            cells.append("-" if value is None else (fmt(value) if fmt else str(value)))
        t.add_row(*cells)
    shown = min(len(rows), TABLE_MAX_ROWS)
    foot = f"{shown} of {report.points_total} points shown"
    if kept > shown:
        foot += f" (the table stops at {TABLE_MAX_ROWS}: use --sort/--limit, or --format csv|json for all {kept})"
    if report.skipped:
        foot += f"; {report.skipped} skipped (the model cannot run them), e.g. {report.skipped_reasons[0]}"
    return Group(t, Text(foot, style="dim"))


def sweep_csv(columns: tuple[str, ...] | list[str], rows: Any) -> Any:
    """CSV text of sweep rows, piece by piece (a generator): the header, then the rows as they
    come. Cells as `to_csv` writes them (booleans lowercase, None empty)."""
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    n = 0
    for row in rows:  # csv_cell inlined (one call per row, not per cell): `is True` is a bool's test
        writer.writerow(["true" if v is True else "false" if v is False else "" if v is None else v
                         for v in map(row.__getitem__, columns)])
        n += 1
        if n % 512 == 0:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()


def sweep_json(head: dict[str, Any], rows: Any, tail: Any) -> Any:
    """Exactly `to_json({**head, "points": rows, **tail()})`, piece by piece (a generator): the
    points are written as they come, and `tail()` is called after the last one."""

    def item(key: str, value: Any) -> str:
        return f"  {json.dumps(key)}: " + json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ")

    yield "{\n" + "".join(item(k, v) + ",\n" for k, v in head.items()) + '  "points": ['
    pieces, n = [], 0
    for row in rows:
        pieces.append(("\n    " if n == 0 else ",\n    ")
                      + json.dumps(row, indent=2, ensure_ascii=False).replace("\n", "\n    "))
        n += 1
        if n % 512 == 0:
            yield "".join(pieces)
            pieces = []
    yield "".join(pieces) + ("\n  ]" if n else "]")
    yield "".join(",\n" + item(k, v) for k, v in tail().items()) + "\n}\n"


_PLOT_UNITS: dict[str, tuple[float, str]] = {
    **{m: (2**30, "GiB") for m in ("peak_bytes", "weights_bytes", "activations_bytes", "headroom_bytes",
                                   "kv_cache_bytes", "inference_memory_bytes")},
    "model_flops": (1e12, "TFLOP"), "hardware_flops": (1e12, "TFLOP"),
    **{m: (1e-3, "ms") for m in ("time_to_first_token_s", "time_per_output_token_s", "total_s")},
    "tokens_per_s": (1.0, "tokens/s"), "decode_tokens_per_s": (1.0, "tokens/s"), "train_days": (1.0, "days"),
}  # fmt: skip


def plot_sweep(report: Any, path: str, x: str, y: str, series: str | None, capacity: int | None) -> None:
    """A line per series value of y against x; a dashed capacity line for memory metrics.

    Needs matplotlib (`pip install 'transformer-calc[plot]'`); the format follows the file suffix
    (png, svg, pdf).
    """

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TcalcError("--plot needs matplotlib: pip install 'transformer-calc[plot]'") from None
    scale, unit = _PLOT_UNITS.get(y, (1.0, ""))
    groups: dict[Any, list[tuple[Any, float]]] = {}
    for r in report.points:
        if r.get(y) is None or isinstance(r.get(y), (bool, str)):
            continue
        groups.setdefault(r.get(series) if series else None, []).append((r[x], r[y] / scale))
    if not groups:
        raise TcalcError(f"--plot: no numeric values of {y} to plot")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, pts in groups.items():
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{series}={key}" if series else y)
    if capacity and unit == "GiB":
        ax.axhline(capacity / scale, color="red", linestyle="--", label="GPU capacity")
    numeric_x = all(isinstance(p[0], (int, float)) and not isinstance(p[0], bool) for pts in groups.values() for p in pts)
    if numeric_x and len({p[0] for pts in groups.values() for p in pts}) > 2:
        xs = [p[0] for pts in groups.values() for p in pts]
        if min(xs) > 0 and max(xs) / min(xs) >= 8:
            ax.set_xscale("log", base=2)
    ax.set_xlabel(x)
    ax.set_ylabel(f"{y} ({unit})" if unit else y)
    ax.set_title(f"tcalc sweep: {y} vs {x}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    try:
        fig.savefig(path)
    except TcalcError:
        raise
    except (OSError, ValueError) as exc:
        raise TcalcError(f"--plot {path!r}: cannot write the figure ({exc})") from None
    finally:
        plt.close(fig)


class SweepProgress:
    """A rich progress bar on stderr (a terminal only) once a sweep is predicted to run longer
    than a second; the callback gets the number of points done."""

    def __init__(self, total: int) -> None:
        import time

        self.total, self.started = total, time.perf_counter()
        self.bar: tuple[Any, Any] | None = None  # the rich Progress and its task, once shown

    def __enter__(self) -> Any:
        return self.update

    def update(self, done: int) -> None:
        import time

        if self.bar is not None:
            bar, task = self.bar
            bar.update(task, completed=done)
        elif done and (time.perf_counter() - self.started) * self.total / done > 1.0 and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import Progress

            bar = Progress(transient=True, console=Console(stderr=True))
            bar.start()
            self.bar = bar, bar.add_task("sweep", total=self.total, completed=done)

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar[0].stop()
