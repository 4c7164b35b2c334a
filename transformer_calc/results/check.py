"""`tcalc check`: job files validated and checked against memory and latency limits.

A result is composed here from the estimators; docs/cli.md documents its keys."""

from __future__ import annotations


from transformer_calc.results.base import Result
from typing import Any
from transformer_calc.model.config import LayerAttention, ModelConfig
from transformer_calc.estimators.params import (
    count_params,
    seed_block_approx,
    seed_total_approx,
    tensor_parallel_params,
)
from transformer_calc.results.inference import inference_efficiency, inference_spec, serving_spec


def check_job(
    path: Any, gpu_name: str | None = None, max_memory: int | None = None, min_tokens_per_s: float | None = None
) -> dict[str, Any]:
    """`tcalc check`: validate one job file and run the checks it (or the flags) ask for.

    Training memory is checked when the file has a training: section, or when a limit is asked
    for and the file has no inference: section (a model file: defaults S = max_seq_len, B = 1).
    Inference memory is checked when the file has an inference: section, with its output
    throughput (checks.min_tokens_per_s or the flag), time to first token (checks.max_ttft_s) and
    time per output token (checks.max_tpot_s), all on `tcalc serve`'s model: one replica keeping
    B sequences in flight under continuous batching, at the expected rates (serving.load_point).
    Limits: the GPU's capacity (flag, then checks.gpu, then the section's gpu) and max_memory
    (flag, then checks.max_memory). Raises TcalcError for an invalid file.
    """
    from transformer_calc.model.config import build_model, parse_bytes, training_configs
    from transformer_calc.sources.presets import gpu as find_gpu
    from transformer_calc.estimators.training.timeline import fit_capacity, peak_memory
    from transformer_calc.sources.presets import load_job

    job = load_job(path, flag=None)  # positional files: messages name the path alone
    where = f"{path}"
    model = build_model(job.model, where=f"{where} model")
    if job.checks.get("max_memory") is not None:  # validated even when the flag overrides it
        try:
            file_limit = parse_bytes(job.checks["max_memory"], "checks.max_memory")
        except ValueError as exc:
            from transformer_calc.errors import TcalcError

            raise TcalcError(f"{where}: {exc}") from None
        max_memory = file_limit if max_memory is None else max_memory
    checks: list[dict[str, Any]] = []
    wants_inference_checks = [
        name for name, given in (
            ("--min-tokens-per-s", min_tokens_per_s is not None),
            ("checks.min_tokens_per_s", job.checks.get("min_tokens_per_s") is not None),
            ("checks.max_ttft_s", job.checks.get("max_ttft_s") is not None),
            ("checks.max_tpot_s", job.checks.get("max_tpot_s") is not None),
        ) if given
    ]
    if wants_inference_checks and "inference" not in job.sections:
        from transformer_calc.errors import TcalcError

        raise TcalcError(
            f"{where}: {wants_inference_checks[0]} is an inference check, but the file has no inference: "
            "section to run it on; add one (B, S, new_tokens, gpu)"
        )
    want_training = "training" in job.sections or (
        "inference" not in job.sections
        and (gpu_name is not None or job.checks.get("gpu") is not None or max_memory is not None)
    )
    if want_training:
        workload, training, parallelism, section_gpu = training_configs(model, job.training, {})
        name = next((n for n in (gpu_name, job.checks.get("gpu"), section_gpu) if n is not None), None)
        total = peak_memory(model, workload, training, parallelism).peak_bytes  # the step's peak
        if name is not None:
            device = find_gpu(str(name))
            usable = fit_capacity(device.memory_bytes)  # less the CUDA context
            checks.append(
                {"check": "training_fits_gpu", "ok": total <= usable, "value": total,
                 "limit": usable, "gpu": device.name}
            )
        if max_memory is not None:
            checks.append({"check": "training_max_memory", "ok": total <= max_memory, "value": total, "limit": max_memory})
        if not checks:
            checks.append({"check": "training_memory", "ok": True, "value": total, "limit": None})
    if "inference" in job.sections:
        from transformer_calc.estimators.inference.roofline import estimate_inference

        spec, section_gpu = inference_spec(model, job.inference, {})
        device = find_gpu(str(next(n for n in (gpu_name, job.checks.get("gpu"), section_gpu) if n is not None)))
        est = estimate_inference(model, device, spec)
        total = est.memory.total_bytes
        checks.append({"check": "inference_fits_gpu", "ok": total <= device.memory_bytes, "value": total,
                       "limit": device.memory_bytes, "gpu": device.name})
        if max_memory is not None:
            checks.append({"check": "inference_max_memory", "ok": total <= max_memory, "value": total, "limit": max_memory})
        point = None
        wanted = [k for k in ("min_tokens_per_s", "max_ttft_s", "max_tpot_s") if job.checks.get(k) is not None]
        if wanted or min_tokens_per_s is not None:  # the serving model of `tcalc serve`, at B in flight
            point = check_load_point(model, device, spec, job.inference)
        for key, value, better in (
            ("min_tokens_per_s", point.output_tokens_per_s if point else None, "higher"),
            ("max_ttft_s", point.ttft_s if point else None, "lower"),
            ("max_tpot_s", point.tpot_s if point else None, "lower"),
        ):
            limit = job.checks.get(key) if min_tokens_per_s is None or key != "min_tokens_per_s" else min_tokens_per_s
            if limit is None:
                continue
            if isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0:
                from transformer_calc.errors import TcalcError

                raise TcalcError(f"{where}: checks.{key} ({limit!r}) must be a positive number")
            ok = value >= limit if better == "higher" else value <= limit
            checks.append({"check": f"inference_{key}", "ok": ok, "value": value, "limit": limit})
    return {
        "file": str(path),
        "model": model.name,
        "status": "pass" if all(c["ok"] for c in checks) else "fail",
        "checks": checks,
    }


