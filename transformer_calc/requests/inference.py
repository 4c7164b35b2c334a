"""Inference settings (`tcalc inference`, `serve`, `check`): the InferenceSpec, the expected-latency
efficiencies and the serving engine's settings, each resolved from the flags, then the job file's
inference: section, then the defaults; the draft model of speculative decoding."""

from __future__ import annotations

from typing import Any

from transformer_calc.model.config import ModelConfig

def inference_efficiency(gpu: Any, section: dict[str, Any], flags: dict[str, Any], network: Any = None) -> Any:
    """The expected-latency settings (expected.Efficiency) from the inference: section and flags."""
    from transformer_calc.model.config import resolve
    from transformer_calc.errors import TcalcError
    from transformer_calc.estimators.inference.expected import default_efficiency

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
    from transformer_calc.model.config import parse_bytes, resolve
    from transformer_calc.errors import TcalcError
    from transformer_calc.estimators.inference.serving import ServingSpec

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

def draft_model(text: str) -> ModelConfig:
    """A draft model for speculative decoding: a preset name, a tcalc YAML file or an HF config.json."""
    import importlib
    from pathlib import Path

    from transformer_calc.model.config import build_model

    presets = importlib.import_module("transformer_calc.sources.presets")  # the module; the package's name is the API's

    path = Path(text)
    if path.suffix == ".json":
        return build_model(presets.hf_spec(path), where=str(path))
    if path.suffix in (".yaml", ".yml"):
        return build_model(presets.load_job(path, flag="--draft").model, where=str(path))
    return presets.preset_model(text)

DEFAULT_INFERENCE_GPU = "a100-80gb"

def inference_spec(model: ModelConfig, section: dict[str, Any], flags: dict[str, Any],
                   checkpoint: Any = None) -> tuple[Any, str]:
    """(InferenceSpec, gpu name) from a job file's inference: section (canonical keys) with the
    flags that are not None overriding it. Defaults: B = 1, S = max_seq_len, one new token, T = 1,
    bf16 weights, the A100 80GB. With a checkpoint (a folder's, repo's or GGUF file's headers) and
    no weight dtype given, the weights are the bytes it stores (weight_dtype "checkpoint")."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.estimators.inference.roofline import InferenceSpec

    from transformer_calc.model.config import resolve
    from transformer_calc.devices.hardware import compute_dtype

    merged = resolve(flags, section)
    dtype = compute_dtype(merged.get("dtype"), merged.get("p"))  # the compute dtype (--dtype / --p)
    stored = None
    if checkpoint is not None:
        from transformer_calc.model.checkpoint import stored_weights

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
