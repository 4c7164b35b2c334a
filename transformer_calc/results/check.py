"""`tcalc check`: job files validated and checked against memory and latency limits.

The typed result (`CheckResult`) is the command's JSON (`model_dump(mode="json")`), the Python
API's return value and what render reads; docs/cli.md documents its keys. Each file is one row
(checked, or invalid), each of its checks one row of three kinds: memory per GPU against a GPU,
memory per GPU against a byte limit, a serving figure against a limit.
"""

from __future__ import annotations

from transformer_calc.errors import TcalcError

from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import Field

from transformer_calc.model.config import ModelConfig
from transformer_calc.results.base import Result, Section
from transformer_calc.requests.inference import inference_efficiency, inference_spec, serving_spec

if TYPE_CHECKING:
    from transformer_calc.requests.catalog import CheckRequest


class GpuFitCheck(Section):
    """Memory per GPU against a GPU's capacity."""

    check: Literal["training_fits_gpu", "inference_fits_gpu"]
    ok: bool
    value: int  # bytes per GPU: the training step's peak, or the inference memory
    limit: int  # bytes: usable (less the CUDA context) for training, the capacity for inference
    gpu: str


class MemoryLimitCheck(Section):
    """Memory per GPU against max_memory, or reported without a limit (training_memory)."""

    check: Literal["training_max_memory", "inference_max_memory", "training_memory"]
    ok: bool
    value: int  # bytes per GPU
    limit: int | None  # bytes; None: no limit asked (training_memory, always ok)


ServingCheckName = Literal["inference_min_tokens_per_s", "inference_max_ttft_s", "inference_max_tpot_s"]


class ServingCheck(Section):
    """Throughput or latency of one replica at B in flight (tcalc serve's model) against a limit."""

    check: ServingCheckName
    ok: bool
    value: float  # output tokens/s, or seconds
    limit: int | float  # as given (a whole number stays one in the JSON)


Check = Annotated[Union[GpuFitCheck, MemoryLimitCheck, ServingCheck], Field(discriminator="check")]


class CheckedFile(Section):
    """A valid job file and its checks."""

    file: str
    model: str | None  # the model's name (None: a custom model)
    status: Literal["pass", "fail"]  # fail: a check is not ok
    checks: list[Check]


class InvalidFile(Section):
    """A job file that could not be checked."""

    file: str
    status: Literal["invalid"]
    error: str  # one line, naming the file
    checks: list[Check]  # always empty


FileRow = Annotated[Union[CheckedFile, InvalidFile], Field(discriminator="status")]


class CheckResult(Result):
    files: list[FileRow]
    passed: int
    failed: int
    invalid: int


def check_job(
    path: Any, gpu_name: str | None = None, max_memory: int | None = None, min_tokens_per_s: float | None = None,
    max_ttft_s: float | None = None, max_tpot_s: float | None = None,
) -> CheckedFile:
    """`tcalc check`: validate one job file and run the checks it (or the flags) ask for.

    Training memory is checked when the file has a training: section, or when a limit is asked
    for and the file has no inference: section (a model file: defaults S = max_seq_len, B = 1).
    Inference memory is checked when the file has an inference: section, with its output
    throughput (the flag, else checks.min_tokens_per_s), time to first token (the flag, else
    checks.max_ttft_s) and time per output token (the flag, else checks.max_tpot_s), all on `tcalc serve`'s model: one replica keeping
    B sequences in flight under continuous batching, at the expected rates (serving.load_point).
    Limits: the GPU's capacity (flag, then checks.gpu, then the section's gpu) and max_memory
    (flag, then checks.max_memory). Raises TcalcError for an invalid file.
    """
    from transformer_calc.model.config import build_model
    from transformer_calc.sources.presets import load_job

    from transformer_calc.requests.base import checked_job
    from transformer_calc.requests.catalog import CheckRequest
    from transformer_calc.requests.inference import InferenceRequest, ServeRequest
    from transformer_calc.requests.training import MemoryRequest

    # positional files: messages name the path alone; each section's values are read as the flags
    # of the commands that read it are (a job file `tcalc serve` refuses is refused here too)
    job = checked_job(load_job(path, flag=None), MemoryRequest, InferenceRequest, ServeRequest, CheckRequest,
                      where=str(path))
    where = f"{path}"
    model = build_model(job.model, where=f"{where} model")
    max_memory = _max_memory(job, where, max_memory)
    flags = {"min_tokens_per_s": min_tokens_per_s, "max_ttft_s": max_ttft_s, "max_tpot_s": max_tpot_s}
    _require_inference_section(job, where, flags)
    checks: list[GpuFitCheck | MemoryLimitCheck | ServingCheck] = []
    want_training = "training" in job.sections or (
        "inference" not in job.sections
        and (gpu_name is not None or job.checks.get("gpu") is not None or max_memory is not None)
    )
    if want_training:
        checks += _training_checks(model, job, where, gpu_name, max_memory)
    if "inference" in job.sections:
        checks += _inference_checks(model, job, where, gpu_name, max_memory, flags)
    return CheckedFile(file=str(path), model=model.name, status="pass" if all(c.ok for c in checks) else "fail",
                       checks=checks)


