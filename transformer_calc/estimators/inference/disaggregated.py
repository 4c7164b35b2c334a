"""Disaggregated serving: a prefill pool and a decode pool, the KV cache sent between them.

`tcalc serve --disaggregate xPyD`: x prefill instances and y decode instances, each of T GPUs
(max(T, ep) with wide expert parallelism: ep/T attention groups per instance, each with its own
prompts and sequences in flight, every rate below times the groups)
(Zhong et al. 2024, "DistServe"; Patel et al. 2024, "Splitwise"; as SGLang's and NVIDIA Dynamo's
PD disaggregation run it). Per instance, at the expected rates (expected.py):

- prefill: an instance prefills k = max(1, ⌊N_step / P⌋) prompts per step (the step's token
  budget N_step = max_num_batched_tokens; a prompt longer than it is one prompt per step); the
  step is `roofline.prefill_step` of k prompts at the expected rates, t_p. Its rate is
  r_p = k / t_p requests/s. The prefill samples the first token (as SGLang's and Dynamo's prefill
  workers do), so TTFT = t_p + the wait for the prefill worker (an M/D/1 queue at the pool's load,
  Pollaczek-Khinchine: ρ·t_p / (2(1 − ρ)), ρ = λ / (x·r_p)).
- KV transfer: every GPU of the prefill instance sends its shard of the prompt's cache
  (kv_bytes(P) / T) to its peer in the decode instance, all T in parallel, over the link between
  the pools: NVLink when both pools fit in one NVLink domain ((x + y)·T <= node_size: a GB200/GB300
  NVL72 rack), else the per-GPU NIC (`train.Network`). t_kv = kv_bytes(P)/T / bw + latency; it
  delays the second token, not the first. The link bounds a prefill instance at r_kv = 1 / t_kv'
  requests/s (t_kv' the bandwidth term: the NICs of one instance are busy for it per request).
- decode: an instance keeps B sequences in flight, every step one token of each at the mean
  context P + O/2 (no prefill in its steps); TPOT = the expected decode step. B is the largest that
  meets the TPOT target and fits the decode instance's paged cache (serving.capacity at P + O − 1
  tokens) and the engine's cap, or --B. Its rate r_d = B / ((O − 1)·TPOT) requests/s (the first of
  the O tokens came from the prefill).
- the pools: requests/s = min(x·min(r_p, r_kv), y·r_d); the pool that binds is the bottleneck; the
  ratio that balances them is y/x = min(r_p, r_kv) / r_d decode instances per prefill instance.

Conventions: the prefill pool's cache holds only the prompts in flight (a handful), so its capacity
is not a limit; the transfer is not overlapped with the prefill (layer-wise streaming, as Mooncake
and NIXL can do, would hide part of it: t_kv is an upper bound of the added delay).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable
from dataclasses import dataclass

from transformer_calc.devices.hardware import GPU
from transformer_calc.estimators.inference.expected import Efficiency, expected_step, prompt_efficiency
from transformer_calc.estimators.inference.roofline import InferenceSpec, decode_step, kv_cache, prefill_step
from transformer_calc.estimators.inference.serving import (
    ServingSpec,
    at_tensor_parallel,
    capacity,
    with_bench_limits,
    replica_layout,
    sequence_limit,
)
from transformer_calc.model.config import ModelConfig

@dataclass(frozen=True)
class Disaggregated:
    """x prefill and y decode instances of T GPUs (module docstring)."""

    prefill_instances: int  # x
    decode_instances: int  # y
    tensor_parallel: int
    gpus: int  # (x + y)·max(T, ep)
    link: str  # nvlink | network
    link_bytes_s: float  # per GPU, one direction
    kv_bytes_per_request: int  # the prompt's cache, the whole model
    kv_transfer_s: float  # per request: every GPU's shard in parallel, + the link's latency
    prefill_batch: int  # k prompts per prefill step
    prefill_step_s: float  # t_p
    prefill_requests_per_s: float  # per instance: min(k / t_p, the link's rate)
    decode_concurrency: int  # B per attention group of a decode instance (T GPUs)
    tpot_s: float
    decode_requests_per_s: float  # per instance
    decode_tokens_per_s: float  # per instance
    requests_per_s: float  # the whole deployment
    tokens_per_s: float  # output tokens/s, the whole deployment
    ttft_s: float  # the prefill step (+ its queue at the request rate, when one is given)
    bottleneck: str  # prefill | decode
    balanced_decode_per_prefill: float  # y/x at which both pools run at the same rate
    max_concurrent_sequences: int  # per decode instance (its paged cache)


def _decode_batch(tpot: Callable[[int], float], b_max: int, tpot_s: float | None, concurrency: int | None) -> int:
    """B per decode instance: the given concurrency, else the largest B (at most b_max) whose step meets the
    TPOT target (TPOT grows with B: bisection), 1 when even one sequence misses it."""
    if concurrency is not None:
        if concurrency > b_max:
            raise ValueError(f"concurrency {concurrency} exceeds the {b_max} sequences a decode instance holds")
        return concurrency
    if tpot_s is None or tpot(b_max) <= tpot_s:
        return b_max
    if tpot(1) > tpot_s:
        return 1  # the target is out of reach; reported at one sequence
    lo, hi = 1, b_max
    while hi - lo > 1:  # bounded: log2(b_max) halvings
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if tpot(mid) <= tpot_s else (lo, mid)
    return lo


def disaggregate(
    m: ModelConfig, gpu: GPU, spec: InferenceSpec, eff: Efficiency, serving: ServingSpec, *,
    prefill_instances: int, decode_instances: int, prompt_len: int, output_len: int,
    tpot_s: float | None = None, concurrency: int | None = None, request_rate: float | None = None,
) -> Disaggregated:
    """The two pools at spec.tensor_parallel GPUs per instance (module docstring). ValueError when
    the decode instance holds no sequence, or a given concurrency does not fit."""
    x, y, T = prefill_instances, decode_instances, spec.tensor_parallel
    if x < 1 or y < 1:
        raise ValueError(f"disaggregate needs at least one prefill and one decode instance (got {x}P{y}D)")
    P, O = prompt_len, output_len
    serving = with_bench_limits(at_tensor_parallel(serving, gpu, T), m, gpu, spec, P, O)
    per_instance, groups = replica_layout(T, spec.expert_parallel)  # wide EP: ep/T attention groups
    gpus = (x + y) * per_instance
    # ---- the link between the pools
    bw, lat = eff.network.link(gpus)
    link = "nvlink" if gpus <= eff.network.node_size else "network"
    kv_bytes = kv_cache(m, dataclasses.replace(spec, batch_size=1, prompt_len=P, new_tokens=1), P).total_bytes
    shard = kv_bytes / T  # every GPU sends its shard (MLA's latent is whole on every GPU: each sends its own copy's share)
    transfer_s = shard / bw + lat
    link_rate = bw / shard if shard else math.inf
    # ---- prefill: k prompts per step
    k = max(1, serving.max_num_batched_tokens // P)
    pre_spec = dataclasses.replace(spec, batch_size=k, prompt_len=P, new_tokens=1)
    t_p = expected_step(m, gpu, pre_spec, prompt_efficiency(eff), prefill_step(m, gpu, pre_spec)).time_s + eff.request_s
    r_p = groups * min(k / t_p, link_rate)
    # ---- decode: B in flight, decode-only steps
    run = dataclasses.replace(spec, batch_size=1, prompt_len=P, new_tokens=O)
    cap = capacity(m, gpu, run, serving)
    b_max = min(cap.max_concurrent_sequences, sequence_limit(serving, cap))
    if b_max < 1:
        raise ValueError(f"a decode instance of T = {T} holds no sequence of {P + O - 1} tokens in its cache")
    context = P + max(O // 2, 1)

    def tpot(b: int) -> float:
        d = dataclasses.replace(spec, batch_size=b, prompt_len=P, new_tokens=max(O, 2))
        return expected_step(m, gpu, d, eff, decode_step(m, gpu, d, context)).time_s

    b = _decode_batch(tpot, b_max, tpot_s, concurrency)
    t_d = tpot(b)
    steps = max(O - 1, 1)  # the first token came from the prefill
    r_d = groups * b / (steps * t_d)
    requests = min(x * r_p, y * r_d)
    wait = 0.0  # without a request rate: the unloaded TTFT
    if request_rate is not None:
        if request_rate >= requests:
            raise ValueError(f"overloaded: {request_rate:.4g} requests/s, the pools serve at most {requests:.4g}")
        rho = request_rate / (x * groups * k / t_p)
        wait = rho * t_p / (2 * (1 - rho))
    return Disaggregated(
        prefill_instances=x, decode_instances=y, tensor_parallel=T, gpus=gpus, link=link, link_bytes_s=bw,
        kv_bytes_per_request=kv_bytes, kv_transfer_s=transfer_s, prefill_batch=k, prefill_step_s=t_p,
        prefill_requests_per_s=r_p, decode_concurrency=b, tpot_s=t_d, decode_requests_per_s=r_d,
        decode_tokens_per_s=groups * b / t_d, requests_per_s=requests, tokens_per_s=requests * O,
        ttft_s=t_p + wait, bottleneck="prefill" if x * r_p < y * r_d else "decode",
        balanced_decode_per_prefill=r_p / r_d, max_concurrent_sequences=cap.max_concurrent_sequences,
    )
