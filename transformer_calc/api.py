"""The Python API: a function per command, the same options as keyword arguments, typed results.

    import transformer_calc.api as tc
    r = tc.memory("llama-3-8b", S=8192, B=2, recompute="full", dp=64, zero=3)
    r.memory["peak_bytes"], r.model_dump(mode="json")   # == `tcalc memory ... -f json`

A model is a preset name, a `ModelConfig`, a dict of ModelConfig fields, or a path to a tcalc
YAML job file or a Hugging Face config.json (by suffix). Options take the descriptive names of
docs/notation.md or the seed's letters (S, B, T, P, dp, ep, cp). Each function returns a pydantic
result whose top-level fields are the command's JSON keys; `model_dump(mode="json")` equals the
command's `--format json` output (tests/test_api.py checks every command).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any



from transformer_calc.model.config import ModelConfig
from transformer_calc.results.params import ParamsResult  # noqa: F401 (the API's result types)
from transformer_calc.results.memory import MemoryResult  # noqa: F401
from transformer_calc.results.flops import FlopsResult, MfuResult  # noqa: F401
from transformer_calc.results.inference import InferenceResult  # noqa: F401
from transformer_calc.results.train import TrainResult, PlanResult  # noqa: F401
from transformer_calc.results.serve import ServeResult  # noqa: F401
from transformer_calc.results.check import CheckResult  # noqa: F401
from transformer_calc.results.catalog import PresetsResult, HardwareResult  # noqa: F401
from transformer_calc.results.sweep import SweepResult  # noqa: F401


_LETTERS = {"S": "seq_len", "B": "batch_size", "T": "tensor", "P": "pipeline", "dp": "data", "sp": "sequence_parallel",
            "ep": "expert", "etp": "expert_tensor", "cp": "context"}  # fmt: skip


def load(model: Any = None, *, preset: str | None = None, hf_config: str | Path | None = None,
         config: str | Path | None = None, revision: str | None = None) -> tuple[ModelConfig, Any]:
    """(ModelConfig, job file or None) from a ModelConfig, a dict of its fields, or a string as
    the CLI's MODEL takes it (a preset name, a path: tcalc YAML, config.json, checkpoint folder,
    .gguf file; or a Hugging Face repo id org/name[@revision]), or from exactly one of the
    keywords preset=, hf_config=, config= (the CLI's --preset, --hf-config, --config)."""
    src = load_source(model, preset=preset, hf_config=hf_config, config=config, revision=revision)
    return src.model, src.job


def load_source(model: Any = None, *, preset: str | None = None, hf_config: str | Path | None = None,
                config: str | Path | None = None, revision: str | None = None) -> Any:
    """As `load`, the whole `sources.Source`: the model, its job file and its checkpoint (the bytes
    a folder, repo or GGUF file stores)."""
    from transformer_calc.sources.resolve import Source, load_source as resolve

    given = [x for x in (model, preset, hf_config, config) if x is not None]
    if len(given) != 1:
        raise TypeError("give the model once: a positional model, preset=, hf_config= or config=")
    if isinstance(model, ModelConfig):
        return Source(model, None, None, None, "model")
    if isinstance(model, dict):
        from transformer_calc.model.config import build_model

        return Source(build_model(dict(model)), None, None, None, "model")
    if model is not None and not isinstance(model, (str, Path)):
        raise TypeError(f"model must be a preset name, a path, a repo id, a ModelConfig or a dict, not {type(model).__name__}")
    return resolve(str(model) if model is not None else None, preset=preset,
                   hf_config=Path(hf_config) if hf_config is not None else None,
                   config=Path(config) if config is not None else None, revision=revision)


_SOURCE_KEYS = ("preset", "hf_config", "config", "revision")


def _source(model: Any, options: dict[str, Any]) -> tuple[ModelConfig, Any]:
    """load() with the model keywords taken out of a function's **options."""
    src = _full_source(model, options)
    return src.model, src.job


def _full_source(model: Any, options: dict[str, Any]) -> Any:
    return load_source(model, **{k: options.pop(k) for k in _SOURCE_KEYS if k in options})


def _typed_checkpoint(src: Any) -> Any:
    """The typed checkpoint section when the model came from a checkpoint, else None."""
    if src.checkpoint is None and src.checkpoint_note is None:
        return None
    from transformer_calc.results.common import checkpoint_section

    return checkpoint_section(src.model, src.checkpoint, src.checkpoint_note)


def _checkpoint(src: Any) -> dict[str, Any]:
    """{"checkpoint": ...} when the model came from a checkpoint, as the CLI adds it."""
    if src.checkpoint is None and src.checkpoint_note is None:
        return {}
    from transformer_calc.results.common import checkpoint_dict

    return {"checkpoint": checkpoint_dict(src.model, src.checkpoint, src.checkpoint_note)}


def _canonical(options: dict[str, Any]) -> dict[str, Any]:
    return {_LETTERS.get(k, k): v for k, v in options.items() if v is not None}


def _dump(data: Any) -> Any:
    """The command's JSON, as the CLI writes it (render.to_json), read back."""
    import json

    from transformer_calc.render.common import to_json

    return json.loads(to_json(data))


def params(model: Any = None, *, p: int = 2, T: int = 1, **source: Any) -> ParamsResult:
    """`tcalc params`: exact parameter count with its breakdown."""
    from transformer_calc.results.params import params_report

    src = _full_source(model, source)
    return params_report(src.model, p, T, checkpoint=_typed_checkpoint(src))


def memory(model: Any = None, *, gpu: str | None = None, **options: Any) -> MemoryResult:
    """`tcalc memory`: the peak training memory per GPU (options: S, B, precision, p, grad_bytes,
    optimizer, recompute, flash, dropout, activations, framework, cross_entropy, micro_batches,
    fused_optimizer, T, sp, P, dp, zero, ep, etp, cp, finetune, lora_rank, lora_alpha, lora_targets,
    train_embeddings, train_head, offload, offload_device, fp8_recipe)."""
    from transformer_calc.model.config import training_configs
    from transformer_calc.sources.presets import gpu as find_gpu
    from transformer_calc.results.common import with_checkpoint_weights
    from transformer_calc.results.memory import memory_report

    src = _full_source(model, options)
    m, job = src.model, src.job
    flags = _canonical(options) | ({"gpu": gpu} if gpu is not None else {})
    w, tr, par, gpu_name = training_configs(m, job.training if job else {}, flags)
    tr = with_checkpoint_weights(m, tr, src.checkpoint)
    device = find_gpu(str(gpu_name)) if gpu_name is not None else None
    return MemoryResult(**_dump(memory_report(m, w, tr, par, device) | _checkpoint(src)))


def flops(model: Any = None, *, S: int | None = None, B: int | None = None, causal: bool = False,
          windowed: bool = False, recompute: str | None = None, tokens: int | None = None, gpus: int | None = None, gpu: str | None = None,
          dtype: str | None = None, mfu: float | None = None, budget: int | None = None,
          **source: Any) -> FlopsResult:
    """`tcalc flops`: model and hardware FLOPs of a step, and a training-time estimate."""
    from transformer_calc.results.flops import flops_request

    m, job = _source(model, source)
    return flops_request(m, job.training if job else {}, S=S, B=B, recompute=recompute, causal=causal,
                         windowed=windowed, tokens=tokens, gpus=gpus, gpu_name=gpu, dtype=dtype, mfu=mfu,
                         budget=budget)


def inference(model: Any = None, **options: Any) -> InferenceResult:
    """`tcalc inference` (options: B, S, new_tokens, T, ep, gpu, dtype, p, weight_dtype, kv_dtype, cache_kv_heads,
    kv_cache, mla_cache; expected latency: matmul_efficiency, memory_efficiency, cuda_graphs,
    kernel_launch_s; serving: block_size, memory_utilization, ...; speculative: draft, mtp, speculative_tokens,
    acceptance_rate)."""
    from transformer_calc.sources.presets import gpu as find_gpu
    from transformer_calc.results.inference import inference_efficiency, inference_report, inference_spec, serving_spec

    src = _full_source(model, options)
    m, job = src.model, src.job
    section, flags = (job.inference if job else {}), _canonical(options)
    spec, gpu_name = inference_spec(m, section, flags, src.checkpoint)
    device = find_gpu(gpu_name)
    eff = inference_efficiency(device, section, flags)
    serving = serving_spec(section, flags)
    speculative = None
    if flags.get("draft") is not None or flags.get("mtp"):
        speculative = {"draft": load(flags["draft"])[0] if flags.get("draft") is not None else None,
                       "speculative_tokens": flags.get("speculative_tokens", 4),
                       "acceptance_rate": flags.get("acceptance_rate", 0.7)}
    return InferenceResult(**_dump(inference_report(m, device, spec, eff, serving, speculative) | _checkpoint(src)))


def serve(model: Any = None, *, prompt_len: int, output_len: int, gpus: int = 8, gpu: str | None = None,
          ttft_s: float | None = None, tpot_s: float | None = None, request_rate: float | None = None,
          T: int | None = None, B: int | None = None, **options: Any) -> ServeResult:
    """`tcalc serve`: layouts of `gpus` GPUs against TTFT/TPOT targets (options as `inference`:
    ep, weight_dtype, kv_dtype, the expected-latency and serving-capacity settings)."""
    from transformer_calc.sources.presets import gpu as find_gpu
    from transformer_calc.results.inference import inference_efficiency, inference_spec, serving_spec
    from transformer_calc.results.serve import serve_report

    src = _full_source(model, options)
    m, job = src.model, src.job
    section = job.inference if job else {}
    flags = _canonical(options) | {"seq_len": prompt_len, "new_tokens": output_len}
    if gpu is not None:
        flags["gpu"] = gpu
    spec, gpu_name = inference_spec(m, section, flags, src.checkpoint)
    device = find_gpu(gpu_name)
    eff = inference_efficiency(device, section, flags)
    serving = serving_spec(section, flags)
    report = serve_report(m, device, spec, eff, serving, gpus=gpus, ttft_s=ttft_s, tpot_s=tpot_s,
                          request_rate=request_rate, tensor_parallel=T, concurrency=B)
    return ServeResult(**_dump(report | _checkpoint(src)))


def train(model: Any = None, *, gpus: int = 8, gpu: str = "h100", S: int | None = None, global_batch: int,
          micro_batch: int | None = None, T: int = 1, P: int = 1, virtual_stages: int = 1, cp: int = 1, ep: int = 1,
          sp: bool = False, zero: int = 1, recompute: str = "none", flash: bool = True, precision: str = "mixed",
          framework: str = "megatron", tokens: int | None = None, price_per_gpu_hour: float | None = None,
          matmul_efficiency: float | None = None, finetune: str = "full", lora_rank: int = 16,
          lora_targets: str = "all-linear", offload: str = "none", offload_device: str = "cpu",
          fp8_recipe: str = "none", **source: Any) -> TrainResult:
    """`tcalc train`: the step time of a layout (global_batch in sequences)."""
    from transformer_calc.model.config import Parallelism, Training, Workload
    from transformer_calc.sources.presets import gpu as find_gpu
    from transformer_calc.results.train import train_report
    from transformer_calc.estimators.training.train import default_network

    m, _ = _source(model, source)
    device = find_gpu(gpu)
    if gpus % (T * P * cp):
        raise ValueError(f"gpus ({gpus}) must be a multiple of T x P x CP ({T} x {P} x {cp})")
    par = Parallelism(tensor=T, pipeline=P, virtual_stages=virtual_stages, context=cp, expert=ep,
                      data=gpus // (T * P * cp), sequence_parallel=sp, zero=zero)
    tr = Training(recompute=recompute, flash=flash, precision=precision, framework=framework, finetune=finetune,
                  lora_rank=lora_rank, lora_targets=lora_targets, offload=offload, offload_device=offload_device,
                  fp8_recipe=fp8_recipe)
    w = Workload(seq_len=S or m.max_seq_len, batch_size=micro_batch or 1)
    return train_report(m, w, tr, par, device, global_batch=global_batch, micro_batch_given=micro_batch is not None,
                        network=default_network(device), matmul_efficiency=matmul_efficiency, tokens=tokens,
                        price_per_gpu_hour=price_per_gpu_hour)


def plan(model: Any = None, *, gpus: int = 8, gpu: str = "h100", S: int | None = None, global_batch: int, top: int = 10,
         flash: bool = True, framework: str = "megatron", finetune: str = "full", lora_rank: int = 16,
         lora_targets: str = "all-linear", **source: Any) -> PlanResult:
    """`tcalc plan`: the fastest layouts that fit (global_batch in sequences)."""
    from transformer_calc.model.config import Training
    from transformer_calc.sources.presets import gpu as find_gpu
    from transformer_calc.results.train import plan_report
    from transformer_calc.estimators.training.train import default_network

    name = source.get("preset") or (
        model if isinstance(model, str) and Path(model).suffix not in (".yaml", ".yml", ".json") else None)
    m, _ = _source(model, source)
    device = find_gpu(gpu)
    tr = Training(flash=flash, framework=framework, finetune=finetune, lora_rank=lora_rank, lora_targets=lora_targets)
    return plan_report(m, S or m.max_seq_len, tr, device, gpus=gpus,
                       global_batch=global_batch, top=top, network=default_network(device),
                       preset=name)


def mfu(model: Any = None, *, S: int | None = None, gpus: int = 1, gpu: str = "a100-80gb", dtype: str | None = None,
        global_batch: int | None = None, global_batch_tokens: int | None = None, step_time: float | None = None,
        tokens_per_s: float | None = None, recompute: str | None = None, causal: bool = False,
        hfu_convention: str = "executed", **source: Any) -> MfuResult:
    """`tcalc mfu`: MFU and HFU from a measured step time (with the global batch, in sequences or
    tokens) or a throughput in tokens/s."""
    from transformer_calc.results.flops import mfu_request

    m, job = _source(model, source)
    return mfu_request(m, job.training if job else {}, S=S, gpus=gpus, gpu_name=gpu, dtype=dtype,
                       global_batch=global_batch, global_batch_tokens=global_batch_tokens, step_time=step_time,
                       tokens_per_s=tokens_per_s, recompute=recompute, causal=causal, hfu_convention=hfu_convention)


def check(*files: str | Path, gpu: str | None = None, max_memory: str | None = None,
          min_tokens_per_s: float | None = None) -> CheckResult:
    """`tcalc check FILES`: each job file PASS / FAIL / INVALID (the CLI exits 2 if any is invalid,
    else 1 if any check failed, else 0)."""
    from transformer_calc.results.check import check_report

    return CheckResult(**_dump(check_report([Path(f) for f in files], gpu, max_memory, min_tokens_per_s)))


def presets() -> PresetsResult:
    """`tcalc presets`: the model presets with their key numbers and sources."""
    from transformer_calc.results.catalog import presets_report

    return PresetsResult(_dump(presets_report()))


def hardware(name: str | None = None) -> HardwareResult:
    """`tcalc hardware [NAME]`: the accelerator table, or one accelerator in detail."""
    from transformer_calc.results.catalog import gpu_report, hardware_report

    return HardwareResult(_dump(hardware_report() if name is None else gpu_report(name)))


def sweep(model: Any = None, *, models: list[Any] | None = None, metrics: list[str] | str | None = None,
          tokens: int | None = None, mfu: float | None = None, fits_only: bool = False, sort: str | None = None,
          limit: int | None = None, **options: Any) -> SweepResult:
    """`tcalc sweep`: a grid, one row per point (options: the axes B, S, T, P, dp, zero, ep, cp,
    recompute, flash, gpu, dtype, weight_dtype, each one value, a list, or the CLI's text such as
    "1,2,4..64"; the fixed settings precision, p, grad_bytes, optimizer, dropout, activations,
    head_activations, framework, cross_entropy, micro_batches, fused_optimizer, sp, etp, new_tokens,
    kv_dtype, kv_heads, kv_cache, mla_cache). `model` is one model (see `load`); `models` several,
    labelled by preset name (or the model's name); or preset= (a list, or names comma-separated),
    config=, hf_config= as the CLI's --preset, --config, --hf-config."""
    from transformer_calc.sources.presets import gpu as find_gpu
    from transformer_calc.results.common import peak_for
    from transformer_calc.estimators.sweep import prepare

    loaded: dict[str, ModelConfig] = {}
    job = None
    presets = options.pop("preset", None)  # the CLI's --preset (a list or comma-separated), --config, --hf-config
    names = [n.strip() for n in presets.split(",")] if isinstance(presets, str) else list(presets or [])
    files = [Path(options.pop(k)) for k in ("config", "hf_config") if options.get(k) is not None]
    options.pop("config", None), options.pop("hf_config", None)
    for source in ([model] if model is not None else []) + list(models or []) + names + files:
        m, found = load(source)
        job = job or found
        label = source if isinstance(source, str) and Path(source).suffix not in (".yaml", ".yml", ".json") else None
        if label is not None:
            from transformer_calc.sources.presets import resolve_preset

            label = resolve_preset(label)
        loaded[label or m.name or str(source)] = m
    canon = _canonical(options)
    axes_keys = ("batch_size", "seq_len", "tensor", "pipeline", "data", "zero", "expert", "context", "recompute",
                 "flash", "gpu", "dtype", "weight_dtype")
    axes = {k: _axis_text(canon.pop(k)) for k in axes_keys if k in canon}
    settings = {**canon}
    unknown = set(settings) - {"precision", "p", "grad_bytes", "optimizer", "dropout", "activations", "head_activations",
                               "framework", "cross_entropy", "micro_batches", "fused_optimizer", "sequence_parallel",
                               "expert_tensor", "new_tokens", "kv_dtype", "kv_heads", "kv_cache", "mla_cache"}
    if unknown:
        raise TypeError(f"sweep() got unknown options: {', '.join(sorted(unknown))}")
    run = prepare(loaded, axes, settings, metrics.split(",") if isinstance(metrics, str) else metrics, job,
                  tokens=tokens, mfu=mfu, fits_only=fits_only, sort=sort, limit=limit, gpu_lookup=find_gpu,
                  peak=peak_for)
    return SweepResult(**_dump(run.report()))


def _axis_text(value: Any) -> Any:
    """An axis given as one value, a list, or the CLI's text: the list form parse_values reads."""
    if isinstance(value, (list, tuple)):
        return [str(v).lower() if isinstance(v, bool) else v for v in value]
    if isinstance(value, bool):
        return [str(value).lower()]
    return value if isinstance(value, str) else [value]
