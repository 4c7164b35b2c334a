"""The commands that price no model: `tcalc check` (job files against limits), `tcalc presets`,
`tcalc hardware`, `tcalc schema`; their requests and bodies."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from transformer_calc.requests.base import Request, opt, paths, positive


class CheckRequest(Request):
    """`tcalc check FILES`: every job file validated and checked; the flags override each file's checks:."""

    command = "check"
    common = ('files', 'gpu', 'max_memory')  # the options shown first (help, MCP schema)
    section = "checks"
    files: Annotated[list[Path], opt(help="Job files (YAML) to validate and check.", metavar="FILES", parse=paths, job=False,
                                     repeat=True)]
    gpu: Annotated[str | None, opt("--gpu", help="Memory must fit this GPU (overrides the files) \\[default: the files' checks.gpu or gpu].")] = None
    max_memory: Annotated[str | int | None, opt("--max-memory", help="Memory per GPU must not exceed this, e.g. 70GiB or 80GB \\[default: the files' checks.max_memory].")] = None
    min_tokens_per_s: Annotated[float | None, opt("--min-tokens-per-s", help="Inference decode throughput must reach this (tokens/s) \\[default: the files' checks.min_tokens_per_s].", parse=positive)] = None
    max_ttft_s: Annotated[float | None, opt("--max-ttft", help="Inference time to first token must not exceed this, seconds \\[default: the files' checks.max_ttft_s].", parse=positive)] = None
    max_tpot_s: Annotated[float | None, opt("--max-tpot", help="Inference time per output token must not exceed this, seconds \\[default: the files' checks.max_tpot_s].", parse=positive)] = None


class PresetsRequest(Request):
    """`tcalc presets`: no options."""

    command = "presets"


class HardwareRequest(Request):
    """`tcalc hardware [NAME]`: the accelerator table, or one accelerator in detail."""

    command = "hardware"
    name: Annotated[str | None, opt(help="One accelerator in detail, e.g. a100-80gb.", metavar="NAME", job=False)] = None


class SchemaRequest(Request):
    """`tcalc schema COMMAND`: the JSON Schema of a command's result."""

    command = "schema"
    name: Annotated[str, opt(help="A command with a result: params, memory, flops, mfu, inference, serve, train, plan, check, calibrate, presets, hardware, sweep.", metavar="COMMAND", job=False)]

