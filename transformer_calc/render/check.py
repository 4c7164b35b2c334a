"""`tcalc check` as lines: PASS / FAIL / INVALID per file."""

from __future__ import annotations

from typing import Any

from transformer_calc.render.common import fmt_bytes

SERVING_CHECKS = {"inference_min_tokens_per_s": "decode tokens/s", "inference_max_ttft_s": "time to first token (s)",
                  "inference_max_tpot_s": "time per output token (s)"}


def check_lines(report: Any) -> str:
    """`tcalc check`: one plain line per file (greppable in CI logs), then a summary line, of a
    `results.check.CheckResult`."""
    lines = []
    for r in report.files:
        if r.status == "invalid":
            error = r.error.removeprefix(f"{r.file}: ").removeprefix(f"{r.file} ")
            lines.append(f"INVALID {r.file}: {error}")
            continue
        parts = []
        for c in r.checks:
            name = c.check
            if name in SERVING_CHECKS:
                higher = name.endswith("tokens_per_s")
                verb = (">=" if c.ok else "<") if higher else ("<=" if c.ok else ">")
                parts.append(f"{SERVING_CHECKS[name]} {c.value:.4g} {verb} {c.limit:g}")
                continue
            value = fmt_bytes(c.value)
            if name.endswith("_fits_gpu"):
                verb = "fits" if c.ok else "exceeds"
                parts.append(f"{name.split('_')[0]} {value}/GPU {verb} {c.gpu} ({fmt_bytes(c.limit)})")
            elif c.limit is not None:
                verb = "<=" if c.ok else ">"
                parts.append(f"{name.replace('_', ' ')} {value} {verb} {fmt_bytes(c.limit)}")
            else:
                parts.append(f"{name.replace('_', ' ')} {value}/GPU")
        detail = "; ".join(parts) if parts else "valid"
        lines.append(f"{r.status.upper():5} {r.file}: {detail}")
    lines.append(f"{report.passed} passed, {report.failed} failed, {report.invalid} invalid")
    return "\n".join(lines) + "\n"
