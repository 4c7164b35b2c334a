"""Compose estimators into report dictionaries: the one module that knows them all.

A report is a plain dict of JSON types with exact ints for counts, bytes and FLOPs and base units
only (bytes, FLOPs, seconds). The JSON/YAML output is the dict itself; `render` turns it into
tables. Keys are documented in docs/cli.md and kept stable.
"""

from __future__ import annotations

from typing import Any

from transformer_calc.config import LayerAttention, ModelConfig
from transformer_calc.params import (
    count_params,
    seed_block_approx,
    seed_total_approx,
    tensor_parallel_params,
)


def model_dict(m: ModelConfig) -> dict[str, Any]:
    """The resolved model (every default filled in), plus derived flags."""
    d = m.model_dump(mode="json")
    d["gated_mlp"] = m.gated_mlp
    return d


def params_report(m: ModelConfig, bytes_per_param: int = 2, T: int = 1, dtype: str | None = None) -> dict[str, Any]:
    """`tcalc params`: exact count with breakdown, the seed's approximations, weight bytes."""
    counts = count_params(m)
    total = counts.total
    approx_blocks, approx_total = seed_block_approx(m), seed_total_approx(m)
    per_rank = tensor_parallel_params(m, T) if T > 1 else total
    return {
        "model": model_dict(m),
        "params": counts.as_dict(),
        "approximations": {
            "seed_blocks": approx_blocks,
            "seed_blocks_rel_error": (approx_blocks - total) / total,
            "seed_total": approx_total,
            "seed_total_rel_error": (approx_total - total) / total,
        },
        "weights": {
            "dtype": dtype or {4: "fp32", 2: "bf16", 1: "fp8"}.get(bytes_per_param),
            "bytes_per_param": bytes_per_param,
            "bytes": total * bytes_per_param,
            "tensor_parallel": T,
            "params_per_rank": per_rank,
            "bytes_per_rank": per_rank * bytes_per_param,
        },
    }


def expected_component_params(m: ModelConfig) -> dict[str, int]:
    """The parameters the model config accounts for, by checkpoint component
    (checkpoint.COMPONENTS): what a checkpoint of this config should store."""
    c = count_params(m)
    n_moe, n_dense = c.n_moe_layers, c.n_dense_layers

    def layers(field: str) -> int:
        return n_moe * getattr(c.layer, field) + n_dense * getattr(c.dense_layer, field)

    routed = n_moe * (c.layer.mlp_weights + c.layer.mlp_bias) if m.is_moe else 0
    return {
        "embedding": c.embedding + c.position + c.embedding_projection // 2 + c.embedding_norm,
        "attention": n_moe * c.layer.attention + n_dense * c.dense_layer.attention,
        "mlp": layers("mlp_weights") + layers("mlp_bias") + layers("shared_expert") - routed,
        "experts": routed,
        "router": layers("router"),
        "norms": layers("norms") + c.final_norm,
        "head": c.lm_head + c.lm_head_bias + c.embedding_projection // 2,
        "towers": 0,
        "mtp": c.mtp,
        "other": 0,
    }


def with_checkpoint_weights(m: ModelConfig, tr: Any, ckpt: Any) -> Any:
    """Training settings whose frozen weights (LoRA, DoRA) are held as the checkpoint stores them:
    transformers loads an FP8/GPTQ/AWQ checkpoint without dequantizing it, and PEFT adapts it as it
    is. Full training (weights in the training precision) and QLoRA (NF4 from bitsandbytes) keep
    their own weight bytes."""
    if ckpt is None or tr.finetune.value not in ("lora", "dora"):
        return tr
    from transformer_calc.checkpoint import stored_weights

    sw = stored_weights(ckpt)
    language_model = sw.embedding_bytes + sw.experts_bytes + sw.rest_bytes
    return tr.model_copy(update={"frozen_weights": (language_model, count_params(m).total)})


def checkpoint_dict(m: ModelConfig, ckpt: Any, note: str | None) -> dict[str, Any]:
    """The `checkpoint` section: what the checkpoint stores, per dtype and per component, beside
    what the config accounts for; parameters the config does not account for are listed, not
    dropped."""
    from transformer_calc.checkpoint import COMPONENTS, stored_weights

    if ckpt is None:
        return {"available": False, "note": note}
    expected = expected_component_params(m)
    stored = ckpt.by_component()
    rows: dict[str, Any] = {}
    for comp in COMPONENTS:
        got = stored.get(comp, {"params": 0, "bytes": 0, "scale_bytes": 0, "tensors": 0})
        if not got["tensors"] and not expected[comp]:
            continue
        rows[comp] = {
            "tensors": got["tensors"],
            "params": got["params"],
            "expected_params": expected[comp],
            "bytes": got["bytes"],
            "scale_bytes": got["scale_bytes"],
        }
    unaccounted = {comp: r["params"] - r["expected_params"] for comp, r in rows.items() if r["params"] != r["expected_params"]}
    examples = {
        comp: [t.name for t in ckpt.tensors if t.component == comp][:3] for comp in unaccounted if rows[comp]["tensors"]
    }
    sw = stored_weights(ckpt)
    return {
        "available": True,
        "format": ckpt.format,
        "source": ckpt.source,
        "quantization": ckpt.quantization,
        "files": ckpt.files,
        "tensors": len(ckpt.tensors),
        "stored_bytes": ckpt.total_bytes,
        "scale_bytes": sum(r["scale_bytes"] for r in rows.values()),
        "file_bytes": ckpt.file_bytes,
        "resident_bytes": sw.resident_bytes,
        "params": ckpt.params,
        "expected_params": sum(expected.values()),
        "unaccounted_params": ckpt.params - sum(expected.values()),
        "compute_dtype": sw.compute_dtype,
        "by_dtype": ckpt.by_dtype(),
        "by_component": rows,
        "unaccounted": {comp: {"params": n, "examples": examples.get(comp, [])} for comp, n in unaccounted.items()},
        "note": note,
    }


def presets_report() -> list[dict[str, Any]]:
    """`tcalc presets`: every model preset with its key numbers and source."""
    from transformer_calc.presets import model_presets, preset_model

    rows = []
    for name, entry in model_presets().items():
        m = preset_model(name)
        rows.append(
            {
                "name": name,
                "family": entry.get("family"),
                "aliases": list(entry.get("aliases", [])),
                "params": count_params(m).total,
                "n_layers": m.n_layers,
                "d_model": m.d_model,
                "n_heads": m.n_heads,
                "n_kv_heads": m.n_kv_heads,
                "d_ff": m.d_ff,
                "vocab_size": m.vocab_size,
                "max_seq_len": m.max_seq_len,
                "mlp": m.mlp.value,
                "n_experts": m.n_experts,
                "source": entry.get("source"),
            }
        )
    return rows


def gpu_dict(gpu: Any) -> dict[str, Any]:
    """One accelerator as a report row; λ_math derived per dtype."""
    from transformer_calc.hardware import host_bandwidth, math_bandwidth

    peaks = dict(gpu.peak_flops)
    return {
        "name": gpu.name,
        "aliases": list(gpu.aliases),
        "vendor": gpu.vendor,
        "memory_bytes": gpu.memory_bytes,
        "memory_bw_bytes_s": gpu.memory_bw_bytes_s,
        "peak_flops": peaks,
        "math_bandwidth": {dt: math_bandwidth(gpu, dt) for dt in peaks},
        "interconnect": gpu.interconnect,
        "interconnect_bytes_s": gpu.interconnect_bytes_s,
        "pcie_bytes_s": gpu.pcie_bytes_s,
        "host_link": host_bandwidth(gpu)[0],
        "host_link_bytes_s": host_bandwidth(gpu)[1],
        "source": gpu.source,
        "verified": gpu.verified,
        "notes": gpu.notes,
    }


