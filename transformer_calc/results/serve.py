"""`tcalc serve`: layouts of N GPUs against latency targets under continuous batching.

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
from transformer_calc.results.common import expected_dict_assumptions, model_dict, network_for
from transformer_calc.results.inference import inference_efficiency, inference_spec, serving_spec


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
    from transformer_calc.estimators.inference.serving import search

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




class ServeResult(Result):
    model: dict[str, Any]
    serve: dict[str, Any]
    best: dict[str, Any] | None
    layouts: list[dict[str, Any]]
    expected_assumptions: dict[str, Any]
    checkpoint: dict[str, Any] | None = None


def serve_request(
    m: ModelConfig, section: dict[str, Any], flags: dict[str, Any], checkpoint: Any = None, *,
    ttft_s: float | None = None, tpot_s: float | None = None, request_rate: float | None = None,
    gpus: int | None = None,
) -> dict[str, Any]:
    """`tcalc serve` from its options: each a flag (`flags`: the inference keys, the expected-latency
    and serving settings, node_size, inter_node_gb_s), else the job file's inference: section, else
    the default; the CLI and the Python API both call it."""
    from transformer_calc.model.config import resolve
    from transformer_calc.errors import TcalcError
    from transformer_calc.sources.presets import gpu as find_gpu

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