def check_report(
    files: list[Any], gpu_name: str | None = None, max_memory: str | None = None,
    min_tokens_per_s: float | None = None,
) -> dict[str, Any]:
    """`tcalc check` over files: every file is checked (one invalid file hides no other's result),
    each PASS / FAIL / INVALID; the flags are validated once, as usage errors (TcalcError)."""
    from transformer_calc.model.config import parse_bytes
    from transformer_calc.errors import TcalcError
    from transformer_calc.sources.presets import gpu as find_gpu

    try:
        limit = parse_bytes(max_memory, "--max-memory") if max_memory is not None else None
    except ValueError as exc:
        raise TcalcError(str(exc)) from None
    if gpu_name is not None:
        find_gpu(gpu_name)  # an unknown --gpu is a usage error for every file: say it once
    if min_tokens_per_s is not None and not 0 < min_tokens_per_s < float("inf"):
        raise TcalcError(f"--min-tokens-per-s ({min_tokens_per_s}) must be a positive number")
    results = []
    for path in files:
        try:
            results.append(check_job(path, gpu_name, limit, min_tokens_per_s))
        except TcalcError as exc:
            results.append({"file": str(path), "status": "invalid", "error": str(exc), "checks": []})
        except (ValueError, OverflowError, RecursionError) as exc:
            results.append({"file": str(path), "status": "invalid", "error": f"{path}: {exc}", "checks": []})
    counts = {status: sum(r["status"] == status for r in results) for status in ("pass", "fail", "invalid")}
    return {"files": results, "passed": counts["pass"], "failed": counts["fail"], "invalid": counts["invalid"]}


def check_load_point(model: ModelConfig, device: Any, spec: Any, section: dict[str, Any]) -> Any:
    """`tcalc check`'s throughput and latency: one replica of T GPUs keeping B sequences in flight
    under continuous batching (serving.load_point, the model `tcalc serve` uses), at the expected
    rates of the inference: section."""
    from transformer_calc.estimators.inference.serving import load_point

    eff = inference_efficiency(device, section, {})
    serving = serving_spec(section, {})
    return load_point(model, device, spec, eff, serving, spec.prompt_len, max(spec.new_tokens, 1), spec.batch_size)


class CheckResult(Result):
    files: list[dict[str, Any]]
    passed: int
    failed: int
    invalid: int