def hardware_report() -> list[dict[str, Any]]:
    """`tcalc hardware`: every accelerator with capacity, bandwidth, dense peaks, λ_math."""
    from transformer_calc.presets import hardware_table

    return [gpu_dict(gpu) for gpu in hardware_table().values()]


def gpu_report(name: str) -> dict[str, Any]:
    """`tcalc hardware NAME`: one accelerator, looked up by name or alias (did-you-mean)."""
    from transformer_calc.presets import gpu

    return gpu_dict(gpu(name))


def memory_report(
    m: ModelConfig,
    w: Any,
    tr: Any,
    par: Any,
    gpu: Any | None = None,
) -> dict[str, Any]:
    """`tcalc memory`: training memory per GPU of the most loaded pipeline stage, with fitting."""
    from transformer_calc.memory import b_min, optimizer_bytes_per_param
    from transformer_calc.timeline import (
        CUDA_CONTEXT_BYTES,
        allocator_reserve,
        fit_capacity,
        max_micro_batch,
        min_parallelism,
        stage_timelines,
    )

    from transformer_calc.finetune import trainable_params

    timelines = stage_timelines(m, w, tr, par)
    timeline = max(timelines, key=lambda tl: tl.peak_bytes)
    worst, peak = timeline.stage, timeline.peak
    non_act = worst.model_states
    reserve = allocator_reserve(peak.total)
    trainable = trainable_params(m, tr)
    report: dict[str, Any] = {
        "model": model_dict(m),
        "workload": w.model_dump(mode="json"),
        "training": tr.model_dump(mode="json"),
        "parallelism": {**par.model_dump(mode="json"), "gpus": par.gpus},
        "params": {"total": count_params(m).total, "per_gpu": worst.params,
                   "trainable": trainable.total, "trainable_per_gpu": worst.trainable_params},
        "memory": {
            "peak_bytes": peak.total,
            "peak_phase": peak.name,
            "peak": peak.as_dict(),
            "sum_bytes": timeline.sum_bytes,
            "cuda_context_bytes": CUDA_CONTEXT_BYTES,
            "allocator_reserve_bytes": reserve,
            "nvidia_smi_bytes": peak.total + CUDA_CONTEXT_BYTES + reserve,
            "phases": [ph.as_dict() for ph in timeline.phases],
            "per_gpu": {
                "weights_bytes": worst.weights,
                "gradients_bytes": worst.gradients,
                "optimizer_bytes": worst.optimizer,
                "activations_bytes": worst.activations,
                "total_bytes": worst.total,
            },
            "weights_detail": {  # fine-tuning: frozen base (of it NF4) and the trainable copy
                "frozen_bytes": worst.weights - worst.adapter_weights if tr.adapters else 0,
                "quantized_bytes": worst.quantized_weights,
                "trainable_bytes": worst.adapter_weights if tr.adapters else worst.weights - worst.fp8_weights,
                "fp8_copies_bytes": worst.fp8_weights,
            },
            "activations": {
                "attention_bytes": worst.attention,
                "mlp_bytes": worst.mlp,
                "norm_bytes": worst.norm,
                "other_bytes": worst.other,
                "recompute_working_bytes": worst.recompute_working,
            },
            "activation_ratio": worst.activations / non_act if non_act else None,
            "stage": worst.stage,
            "in_flight_micro_batches": worst.in_flight,
            "bytes_per_param": _bytes_per_param(tr),
            "optimizer_groups": _optimizer_groups(m, tr),
            "stages": [
                {
                    "stage": tl.stage.stage,
                    "n_layers": tl.stage.n_layers,
                    "params": tl.stage.params,
                    "model_states_bytes": tl.stage.model_states,
                    "activations_bytes": tl.stage.activations,
                    "total_bytes": tl.stage.total,
                    "peak_bytes": tl.peak_bytes,
                    "peak_phase": tl.peak.name,
                }
                for tl in timelines
            ],
        },
        "b_min": b_min(m, w.seq_len),
    }
    if tr.adapters:
        report["finetune"] = _finetune_section(m, tr, trainable)
    if tr.offload.value != "none":
        report["offload"] = _offload_section(tr, par, worst, peak.total)
    if gpu is not None:
        capacity = fit_capacity(gpu.memory_bytes)
        fit_T = min_parallelism(m, w, tr, par, capacity)
        fit_TP = min_parallelism(m, w, tr, par, capacity, vary_pipeline=True)
        report["gpu"] = {
            "name": gpu.name,
            "memory_bytes": gpu.memory_bytes,
            "usable_bytes": capacity,
            "headroom_bytes": capacity - peak.total,
        }
        report["fits"] = peak.total <= capacity
        report["fit"] = {
            "max_micro_batch": max_micro_batch(m, w, tr, par, capacity),
            "min_tensor_parallel": fit_T[0] if fit_T else None,
            "min_tensor_pipeline": {"T": fit_TP[0], "P": fit_TP[1]} if fit_TP else None,
        }
    return report


def _bytes_per_param(tr: Any) -> dict[str, Any]:
    """Bytes per parameter of each model state (per trainable parameter under adapters)."""
    from transformer_calc.finetune import NF4_BLOCK, NF4_BLOCKS_PER_GROUP, trainable_weight_bytes
    from transformer_calc.memory import optimizer_bytes_per_param, trainable_optimizer_bytes

    if not tr.adapters:
        return {"weights": tr.p, "gradients": tr.grad_bytes, "optimizer": optimizer_bytes_per_param(tr)}
    nf4_bits = 4 + 8 / NF4_BLOCK + 32 / (NF4_BLOCK * NF4_BLOCKS_PER_GROUP)
    return {
        "weights": 4 if tr.fp32_unquantized else tr.p,  # frozen parameters not quantized
        "quantized_weights": nf4_bits / 8 if tr.finetune.value == "qlora" else None,
        "trainable_weights": trainable_weight_bytes(tr),
        "gradients": tr.grad_bytes,
        "optimizer": trainable_optimizer_bytes(tr),
    }


def _optimizer_groups(m: ModelConfig, tr: Any) -> dict[str, Any]:
    """The optimizer's parameter groups over the whole model: state bytes per parameter each."""
    from transformer_calc.optimizers import master_bytes, model_groups

    groups = model_groups(m, tr)
    params = sum(g.params for g in groups)
    states = sum(g.state_bytes for g in groups)
    return {
        "optimizer": tr.optimizer.value,
        "master_bytes_per_param": master_bytes(tr),
        "groups": [g.as_dict() for g in groups],
        "state_bytes": states,
        "state_bytes_per_param": states / params if params else None,
        "paged": tr.optimizer.value == "paged-adamw-8bit",
    }


def _finetune_section(m: ModelConfig, tr: Any, trainable: Any) -> dict[str, Any]:
    total = count_params(m).total
    return {
        "method": tr.finetune.value,
        "lora_rank": tr.lora_rank,
        "lora_alpha": tr.lora_alpha,
        "lora_alpha_memory_effect": "none (alpha/r scales the adapter output; no tensor changes size)",
        "lora_targets": [t.value for t in tr.lora_targets],
        "adapted_modules": trainable.adapted_modules,
        "trainable_params": trainable.total,
        "adapter_params": trainable.adapters,
        "trainable_embedding_params": trainable.embedding,
        "trainable_head_params": trainable.head,
        "trainable_fraction": trainable.total / total,
        "frozen_params": total,
        "frozen_weight_format": "nf4 (double quantization)" if tr.finetune.value == "qlora" else (
            f"checkpoint ({8 * tr.frozen_weights[0] / tr.frozen_weights[1]:.4g} bits per parameter)"
            if tr.frozen_weights is not None else f"{tr.p}-byte"),
    }


