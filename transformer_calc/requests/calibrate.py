"""`tcalc calibrate RUNS_FILE...` (issue 37): the user's measured runs, which constants to fit and
where the profile goes; and the `--profile FILE` option every time command shares."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from transformer_calc.requests.base import ProfileOpt, Request, opt, paths  # noqa: F401  (ProfileOpt: its old home)


class CalibrateRequest(Request):
    """`tcalc calibrate RUNS_FILE...`: fit the time profile's free constants to measured runs."""

    command = "calibrate"
    files: Annotated[list[Path], opt(help="Runs files (YAML, or CSV by suffix): each run's model, GPU, layout and measured step time or tokens/s (training), or TTFT/TPOT/throughput (serving), or a `log:` naming a Megatron, torchtitan, vllm bench serve or trtllm-bench log.", metavar="RUNS_FILE", parse=paths, job=False, repeat=True)]
    fit: Annotated[str | None, opt("--fit", help="The constants to fit, comma-separated: gemm_efficiency_bf16|fp8|fp4|fp32, exposed_comm_factor, step_overhead_s, gpu_time_factor, request_overhead_s \\[default: auto: the GEMM efficiency of each dtype the runs use; the overhead and the communication factor when the runs outnumber the constants by 3].", job=False)] = None
    output: Annotated[Path | None, opt("--output", "-o", help="Write the fitted profile (YAML) here, for --profile FILE of every time command \\[default: not written].", job=False, api=False)] = None
