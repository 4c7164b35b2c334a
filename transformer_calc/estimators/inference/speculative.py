"""Speculative decoding: a draft proposes k tokens, the target verifies them in one forward pass.

Source: Leviathan, Kalman and Matias 2023, "Fast Inference from Transformers via Speculative
Decoding" (ICML), §3: with an acceptance rate α (the chance the target accepts a draft token,
taken as independent per token) and k draft tokens per step, a verification step yields

    E[tokens] = (1 − α^(k+1)) / (1 − α)      (k + 1 when α = 1)

tokens per sequence (the accepted prefix plus the target's own next token). Chen et al. 2023
("Accelerating LLM Decoding with Speculative Sampling") give the same. Multi-token prediction
(DeepSeek-V3 §2.2, `mtp_layers`) uses the model's own MTP modules as the draft.

Costs per verification step, each an expected step time (expected.py) on the same GPUs:

- the draft: k autoregressive decode steps of the draft model, batch B, at the current context
  (a separate draft model at the target's T, its own weight format or the target's plain dtype;
  an MTP draft: one step of `mtp_layers` extra blocks of the target's shape with the shared
  embedding and LM head, per draft token; MTP weights are the model's `mtp` parameters, / T);
- the target: one forward pass of k + 1 tokens per sequence at the current context, the K/V of
  the context read once and k + 1 positions written and sampled (verification scores every
  position).

Time per output token = (k·t_draft + t_verify) / E[tokens]; speed-up = the plain decode step's
time / that. Speculation stops paying at the α where E[tokens] = (k·t_draft + t_verify) / t_decode,
found by bisection (E grows with α from 1 to k + 1): below it the plain decode is faster. The
draft's KV cache and weights are held beside the target's (reported per GPU). Rejected tokens'
wasted draft work and the target's K/V writes of rejected positions are in the costs above; the
acceptance rate is an input (it depends on the draft, the data and the sampling temperature).
"""

from __future__ import annotations

from transformer_calc.errors import TcalcError

import dataclasses
from dataclasses import dataclass

from transformer_calc.model.config import ModelConfig
from transformer_calc.estimators.inference.expected import Efficiency, expected_step, kernel_classes, step_time
from transformer_calc.devices.hardware import GPU
from transformer_calc.estimators.inference.roofline import (
    DTYPE_BITS,
    InferenceSpec,
    rank_shard,
    roofline_step,
    decode_step,
    inference_memory,
    kv_cache,
)
from transformer_calc.estimators.params import count_params

BISECTION_STEPS = 60  # halvings of [0, 1] for the break-even α (2^-60: below any float's resolution)


def expected_tokens_per_step(alpha: float, k: int) -> float:
    """(1 − α^(k+1)) / (1 − α): tokens a verification step yields per sequence (Leviathan et al.)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"speculative_tokens ({k!r}) must be a whole number >= 1")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1:
        raise ValueError(f"acceptance_rate ({alpha!r}) must be a fraction in [0, 1]")
    if alpha == 1:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def mtp_draft(m: ModelConfig) -> ModelConfig:
    """The draft that the model's multi-token-prediction modules form: `mtp_layers` blocks of the
    target's shape (MoE blocks for a MoE target: DeepSeek-V3's MTP module), with the shared
    embedding and LM head."""
    if m.mtp_layers < 1:
        raise ValueError(f"{m.name or 'the model'} has no multi-token-prediction modules (mtp_layers = 0); "
                         "give a draft model instead")
    data = m.model_dump()
    data.update(name=f"{m.name or 'model'} MTP", n_layers=m.mtp_layers, mtp_layers=0, first_dense_layers=0,
                dense_layer_ids=(), moe_layer_step=1)
    return ModelConfig.model_validate(data)


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding of one batch at one context (module docstring)."""

    kind: str  # "draft" or "mtp"
    draft_name: str | None
    speculative_tokens: int  # k
    acceptance_rate: float  # α
    expected_tokens_per_step: float
    context_len: int
    draft_step_s: float  # one draft decode step
    verify_step_s: float  # the target's pass over k + 1 tokens
    step_s: float  # k·draft + verify
    time_per_output_token_s: float  # step / E[tokens]
    baseline_time_per_output_token_s: float  # the plain decode step
    speedup: float
    break_even_acceptance_rate: float | None  # below it speculation is slower; None: never pays
    draft_weights_bytes: int  # per GPU
    draft_kv_cache_bytes: int  # per GPU, B sequences at the peak context
    target_kv_cache_bytes: int