GPUS_PER_NODE = 8  # an HGX/DGX node: host memory per node is per-GPU offload x min(8, GPUs)


def _offload_section(tr: Any, par: Any, st: Any, peak: int) -> dict[str, Any]:
    node = min(GPUS_PER_NODE, par.gpus)
    per_gpu = st.offloaded
    nvme = tr.offload_device.value == "nvme"
    return {
        "what": tr.offload.value,
        "device": tr.offload_device.value,
        "gpu_bytes": peak,
        "host_weights_bytes": st.host_weights,
        "host_gradients_bytes": st.host_gradients,
        "host_optimizer_bytes": st.host_optimizer,
        "host_bytes_per_gpu": 0 if nvme else per_gpu,
        "nvme_bytes_per_gpu": per_gpu if nvme else 0,
        "gpus_per_node": node,
        "host_bytes_per_node": 0 if nvme else per_gpu * node,
        "nvme_bytes_per_node": per_gpu * node if nvme else 0,
    }


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
    from transformer_calc.config import build_model, parse_bytes, training_configs
    from transformer_calc.presets import gpu as find_gpu
    from transformer_calc.timeline import fit_capacity, peak_memory
    from transformer_calc.presets import load_job

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
        from transformer_calc.inference import estimate_inference

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
    from transformer_calc.config import parse_bytes
    from transformer_calc.errors import TcalcError
    from transformer_calc.presets import gpu as find_gpu

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
    from transformer_calc.serving import load_point

    eff = inference_efficiency(device, section, {})
    serving = serving_spec(section, {})
    return load_point(model, device, spec, eff, serving, spec.prompt_len, max(spec.new_tokens, 1), spec.batch_size)


def peak_for(gpu: Any, dtype: str | None) -> tuple[str, Any]:
    """(dtype, dense peak FLOP/s): the asked dtype, else bf16, else fp16 (Volta, Turing)."""
    from transformer_calc.hardware import peak_flops

    from transformer_calc.hardware import peak_dtype

    dtype = peak_dtype(gpu, dtype)
    return dtype, peak_flops(gpu, dtype)


def flops_request(
    m: ModelConfig, section: dict[str, Any], *, S: int | None = None, B: int | None = None,
    recompute: str | None = None, causal: bool = False, windowed: bool = False, tokens: int | None = None,
    gpus: int | None = None, gpu_name: str | None = None, dtype: str | None = None, mfu: float | None = None,
    budget: int | None = None,
) -> dict[str, Any]:
    """`tcalc flops` from its options (flag, then the job file's training: section, then the
    default), validated with the flag each came from; the CLI and the Python API both call it."""
    from transformer_calc.config import Recompute, Workload, build, resolve
    from transformer_calc.errors import TcalcError
    from transformer_calc.presets import gpu as find_gpu

    o = resolve({"seq_len": S, "batch_size": B, "recompute": recompute}, section,
                {"seq_len": m.max_seq_len, "batch_size": 1, "recompute": "none"})
    workload = build(Workload, {"seq_len": o["seq_len"], "batch_size": o["batch_size"]}, "workload")
    try:
        rec = Recompute(o["recompute"])
    except ValueError:
        raise TcalcError(f"--recompute ({o['recompute']!r}): choose one of {', '.join(v.value for v in Recompute)}") from None
    if (gpus is not None or gpu_name is not None or mfu is not None) and tokens is None:
        raise TcalcError("--gpus, --gpu and --mfu estimate training time: give --tokens too, e.g. --tokens 300e9")
    if tokens is not None and (gpus is None) != (gpu_name is None):
        raise TcalcError("a training-time estimate needs both --gpus N and --gpu NAME")
    if mfu is not None and not 0 < mfu <= 1:
        raise TcalcError(f"--mfu ({mfu}) must be a fraction in (0, 1], e.g. 0.4 for 40 %")
    device = find_gpu(gpu_name) if gpu_name is not None else None
    return flops_report(
        m, workload, causal=causal, windowed=windowed, recompute=rec, tokens=tokens, gpus=gpus, gpu=device,
        dtype=dtype, mfu=(mfu if mfu is not None else 0.4) if device else None, budget=budget,
    )


def flops_report(
    m: ModelConfig,
    w: Any,
    causal: bool = False,
    recompute: Any = "none",
    tokens: int | None = None,
    windowed: bool = False,
    gpus: int | None = None,
    gpu: Any | None = None,
    dtype: str | None = None,
    mfu: float | None = None,
    budget: int | None = None,
) -> dict[str, Any]:
    """`tcalc flops`: model and hardware FLOPs per step, rules of thumb, training time, sizing."""
    import importlib

    F = importlib.import_module("transformer_calc.flops")

    step = F.count_flops(m, w, causal=causal, windowed=windowed)
    counts = count_params(m)
    report: dict[str, Any] = {
        "model": model_dict(m),
        "workload": w.model_dump(mode="json"),
        "conventions": {"causal": causal, "recompute": str(getattr(recompute, "value", recompute))},
        "flops": {**step.as_dict(), "hardware": step.hardware(recompute)},
        "rules_of_thumb": {
            "six_n_per_token": F.six_n_flops_per_token(m),
            "six_n_non_embedding_per_token": F.six_n_flops_per_token(m, include_embeddings=False),
            "palm_per_token": F.palm_flops_per_token(m, w.seq_len),
            "seed_total": F.seed_model_flops(m, w),
            "seed_total_with_lm_head": F.seed_model_flops(m, w, lm_head=True),
        },
        "compute_optimal": {"for_params": _optimal(F.chinchilla_for_params(counts.total))},
    }
    if budget is not None:
        report["compute_optimal"]["for_budget"] = {"budget": budget, **_optimal(F.chinchilla_for_flops(budget))}
    if tokens is not None:
        total = F.train_flops_for_tokens(m, w.seq_len, tokens, causal=causal)
        training: dict[str, Any] = {
            "tokens": tokens,
            "flops": total,
            "flops_six_n": F.train_flops_for_tokens(m, w.seq_len, tokens, exact=False),
        }
        if gpu is not None and gpus is not None and mfu is not None:
            used, peak = peak_for(gpu, dtype)
            seconds = F.training_time_s(total, gpus, peak, mfu)
            training.update(
                {
                    "gpus": gpus,
                    "gpu": gpu.name,
                    "dtype": used,
                    "peak_flops_per_gpu": peak,
                    "mfu": mfu,
                    "time_s": seconds,
                    "days": seconds / F.SECONDS_PER_DAY,
                    "gpu_hours": F.gpu_hours(seconds, gpus),
                }
            )
        report["training"] = training
    return report


def _optimal(c: Any) -> dict[str, int]:
    return {"params": c.params, "tokens": c.tokens, "flops": c.flops}


