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
from transformer_calc.results.common import model_dict


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


class ServeResult(Result):
    model: dict[str, Any]
    serve: dict[str, Any]
    best: dict[str, Any] | None
    layouts: list[dict[str, Any]]
    expected_assumptions: dict[str, Any]
    checkpoint: dict[str, Any] | None = None