def break_even_acceptance(ratio: float, k: int) -> float | None:
    """The acceptance rate α at which E[tokens per step](α, k) equals `ratio` (a speculative step's time over a
    plain step's): 0 when it pays at any α, None when it never does; found by bisection."""
    if ratio <= 1:
        return 0.0
    if ratio >= k + 1:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(BISECTION_STEPS):  # bounded: a fixed number of halvings
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_tokens_per_step(mid, k) < ratio else (lo, mid)
    return hi


def speculate(
    m: ModelConfig, gpu: GPU, spec: InferenceSpec, eff: Efficiency, *, draft: ModelConfig | None,
    speculative_tokens: int, acceptance_rate: float,
) -> Speculation:
    """Speculative decoding of the spec's batch at the middle of its generation, S + N_new/2
    (draft None: the model's MTP modules)."""
    k, alpha = speculative_tokens, acceptance_rate
    tokens = expected_tokens_per_step(alpha, k)
    kind = "draft" if draft is not None else "mtp"
    d = draft if draft is not None else mtp_draft(m)
    if d.vocab_size != m.vocab_size:
        raise ValueError(f"the draft's vocabulary ({d.vocab_size}) differs from the target's ({m.vocab_size}); "
                         "speculative decoding needs one tokenizer")
    B, c = spec.batch_size, spec.prompt_len + max(spec.new_tokens // 2, 1)
    plain = spec.weight_dtype if spec.weight_dtype in DTYPE_BITS else "bf16"
    d_spec = dataclasses.replace(spec, weight_dtype=d.weight_format or plain, cache_kv_heads=None, expert_parallel=1)
    try:
        rank_shard(d, d_spec)
    except TcalcError:
        raise
    except ValueError as exc:
        raise ValueError(f"draft: {exc}") from None
    base = expected_step(m, gpu, spec, eff, decode_step(m, gpu, spec, c))
    # One draft token: a decode step of the draft (an MTP draft runs its blocks and the shared head).
    draft_s = expected_step(d, gpu, d_spec, eff, decode_step(d, gpu, d_spec, c)).time_s
    # The target's verification: k + 1 new tokens per sequence, the last at c + k, reading the c − 1
    # cached positions and writing k + 1 (inference.roofline_step, as a prefill chunk over a cache).
    sh = rank_shard(m, spec)
    verify, _, _ = roofline_step(m, gpu, spec, sh, k + 1, c + k, c - 1, k + 1)
    verify_s = step_time(m, gpu, spec, eff, kernel_classes(verify), B * (k + 1), B * (k + 1)).time_s
    step = k * draft_s + verify_s
    per_token = step / tokens
    break_even = break_even_acceptance(step / base.time_s, k)  # E[tokens] needed to break even
    if kind == "mtp":  # the MTP modules' own weights (the embedding and head are the target's)
        draft_weights = -(-count_params(m).mtp * DTYPE_BITS[plain] // 8) // spec.tensor_parallel
    else:
        draft_weights = inference_memory(d, gpu, d_spec).weights_bytes
    return Speculation(
        kind=kind,
        draft_name=d.name,
        speculative_tokens=k,
        acceptance_rate=alpha,
        expected_tokens_per_step=tokens,
        context_len=c,
        draft_step_s=draft_s,
        verify_step_s=verify_s,
        step_s=step,
        time_per_output_token_s=per_token,
        baseline_time_per_output_token_s=base.time_s,
        speedup=base.time_s / per_token,
        break_even_acceptance_rate=break_even,
        draft_weights_bytes=draft_weights,
        draft_kv_cache_bytes=kv_cache(d, d_spec).per_gpu_bytes,
        target_kv_cache_bytes=kv_cache(m, spec).per_gpu_bytes,
    )