def mfu_request(
    m: ModelConfig, section: dict[str, Any], *, S: int | None = None, gpus: int = 1, gpu_name: str = "a100-80gb",
    dtype: str | None = None, global_batch: int | None = None, global_batch_tokens: int | None = None,
    step_time: float | None = None, tokens_per_s: float | None = None, recompute: str | None = None,
    causal: bool = False, hfu_convention: str = "executed",
) -> dict[str, Any]:
    """`tcalc mfu` from its options (a flag, then the job file's training: section, then the
    default), each validated with the flag it came from; the CLI and the Python API both call it."""
    import math

    from transformer_calc.config import Recompute, Workload, build, resolve
    from transformer_calc.errors import TcalcError
    from transformer_calc.presets import gpu as find_gpu

    o = resolve({"seq_len": S, "recompute": recompute}, section, {"seq_len": m.max_seq_len, "recompute": "none"})
    workload = build(Workload, {"seq_len": o["seq_len"]}, "workload")
    rec = o["recompute"]
    if global_batch_tokens is not None:
        if global_batch is not None:
            raise TcalcError("give the global batch once: --global-batch (sequences) or --global-batch-tokens, not both")
        if global_batch_tokens < workload.seq_len:
            raise TcalcError(f"--global-batch-tokens ({global_batch_tokens}) is less than one sequence of S = {workload.seq_len} tokens")
        global_batch = global_batch_tokens // workload.seq_len
    if tokens_per_s is None and (global_batch is None or step_time is None):
        raise TcalcError("give the measured speed: --tokens-per-s N, or --global-batch N and --step-time SECONDS")
    if tokens_per_s is not None and (global_batch is not None or step_time is not None):
        raise TcalcError("give --tokens-per-s or --global-batch with --step-time, not both")
    for name, value in (("--step-time", step_time), ("--tokens-per-s", tokens_per_s)):
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise TcalcError(f"{name} ({value}) must be a positive, finite number")
    if hfu_convention not in ("executed", "paper"):
        raise TcalcError(f"--hfu-convention ({str(hfu_convention)[:40]!r}) must be one of executed, paper")
    try:
        rec_kind = Recompute(rec)
    except ValueError:
        raise TcalcError(f"--recompute ({rec!r}): choose one of {', '.join(v.value for v in Recompute)}") from None
    return mfu_report(
        m, workload, gpus, find_gpu(gpu_name), dtype=dtype, global_batch=global_batch, step_time=step_time,
        tokens_per_s=tokens_per_s, recompute=rec_kind, causal=causal, hfu_convention=hfu_convention,
    )


def mfu_report(
    m: ModelConfig,
    w: Any,
    gpus: int,
    gpu: Any,
    dtype: str | None = None,
    global_batch: int | None = None,
    step_time: float | None = None,
    tokens_per_s: float | None = None,
    recompute: Any = "none",
    causal: bool = False,
    hfu_convention: str = "executed",
) -> dict[str, Any]:
    """`tcalc mfu`: MFU and HFU from a measured step time (with the global batch) or throughput."""
    import importlib

    F = importlib.import_module("transformer_calc.flops")

    step = F.count_flops(m, w.model_copy(update={"batch_size": 1}), causal=causal)
    per_token_model = step.total // step.tokens
    per_token_hw = step.hardware(recompute, hfu_convention) // step.tokens
    if tokens_per_s is None:
        if global_batch is None or step_time is None:
            raise ValueError("give --tokens-per-s, or --global-batch and --step-time")
        if step_time <= 0:
            raise ValueError(f"--step-time ({step_time}) must be positive seconds per step")
        tokens_per_s = global_batch * w.seq_len / step_time
    used, peak = peak_for(gpu, dtype)
    model_mfu = F.mfu_from_throughput(per_token_model, tokens_per_s, gpus, peak)
    hardware_fu = F.mfu_from_throughput(per_token_hw, tokens_per_s, gpus, peak)
    if hardware_fu > 1 or model_mfu > 1:  # impossible: more FLOP/s than the GPUs have
        from transformer_calc.errors import TcalcError

        cause = (
            "--global-batch counts sequences (give tokens with --global-batch-tokens)"
            if global_batch is not None else "--tokens-per-s is for all GPUs together"
        )
        import math

        shown = f"{100 * model_mfu:.0f} %" if math.isfinite(model_mfu) else "beyond any finite value"
        raise TcalcError(
            f"MFU would be {shown}, above 100 % of {gpus} x {gpu.name}'s "
            f"{used} peak: the inputs cannot be right; check --gpus, --step-time, and that {cause}"
        )
    out: dict[str, Any] = {
        "model": model_dict(m),
        "seq_len": w.seq_len,
        "gpus": gpus,
        "gpu": gpu.name,
        "dtype": used,
        "peak_flops_per_gpu": peak,
        "tokens_per_s": tokens_per_s,
        "mfu": model_mfu,
        "hfu": hardware_fu,
        "achieved_flops_per_gpu": model_mfu * peak,
        "achieved_hardware_flops_per_gpu": hardware_fu * peak,
        "flops": {
            "per_token": per_token_model,
            "hardware_per_token": per_token_hw,
            "recompute": str(getattr(recompute, "value", recompute)),
            "causal": causal,
            "hfu_convention": hfu_convention,
        },
    }
    if global_batch is not None and step_time is not None:
        out["global_batch"] = global_batch
        out["step_time_s"] = step_time
        out["flops"]["per_step"] = per_token_model * global_batch * w.seq_len
        out["flops"]["hardware_per_step"] = per_token_hw * global_batch * w.seq_len
    return out


def expected_dict(x: Any) -> dict[str, Any]:
    """The `expected` section: achievable-rate latency with its fixed costs, and its assumptions."""
    eff = x.efficiency

    def step(s: Any) -> dict[str, Any]:
        return {"compute_s": s.compute_s, "memory_s": s.memory_s, "roofline_s": s.roofline_s,
                "launch_s": s.launch_s, "communication_s": s.communication_s, "sampling_s": s.sampling_s,
                "time_s": s.time_s}

    return {
        "time_to_first_token_s": x.time_to_first_token_s,
        "time_per_output_token_s": x.time_per_output_token_s,
        "decode_s": x.decode_s,
        "total_s": x.total_s,
        "tokens_per_s": x.tokens_per_s,
        "decode_tokens_per_s": x.decode_tokens_per_s,
        "prefill": step(x.prefill),
        "decode_first_step": step(x.decode_first),
        "decode_last_step": step(x.decode_last),
        "assumptions": {
            **expected_dict_assumptions(eff),
            "kernels_per_step": x.kernels_per_step,
            "intra_node_latency_s": eff.network.intra_latency_s,
            "inter_node_latency_s": eff.network.inter_latency_s,
        },
    }


def inference_efficiency(gpu: Any, section: dict[str, Any], flags: dict[str, Any], network: Any = None) -> Any:
    """The expected-latency settings (expected.Efficiency) from the inference: section and flags."""
    from transformer_calc.config import resolve
    from transformer_calc.errors import TcalcError
    from transformer_calc.expected import default_efficiency

    merged = resolve(flags, section)
    graphs = merged.get("cuda_graphs", True)
    if not isinstance(graphs, bool):
        raise TcalcError(f"inference: cuda_graphs ({str(graphs)[:40]!r}) must be true or false")
    try:
        return default_efficiency(gpu, cuda_graphs=graphs, matmul=merged.get("matmul_efficiency"),
                                  memory=merged.get("memory_efficiency"), kernel_s=merged.get("kernel_launch_s"),
                                  network=network, sequence_s=merged.get("sequence_overhead_s"))
    except (ValueError, TypeError) as exc:
        raise TcalcError(f"inference: {exc}") from None