def _max_memory(job: Any, where: str, max_memory: int | None) -> int | None:
    """The memory limit: the flag, else the file's checks.max_memory (validated even when the flag overrides it)."""
    from transformer_calc.model.config import parse_bytes

    if job.checks.get("max_memory") is None:
        return max_memory
    try:
        file_limit = parse_bytes(job.checks["max_memory"], "checks.max_memory")
    except TcalcError:
        raise
    except ValueError as exc:
        raise TcalcError(f"{where}: {exc}") from None
    return file_limit if max_memory is None else max_memory


def _require_inference_section(job: Any, where: str, flags: dict[str, float | None]) -> None:
    """An inference check (flag or file) needs an inference: section to run on."""
    wants_inference_checks = [
        name for name, given in (
            ("--min-tokens-per-s", flags["min_tokens_per_s"] is not None),
            ("--max-ttft", flags["max_ttft_s"] is not None),
            ("--max-tpot", flags["max_tpot_s"] is not None),
            ("checks.min_tokens_per_s", job.checks.get("min_tokens_per_s") is not None),
            ("checks.max_ttft_s", job.checks.get("max_ttft_s") is not None),
            ("checks.max_tpot_s", job.checks.get("max_tpot_s") is not None),
        ) if given
    ]
    if wants_inference_checks and "inference" not in job.sections:
        raise TcalcError(
            f"{where}: {wants_inference_checks[0]} is an inference check, but the file has no inference: "
            "section to run it on; add one (B, S, new_tokens, gpu)"
        )


def _training_checks(model: Any, job: Any, where: str, gpu_name: str | None,
                     max_memory: int | None) -> list[GpuFitCheck | MemoryLimitCheck]:
    """The training step's peak against the GPU (where one is named) and the memory limit (where one is set)."""
    from transformer_calc.devices.hardware import check_fp8_recipe
    from transformer_calc.estimators.training.timeline import fit_capacity, peak_memory
    from transformer_calc.requests.training import memory_configs
    from transformer_calc.sources.presets import gpu as find_gpu

    checks: list[GpuFitCheck | MemoryLimitCheck] = []
    workload, training, parallelism, _, _ = memory_configs(model, job.training, {})  # memory's defaults
    section_gpu = job.training.get("gpu")  # a limit is checked only where one is given
    name = next((n for n in (gpu_name, job.checks.get("gpu"), section_gpu) if n is not None), None)
    total = peak_memory(model, workload, training, parallelism).peak_bytes  # the step's peak
    if name is not None:
        device = find_gpu(str(name))
        try:  # a recipe the GPU cannot run is an invalid file, as `tcalc memory` refuses it, not a FAIL
            check_fp8_recipe(training.fp8_recipe.value, device)
        except ValueError as exc:
            raise TcalcError(f"{where}: training: {exc}") from None
        usable = fit_capacity(device.memory_bytes)  # less the CUDA context
        checks.append(GpuFitCheck(check="training_fits_gpu", ok=total <= usable, value=total, limit=usable,
                                  gpu=device.name))
    if max_memory is not None:
        checks.append(MemoryLimitCheck(check="training_max_memory", ok=total <= max_memory, value=total,
                                       limit=max_memory))
    if not checks:
        checks.append(MemoryLimitCheck(check="training_memory", ok=True, value=total, limit=None))
    return checks


