"""`tcalc inference`: KV cache, memory per GPU, prefill and decode as a roofline and as expected time,
serving capacity, speculative decoding; and the resolution of inference settings.

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
from transformer_calc.results.common import model_dict
from transformer_calc.results.common import expected_dict_assumptions


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


def capacity_dict(m: ModelConfig, gpu: Any, spec: Any, serving: Any) -> dict[str, Any]:
    """The `serving` section: the paged KV cache's capacity per GPU and per replica."""
    from transformer_calc.estimators.inference.serving import budget_matrix, capacity, longest_context

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

    from transformer_calc.model.config import build_model

    presets = importlib.import_module("transformer_calc.sources.presets")  # the module; the package's name is the API's

    path = Path(text)
    if path.suffix == ".json":
        return build_model(presets.hf_spec(path), where=str(path))
    if path.suffix in (".yaml", ".yml"):
        return build_model(presets.load_job(path, flag="--draft").model, where=str(path))
    return presets.preset_model(text)


def speculative_dict(m: ModelConfig, gpu: Any, spec: Any, eff: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The `speculative` section: a draft (or the MTP modules) proposing k tokens at acceptance α."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.estimators.inference.speculative import speculate

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
    from transformer_calc.estimators.inference.expected import default_efficiency, estimate_expected
    from transformer_calc.estimators.inference.roofline import estimate_inference, expert_layout, min_tensor_parallel
    from transformer_calc.estimators.inference.serving import ServingSpec

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


class InferenceResult(Result):
    model: dict[str, Any]
    inference: dict[str, Any]
    kv_cache: dict[str, Any]
    memory: dict[str, Any]
    prefill: dict[str, Any]
    decode: dict[str, Any]
    time_to_first_token_s: float
    total_s: float
    tokens_per_s: float
    compute_bound_batch: int | None
    compute_bound_batch_weights_only: float
    expected: dict[str, Any]
    serving: dict[str, Any] | None = None
    speculative: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None