def serving_spec(section: dict[str, Any], flags: dict[str, Any]) -> Any:
    """The engine settings (serving.ServingSpec) from the inference: section and flags; sizes
    (cuda_context, activation_peak, engine_workspace) as bytes or '1GiB'."""
    from transformer_calc.config import parse_bytes, resolve
    from transformer_calc.errors import TcalcError
    from transformer_calc.serving import ServingSpec

    merged = resolve(flags, section)
    values: dict[str, Any] = {}
    try:
        for key in ("block_size", "memory_utilization", "max_num_batched_tokens", "max_num_seqs"):
            if merged.get(key) is not None:
                values[key] = merged[key]
        for key in ("cuda_context", "activation_peak", "engine_workspace"):
            raw = merged.get(key)
            if raw is not None:
                values[f"{key}_bytes"] = 0 if raw in (0, "0") else parse_bytes(raw, key)
        return ServingSpec(**values)
    except (ValueError, TypeError) as exc:
        raise TcalcError(f"inference: {exc}") from None


def capacity_dict(m: ModelConfig, gpu: Any, spec: Any, serving: Any) -> dict[str, Any]:
    """The `serving` section: the paged KV cache's capacity per GPU and per replica."""
    from transformer_calc.serving import budget_matrix, capacity, longest_context

    cap = capacity(m, gpu, spec, serving)
    per_replica = cap.gpus_per_replica
    return {
        "engine": {"block_size": serving.block_size, "memory_utilization": serving.memory_utilization,
                   "max_num_batched_tokens": serving.max_num_batched_tokens, "max_num_seqs": serving.max_num_seqs},
        "per_gpu": {
            "usable_bytes": cap.usable_bytes,
            "weights_bytes": cap.weights_bytes,
            "cuda_context_bytes": cap.cuda_context_bytes,
            "activation_peak_bytes": cap.activation_peak_bytes,
            "engine_workspace_bytes": cap.engine_workspace_bytes,
            "kv_budget_bytes": cap.kv_budget_bytes,
            "block_bytes": cap.block_bytes,
            "kv_blocks": cap.kv_blocks,
        },
        "per_replica": {"gpus": per_replica, "kv_budget_bytes": max(cap.kv_budget_bytes, 0) * per_replica,
                        "kv_blocks": cap.kv_blocks * per_replica},
        "context_len": cap.context_len,
        "sequence_bytes_per_gpu": cap.sequence_bytes,
        "max_concurrent_sequences": cap.max_concurrent_sequences,
        "longest_context_at_batch_size": longest_context(m, spec, serving, cap.kv_budget_bytes, spec.batch_size),
        "budget_matrix": budget_matrix(m, spec, serving, cap.kv_budget_bytes),
    }


def draft_model(text: str) -> ModelConfig:
    """A draft model for speculative decoding: a preset name, a tcalc YAML file or an HF config.json."""
    import importlib
    from pathlib import Path

    from transformer_calc.config import build_model

    presets = importlib.import_module("transformer_calc.presets")  # the module; the package's name is the API's

    path = Path(text)
    if path.suffix == ".json":
        return build_model(presets.hf_spec(path), where=str(path))
    if path.suffix in (".yaml", ".yml"):
        return build_model(presets.load_job(path, flag="--draft").model, where=str(path))
    return presets.preset_model(text)