def _inference_checks(model: Any, job: Any, where: str, gpu_name: str | None, max_memory: int | None,
                      flags: dict[str, float | None]) -> list[GpuFitCheck | MemoryLimitCheck | ServingCheck]:
    """Inference memory against the GPU and the limit, then the serving limits on `tcalc serve`'s model."""
    from transformer_calc.estimators.inference.roofline import estimate_inference
    from transformer_calc.sources.presets import gpu as find_gpu

    checks: list[GpuFitCheck | MemoryLimitCheck | ServingCheck] = []
    spec, section_gpu = inference_spec(model, job.inference, {})
    device = find_gpu(str(next(n for n in (gpu_name, job.checks.get("gpu"), section_gpu) if n is not None)))
    est = estimate_inference(model, device, spec)
    total = est.memory.total_bytes
    checks.append(GpuFitCheck(check="inference_fits_gpu", ok=total <= device.memory_bytes, value=total,
                              limit=device.memory_bytes, gpu=device.name))
    if max_memory is not None:
        checks.append(MemoryLimitCheck(check="inference_max_memory", ok=total <= max_memory, value=total,
                                       limit=max_memory))
    wanted = [k for k in flags if flags[k] is not None or job.checks.get(k) is not None]
    if not wanted:
        return checks
    point = check_load_point(model, device, spec, job.inference)  # the serving model of `tcalc serve`, at B in flight
    serving: tuple[tuple[str, ServingCheckName, float, str], ...] = (
        ("min_tokens_per_s", "inference_min_tokens_per_s", point.output_tokens_per_s, "higher"),
        ("max_ttft_s", "inference_max_ttft_s", point.ttft_s, "lower"),
        ("max_tpot_s", "inference_max_tpot_s", point.tpot_s, "lower"),
    )
    for key, check, value, better in serving:
        limit = flags[key] if flags[key] is not None else job.checks.get(key)
        if limit is None:
            continue
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0:
            raise TcalcError(f"{where}: checks.{key} ({limit!r}) must be a positive number")
        ok = value >= limit if better == "higher" else value <= limit
        checks.append(ServingCheck(check=check, ok=ok, value=value, limit=limit))
    return checks


def check_report(
    files: list[Any], gpu_name: str | None = None, max_memory: str | int | None = None,
    min_tokens_per_s: float | None = None, max_ttft_s: float | None = None, max_tpot_s: float | None = None,
) -> CheckResult:
    """`tcalc check` over files: every file is checked (one invalid file hides no other's result),
    each PASS / FAIL / INVALID; the flags are validated once, as usage errors (TcalcError)."""
    from transformer_calc.model.config import parse_bytes
    from transformer_calc.sources.presets import gpu as find_gpu

    try:
        limit = parse_bytes(max_memory, "--max-memory") if max_memory is not None else None
    except TcalcError:
        raise
    except ValueError as exc:
        raise TcalcError(str(exc)) from None
    if gpu_name is not None:
        find_gpu(gpu_name)  # an unknown --gpu is a usage error for every file: say it once
    for flag, value in (("--min-tokens-per-s", min_tokens_per_s), ("--max-ttft", max_ttft_s), ("--max-tpot", max_tpot_s)):
        if value is not None and (isinstance(value, bool) or not 0 < value < float("inf")):
            raise TcalcError(f"{flag} ({value}) must be a positive number")
    results: list[CheckedFile | InvalidFile] = []
    for path in files:
        try:
            results.append(check_job(path, gpu_name, limit, min_tokens_per_s, max_ttft_s, max_tpot_s))
        except TcalcError as exc:
            results.append(InvalidFile(file=str(path), status="invalid", error=str(exc), checks=[]))
        except (ValueError, OverflowError, RecursionError) as exc:
            results.append(InvalidFile(file=str(path), status="invalid", error=f"{path}: {exc}", checks=[]))
    counts = {status: sum(r.status == status for r in results) for status in ("pass", "fail", "invalid")}
    return CheckResult(files=results, passed=counts["pass"], failed=counts["fail"], invalid=counts["invalid"])


def check_load_point(model: ModelConfig, device: Any, spec: Any, section: dict[str, Any]) -> Any:
    """`tcalc check`'s throughput and latency: one replica of T GPUs keeping B sequences in flight
    under continuous batching (serving.load_point, the model `tcalc serve` uses), at the expected
    rates of the inference: section."""
    from transformer_calc.estimators.inference.serving import load_point, with_bench_limits

    eff = inference_efficiency(device, section, {})
    serving = serving_spec(section, {}, device, spec.tensor_parallel)
    try:  # bench_batch_limits: trtllm-bench's limits for this model, GPU, T and request shape
        serving = with_bench_limits(serving, model, device, spec, spec.prompt_len, max(spec.new_tokens, 1))
    except ValueError as exc:
        raise TcalcError(f"inference: bench_batch_limits: {exc}") from None
    return load_point(model, device, spec, eff, serving, spec.prompt_len, max(spec.new_tokens, 1), spec.batch_size)


# ---------------------------------------------------------------------------- the command
def run_check(req: CheckRequest) -> CheckResult:
    return check_report(req.files, req.gpu, req.max_memory, req.min_tokens_per_s, req.max_ttft_s, req.max_tpot_s)