def speculative_dict(m: ModelConfig, gpu: Any, spec: Any, eff: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The `speculative` section: a draft (or the MTP modules) proposing k tokens at acceptance α."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.speculative import speculate

    try:
        x = speculate(m, gpu, spec, eff, draft=options.get("draft"), speculative_tokens=options["speculative_tokens"],
                      acceptance_rate=options["acceptance_rate"])
    except ValueError as exc:
        raise TcalcError(f"speculative decoding: {exc}") from None
    return {
        "kind": x.kind,
        "draft": x.draft_name,
        "speculative_tokens": x.speculative_tokens,
        "acceptance_rate": x.acceptance_rate,
        "expected_tokens_per_step": x.expected_tokens_per_step,
        "context_len": x.context_len,
        "draft_step_s": x.draft_step_s,
        "verify_step_s": x.verify_step_s,
        "step_s": x.step_s,
        "time_per_output_token_s": x.time_per_output_token_s,
        "baseline_time_per_output_token_s": x.baseline_time_per_output_token_s,
        "speedup": x.speedup,
        "break_even_acceptance_rate": x.break_even_acceptance_rate,
        "draft_weights_bytes_per_gpu": x.draft_weights_bytes,
        "draft_kv_cache_bytes_per_gpu": x.draft_kv_cache_bytes,
        "target_kv_cache_bytes_per_gpu": x.target_kv_cache_bytes,
    }


def inference_report(m: ModelConfig, gpu: Any, spec: Any, eff: Any = None, serving: Any = None,
                     speculative: dict[str, Any] | None = None) -> dict[str, Any]:
    """`tcalc inference`: KV cache, memory per GPU, prefill and decode as a roofline (the bound),
    the expected latency at achievable rates with fixed costs (`expected`), and the paged KV
    cache's serving capacity (`serving`, with the cache on)."""
    from transformer_calc.expected import default_efficiency, estimate_expected
    from transformer_calc.inference import estimate_inference, expert_layout, min_tensor_parallel
    from transformer_calc.serving import ServingSpec

    e = estimate_inference(m, gpu, spec)
    x = estimate_expected(m, gpu, spec, eff or default_efficiency(gpu))
    mem, kv, pre, dec = e.memory, e.kv_cache, e.prefill, e.decode

    def step(s: Any) -> dict[str, Any]:
        r = s.roofline
        return {
            "tokens": s.tokens,
            "context_len": s.context_len,
            "flops": s.flops,
            "matmul_flops": s.matmul_flops,
            "attention_flops": s.attention_flops,
            "bytes_moved": s.bytes_moved,
            "weight_bytes": s.weight_bytes,
            "kv_read_bytes": s.kv_read_bytes,
            "kv_write_bytes": s.kv_write_bytes,
            "compute_s": r.compute_s,
            "memory_s": r.memory_s,
            "communication_s": s.comm.seconds,
            "time_s": s.seconds,
            "bound": s.bound,
            "intensity": r.intensity,
            "math_bandwidth": r.math_bandwidth,
        }

    return {
        "model": model_dict(m),
        "inference": {
            "batch_size": spec.batch_size,
            "prompt_len": spec.prompt_len,
            "new_tokens": spec.new_tokens,
            "tensor_parallel": spec.tensor_parallel,
            "expert_parallel": spec.expert_parallel,
            "gpus": expert_layout(m, spec.tensor_parallel, spec.expert_parallel)[0],
            "weight_dtype": spec.weight_dtype,
            "kv_dtype": spec.kv_dtype,
            "compute_dtype": spec.compute_dtype,
            "activation_dtype": spec.activation_dtype,
            "kv_cache": spec.kv_cache,
            "cache_kv_heads": kv.n_kv_heads,
            "mla_cache": spec.mla_cache if m.is_mla else None,
            "gpu": gpu.name,
        },
        "kv_cache": {
            "context_len": kv.context_len,
            "layers_by_kind": {k.value: m.n_attention_layers(k) for k in LayerAttention if m.n_attention_layers(k)},
            "sliding_window": m.sliding_window,
            "attention_chunk_size": m.attention_chunk_size,
            "replicated_per_gpu": m.is_mla and spec.mla_cache == "latent",
            "bytes_per_token": kv.bytes_per_token,
            "total_bytes": kv.total_bytes,
            "per_gpu_bytes": kv.per_gpu_bytes,
        },
        "memory": {
            "per_gpu": {
                "weights_bytes": mem.weights_bytes,
                "kv_cache_bytes": mem.kv_cache_bytes,
                "workspace_bytes": mem.workspace_bytes,
                "total_bytes": mem.total_bytes,
            },
            "capacity_bytes": mem.capacity_bytes,
            "headroom_bytes": mem.capacity_bytes - mem.total_bytes,
            "fits": mem.fits,
            "max_batch_size": mem.max_batch_size,
            "max_prompt_len": mem.max_prompt_len,
            "min_tensor_parallel": min_tensor_parallel(m, gpu, spec),
        },
        "prefill": step(pre),
        "decode": {
            "steps": dec.steps,
            "time_s": dec.seconds,
            "time_per_output_token_s": dec.seconds_per_token,
            "tokens_per_s": dec.tokens_per_s,
            "bound": dec.bound,
            "compute_bound_steps": dec.compute_bound_steps,
            "communication_s": dec.comm_s,
            "flops": dec.flops,
            "bytes_moved": dec.bytes_moved,
            "first_step": step(dec.first),
            "last_step": step(dec.last),
        },
        "time_to_first_token_s": e.time_to_first_token_s,
        "total_s": e.total_s,
        "tokens_per_s": e.tokens_per_s,
        "compute_bound_batch": e.compute_bound_batch,
        "compute_bound_batch_weights_only": e.compute_bound_batch_weights_only,
        "expected": expected_dict(x),
        **({"serving": capacity_dict(m, gpu, spec, serving or ServingSpec())} if spec.kv_cache else {}),
        **({"speculative": speculative_dict(m, gpu, spec, x.efficiency, speculative)} if speculative else {}),
    }


DEFAULT_INFERENCE_GPU = "a100-80gb"


def inference_spec(model: ModelConfig, section: dict[str, Any], flags: dict[str, Any],
                   checkpoint: Any = None) -> tuple[Any, str]:
    """(InferenceSpec, gpu name) from a job file's inference: section (canonical keys) with the
    flags that are not None overriding it. Defaults: B = 1, S = max_seq_len, one new token, T = 1,
    bf16 weights, the A100 80GB. With a checkpoint (a folder's, repo's or GGUF file's headers) and
    no weight dtype given, the weights are the bytes it stores (weight_dtype "checkpoint")."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.inference import InferenceSpec

    from transformer_calc.config import resolve
    from transformer_calc.hardware import compute_dtype

    merged = resolve(flags, section)
    dtype = compute_dtype(merged.get("dtype"), merged.get("p"))  # the compute dtype (--dtype / --p)
    stored = None
    if checkpoint is not None:
        from transformer_calc.checkpoint import stored_weights

        stored = stored_weights(checkpoint)
    try:
        spec = InferenceSpec(
            batch_size=merged.get("batch_size", 1),
            prompt_len=merged.get("seq_len", model.max_seq_len),
            new_tokens=merged.get("new_tokens", 1),
            tensor_parallel=merged.get("tensor", 1),
            expert_parallel=merged.get("expert", 1),
            weight_dtype=merged.get("weight_dtype", "checkpoint" if stored is not None else model.weight_format or dtype or "bf16"),
            stored=stored,
            compute_dtype=dtype,
            kv_dtype=merged.get("kv_dtype"),
            cache_kv_heads=merged.get("cache_kv_heads"),
            kv_cache=merged.get("kv_cache", True),
            mla_cache=merged.get("mla_cache", "latent"),
        )
    except (ValueError, TypeError) as exc:
        raise TcalcError(f"inference: {exc}") from None
    return spec, str(merged.get("gpu", DEFAULT_INFERENCE_GPU))


# ============================================================================ serve
def layout_dict(x: Any) -> dict[str, Any]:
    p, cap = x.point, x.capacity
    return {
        "tensor_parallel": x.tensor_parallel,
        "replicas": x.replicas,
        "gpus": x.gpus,
        "feasible": x.meets_targets,
        "reason": x.reason,
        "concurrency": p.concurrency if p else None,
        "ttft_s": p.ttft_s if p else None,
        "tpot_s": p.tpot_s if p else None,
        "tokens_per_s": x.tokens_per_s if p else None,
        "tokens_per_s_per_gpu": x.tokens_per_s / x.gpus if p else None,
        "tokens_per_s_per_replica": p.output_tokens_per_s if p else None,
        "requests_per_s": x.replicas * p.requests_per_s if p else None,
        "prefill_tokens_per_step": p.prefill_tokens_per_step if p else None,
        "max_concurrent_sequences": cap.max_concurrent_sequences if cap else None,
        "kv_budget_bytes_per_gpu": cap.kv_budget_bytes if cap else None,
        "kv_blocks_per_gpu": cap.kv_blocks if cap else None,
    }


def serve_report(
    m: ModelConfig, gpu: Any, spec: Any, eff: Any, serving: Any, *, gpus: int, ttft_s: float | None,
    tpot_s: float | None, request_rate: float | None = None, tensor_parallel: int | None = None,
    concurrency: int | None = None,
) -> dict[str, Any]:
    """`tcalc serve`: layouts of `gpus` GPUs (T within a node, replicas, concurrency) under
    continuous batching, with TTFT, TPOT and throughput against the targets (serving.py)."""
    from transformer_calc.serving import search

    layouts = search(m, gpu, spec, eff, serving, gpus=gpus, prompt_len=spec.prompt_len, output_len=spec.new_tokens,
                     ttft_s=ttft_s, tpot_s=tpot_s, request_rate=request_rate, tensor_parallel=tensor_parallel,
                     concurrency=concurrency)
    rows = [layout_dict(x) for x in layouts]
    feasible = [r for r in rows if r["feasible"]]
    return {
        "model": model_dict(m),
        "serve": {
            "gpu": gpu.name,
            "gpus": gpus,
            "prompt_len": spec.prompt_len,
            "output_len": spec.new_tokens,
            "expert_parallel": spec.expert_parallel,
            "weight_dtype": spec.weight_dtype,
            "kv_dtype": spec.kv_dtype,
            "targets": {"ttft_s": ttft_s, "tpot_s": tpot_s},
            "request_rate": request_rate,
            "engine": {"block_size": serving.block_size, "memory_utilization": serving.memory_utilization,
                       "max_num_batched_tokens": serving.max_num_batched_tokens, "max_num_seqs": serving.max_num_seqs},
            "batching": "continuous: each step decodes the B sequences in flight (mean context P + O/2) and "
                        "prefills B·P/O prompt tokens in chunks of max_num_batched_tokens − B",
        },
        "best": feasible[0] if feasible else None,
        "layouts": rows,
        "expected_assumptions": expected_dict_assumptions(eff),
    }


def serve_request(
    m: ModelConfig, section: dict[str, Any], flags: dict[str, Any], checkpoint: Any = None, *,
    ttft_s: float | None = None, tpot_s: float | None = None, request_rate: float | None = None,
    gpus: int | None = None,
) -> dict[str, Any]:
    """`tcalc serve` from its options: each a flag (`flags`: the inference keys, the expected-latency
    and serving settings, node_size, inter_node_gb_s), else the job file's inference: section, else
    the default; the CLI and the Python API both call it."""
    from transformer_calc.config import resolve
    from transformer_calc.errors import TcalcError
    from transformer_calc.presets import gpu as find_gpu

    given = resolve(flags, section)
    if given.get("seq_len") is None or given.get("new_tokens") is None:
        raise TcalcError("give --prompt-len and --output-len (or seq_len and new_tokens in the job file's inference: section)")
    spec, gpu_name = inference_spec(m, section, flags, checkpoint)
    device = find_gpu(gpu_name)
    eff = inference_efficiency(device, section, flags, network_for(device, flags.get("node_size"), flags.get("inter_node_gb_s")))
    serving = serving_spec(section, flags)
    targets = _serve_targets(section, ttft_s=ttft_s, tpot_s=tpot_s, request_rate=request_rate, gpus=gpus)
    if targets["gpus"] % spec.expert_parallel:
        raise TcalcError(f"--gpus ({targets['gpus']}) must be a multiple of --ep ({spec.expert_parallel})")
    return serve_report(m, device, spec, eff, serving, gpus=targets["gpus"], ttft_s=targets["ttft_s"],
                        tpot_s=targets["tpot_s"], request_rate=targets["request_rate"],
                        tensor_parallel=given.get("tensor"), concurrency=given.get("batch_size"))


def _serve_targets(section: dict[str, Any], **flags: Any) -> dict[str, Any]:
    """Targets, request rate and GPU count: a flag, else the job file's inference: section."""
    import math

    from transformer_calc.errors import TcalcError

    out: dict[str, Any] = {}
    for key, name in (("ttft_s", "--ttft"), ("tpot_s", "--tpot"), ("request_rate", "--request-rate"), ("gpus", "--gpus")):
        value = flags[key] if flags[key] is not None else section.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value <= 0):
            raise TcalcError(f"inference: {key} ({str(value)[:40]!r}) must be a positive number ({name})")
        out[key] = value
    gpus = out["gpus"] if out["gpus"] is not None else 8
    if not isinstance(gpus, int) or gpus > 1_000_000:
        raise TcalcError(f"inference: gpus ({gpus!r}) must be a whole number from 1 to 1,000,000")
    out["gpus"] = gpus
    return out


def expected_dict_assumptions(eff: Any) -> dict[str, Any]:
    """The expected model's rates and fixed costs (inference's `expected.assumptions` adds the
    kernel count and the link latencies; serve's `expected_assumptions` is this)."""
    return {
        "matmul_efficiency": eff.matmul,
        "matmul_efficiency_fp8": eff.matmul_fp8,
        "memory_efficiency": eff.memory,
        "cuda_graphs": eff.cuda_graphs,
        "kernel_launch_s": eff.kernel_s,
        "sequence_overhead_s": eff.sequence_s,
        "node_size": eff.network.node_size,
        "intra_node_bytes_s": eff.network.intra_bytes_s,
        "inter_node_bytes_s": eff.network.inter_bytes_s,
    }


# ============================================================================ train, plan
# tcalc train's and plan's defaults where they are not tcalc memory's (Training's and Parallelism's):
# Megatron-core conventions, FlashAttention and a distributed optimizer (ZeRO-1), on an H100.
TRAIN_DEFAULTS: dict[str, Any] = {"framework": "megatron", "flash": True, "zero": 1, "recompute": "none",
                                  "gpu": "h100"}
TRAIN_GPUS = 8  # --gpus when neither the flag nor the job file's layout gives the count
# The layout plan chooses itself: a job file's values for these keys are not used by `tcalc plan`.
PLAN_LAYOUT_KEYS = ("tensor", "sequence_parallel", "pipeline", "data", "zero", "expert", "context", "virtual_stages",
                    "batch_size", "micro_batches", "recompute")


def train_configs(
    m: ModelConfig, section: dict[str, Any], flags: dict[str, Any], gpus: int | None = None
) -> tuple[Any, Any, Any, str, bool]:
    """`tcalc train`'s settings, resolved as `tcalc memory`'s (config.resolve): a flag that was
    given, then the job file's training: section, then the default (TRAIN_DEFAULTS, else the
    config's). Data parallelism is what the GPUs leave, dp = gpus / (T·P·CP); without `gpus`, the
    job file's layout sets the count (data·T·P·CP), else TRAIN_GPUS. A micro-batch given as a flag
    fixes the micro-batches per step (G / (dp·b)); the section's `micro_batches` is then not used.
    Returns (Workload, Training, Parallelism, gpu name, whether the micro-batch was given); the
    CLI and the Python API both call it."""
    from transformer_calc.config import Parallelism, Training, Workload, build, resolve, split_training
    from transformer_calc.errors import TcalcError

    settings = resolve(flags, section, {"seq_len": m.max_seq_len, **TRAIN_DEFAULTS})
    if flags.get("batch_size") is not None:
        settings.pop("micro_batches", None)
    parts = split_training(settings)
    layout = build(Parallelism, parts["parallelism"], "training")
    T, P, cp = layout.tensor, layout.pipeline, layout.context
    if gpus is None:
        gpus = layout.gpus if "data" in parts["parallelism"] else TRAIN_GPUS
    if gpus % (T * P * cp):
        raise TcalcError(f"--gpus ({gpus}) must be a multiple of T x P x CP ({T} x {P} x {cp}); data parallelism is what is left")
    par = build(Parallelism, {**parts["parallelism"], "data": gpus // (T * P * cp)}, "training")
    w = build(Workload, {"batch_size": 1, **parts["workload"]}, "training")
    tr = build(Training, parts["training"], "training")
    return w, tr, par, str(parts["gpu"]["gpu"]), "batch_size" in parts["workload"]


def plan_configs(m: ModelConfig, section: dict[str, Any], flags: dict[str, Any]) -> tuple[int, Any, str, int | None]:
    """`tcalc plan`'s settings, as train's (`train_configs`) but for the layout, which plan
    chooses (PLAN_LAYOUT_KEYS of the section are not used). Returns (S, Training, gpu name, the
    expert-tensor size or None)."""
    from transformer_calc.config import Parallelism, Training, Workload, build, resolve, split_training

    fixed = {k: v for k, v in section.items() if k not in PLAN_LAYOUT_KEYS}
    parts = split_training(resolve(flags, fixed, {"seq_len": m.max_seq_len, **TRAIN_DEFAULTS}))
    w = build(Workload, parts["workload"], "training")
    tr = build(Training, parts["training"], "training")
    etp = build(Parallelism, {k: v for k, v in parts["parallelism"].items() if k == "expert_tensor"}, "training")
    return w.seq_len, tr, str(parts["gpu"]["gpu"]), etp.expert_tensor


def _layout(par: Any) -> dict[str, Any]:
    return {"tensor": par.tensor, "pipeline": par.pipeline, "virtual_stages": par.virtual_stages,
            "context": par.context, "expert": par.expert, "data": par.data,
            "sequence_parallel": par.sequence_parallel, "zero": par.zero, "gpus": par.gpus}


def train_report(
    m: ModelConfig, w: Any, tr: Any, par: Any, gpu: Any, *, global_batch: int, micro_batch_given: bool,
    network: Any = None, matmul_efficiency: float | None = None, tokens: int | None = None,
    price_per_gpu_hour: float | None = None,
) -> dict[str, Any]:
    """`tcalc train`: the step time of one layout, its breakdown, MFU, memory, and a budget."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.flops import SECONDS_PER_DAY, SECONDS_PER_HOUR
    from transformer_calc.timeline import fit_capacity, peak_memory
    from transformer_calc.train import estimate_step, micro_batch_count

    if price_per_gpu_hour is not None and not (0 < price_per_gpu_hour < float("inf")):
        raise TcalcError(f"--price-per-gpu-hour ({price_per_gpu_hour}) must be a positive number")
    chosen = w.batch_size
    tried: list[dict[str, Any]] = []
    if tr.micro_batches is not None:  # micro-batches per step (a job file's): b = G / (dp·m)
        per_replica = global_batch // par.data
        if micro_batch_given:
            if per_replica * par.data != global_batch or per_replica != chosen * tr.micro_batches:
                raise TcalcError(f"training: micro_batches ({tr.micro_batches}) and the micro-batch ({chosen}) do not "
                                 f"make the global batch ({global_batch}) over dp = {par.data}; give one of them")
        else:
            if per_replica * par.data != global_batch or per_replica % tr.micro_batches:
                raise TcalcError(f"training: micro_batches ({tr.micro_batches}) does not divide the per-replica batch "
                                 f"(global batch {global_batch} / dp {par.data}); choose a divisor")
            chosen, micro_batch_given = per_replica // tr.micro_batches, True
    if not micro_batch_given:  # the fastest micro-batch that fits and divides the replica batch
        best = None
        per_replica = global_batch // par.data if par.data and global_batch % par.data == 0 else 0
        for b in (1, 2, 4, 8, 16, 32):
            if not per_replica or per_replica % b:
                continue
            trial_w = w.model_copy(update={"batch_size": b})
            trial_tr = tr.model_copy(update={"micro_batches": per_replica // b})
            peak = peak_memory(m, trial_w, trial_tr, par).peak_bytes
            fits = peak <= fit_capacity(gpu.memory_bytes)
            est = estimate_step(m, trial_w, trial_tr, par, gpu, global_batch=global_batch, network=network,
                                matmul_efficiency=matmul_efficiency)
            tried.append({"micro_batch": b, "fits": fits, "step_time_s": est.step_time_s})
            if fits and (best is None or est.step_time_s < best[1]):
                best = (b, est.step_time_s)
        chosen = best[0] if best else 1
    w = w.model_copy(update={"batch_size": chosen})
    m_micro = micro_batch_count(global_batch, par, chosen)
    tr = tr.model_copy(update={"micro_batches": m_micro})
    est = estimate_step(m, w, tr, par, gpu, global_batch=global_batch, network=network,
                        matmul_efficiency=matmul_efficiency)
    tl = peak_memory(m, w, tr, par)
    usable = fit_capacity(gpu.memory_bytes)
    report: dict[str, Any] = {
        "model": model_dict(m),
        "gpu": gpu.name,
        "layout": _layout(par),
        "batch": {"global_batch": global_batch, "global_batch_tokens": global_batch * w.seq_len,
                  "micro_batch": chosen, "micro_batch_chosen": not micro_batch_given,
                  "micro_batches": m_micro, "seq_len": w.seq_len, "tried": tried},
        "training": tr.model_dump(mode="json"),
        "step_time_s": est.step_time_s,
        "breakdown": est.breakdown,
        "dp_comm_total_s": est.dp_comm_s,
        "tokens_per_s": est.tokens_per_s,
        "tokens_per_s_per_gpu": est.tokens_per_s / est.gpus,
        "mfu": est.mfu,
        "hfu": est.hfu,
        "tflops_per_gpu": est.tflops_per_gpu,
        "model_flops": est.model_flops,
        "hardware_flops": est.hardware_flops,
        "memory": {"peak_bytes": tl.peak_bytes, "peak_phase": tl.peak.name, "usable_bytes": usable,
                   "fits": tl.peak_bytes <= usable,
                   **({"offloaded_bytes_per_gpu": tl.stage.offloaded, "offload_device": tr.offload_device.value}
                      if tr.offload.value != "none" else {})},
        "assumptions": est.assumptions,
    }
    if tokens is not None:
        seconds = tokens / est.tokens_per_s
        budget: dict[str, Any] = {"tokens": tokens, "steps": -(-tokens // (global_batch * w.seq_len)),
                                  "time_s": seconds, "days": seconds / SECONDS_PER_DAY,
                                  "gpu_hours": seconds * est.gpus / SECONDS_PER_HOUR}
        if price_per_gpu_hour is not None:
            budget["cost"] = budget["gpu_hours"] * price_per_gpu_hour
        report["budget"] = budget
    return report


def network_for(gpu: Any, node_size: int | None = None, inter_node_gb_s: float | None = None) -> Any:
    """The GPU's default fabric (train.default_network) with --node-size and --inter-node-gb-s
    (GB/s per GPU, one way) applied; bad values are errors naming the flag."""
    import math

    from transformer_calc.errors import TcalcError
    from transformer_calc.train import default_network

    net = default_network(gpu)
    if node_size is not None:
        if isinstance(node_size, bool) or not isinstance(node_size, int) or node_size < 1:
            raise TcalcError(f"--node-size ({str(node_size)[:40]}) must be a whole number >= 1")
        net = net.__class__(node_size, net.intra_bytes_s, net.inter_bytes_s)
    if inter_node_gb_s is not None:
        if (isinstance(inter_node_gb_s, bool) or not isinstance(inter_node_gb_s, (int, float))
                or not (math.isfinite(inter_node_gb_s) and inter_node_gb_s > 0)):
            raise TcalcError(f"--inter-node-gb-s ({str(inter_node_gb_s)[:40]}) must be a positive number of GB/s")
        net = net.__class__(net.node_size, net.intra_bytes_s, inter_node_gb_s * 1e9)
    return net


def plan_report(
    m: ModelConfig, seq_len: int, tr: Any, gpu: Any, *, gpus: int, global_batch: int, top: int = 10,
    node_size: int | None = None, inter_node_gb_s: float | None = None, source: str | None = None,
    expert_tensor: int | None = None,
) -> dict[str, Any]:
    """`tcalc plan`: the feasible layouts ranked by step time, and why the others were rejected.

    `source` is the model as typed on a command line (`--preset NAME`, a MODEL, `--config FILE`,
    with its overrides): best_command repeats it, and every setting that is not `tcalc train`'s
    default, so that running it prices exactly the best plan."""
    from transformer_calc.train import plan_layouts

    plans, rejected = plan_layouts(m, seq_len, tr, gpu, gpus=gpus, global_batch=global_batch,
                                   network=network_for(gpu, node_size, inter_node_gb_s), expert_tensor=expert_tensor)
    rows = []
    for pl in plans[:top]:
        est = pl.estimate
        rows.append({
            "layout": _layout(pl.parallelism), "micro_batch": pl.micro_batch, "recompute": pl.recompute.value,
            "step_time_s": est.step_time_s, "mfu": est.mfu, "tokens_per_s": est.tokens_per_s,
            "peak_bytes": pl.peak_bytes, "breakdown": est.breakdown,
        })
    command = None
    if plans:
        best = plans[0]
        par = best.parallelism
        command = (
            f"tcalc train {source or '<model>'} --gpus {gpus} --gpu {gpu.name} --S {seq_len} --global-batch {global_batch} "
            f"--T {par.tensor} --P {par.pipeline} --virtual-stages {par.virtual_stages} --cp {par.context} "
            f"--ep {par.expert} --zero {par.zero}{' --sp' if par.sequence_parallel else ''} "
            f"--micro-batch {best.micro_batch} --recompute {best.recompute.value}{' --flash' if tr.flash else ' --no-flash'}"
            # what tcalc train would otherwise default differently
            + (f" --framework {tr.framework.value}" if tr.framework.value != "megatron" else "")
            + (f" --finetune {tr.finetune.value} --lora-rank {tr.lora_rank} --lora-targets "
               f"{','.join(t.value for t in tr.lora_targets)}" if tr.adapters else "")
            + (f" --node-size {node_size}" if node_size is not None else "")
            + (f" --inter-node-gb-s {repr(float(inter_node_gb_s)).removesuffix('.0')}"
               if inter_node_gb_s is not None else "")
        )
    return {
        "model": model_dict(m), "gpu": gpu.name, "gpus": gpus, "seq_len": seq_len, "global_batch": global_batch,
        "evaluated": len(plans) + sum(rejected.values()), "feasible": len(plans),
        "plans": rows, "rejected": rejected, "best_command": command,
    }
