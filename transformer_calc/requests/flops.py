"""`tcalc params`, `tcalc flops` and `tcalc mfu`: their requests and bodies."""

from __future__ import annotations

from typing import Annotated

from transformer_calc.requests.base import DTYPE_HELP, P_HELP, count, fraction, opt, positive, whole
from transformer_calc.requests.model import ModelRequest
from transformer_calc.requests.training import WORKLOAD, GlobalBatchTokens, SeqLen


class ParamsRequest(ModelRequest):
    """`tcalc params`: the exact count; the weights line in a dtype; the share of one T rank."""

    command = "params"
    common = ('model', 'tensor', 'dtype')  # the options shown first (help, MCP schema)
    dtype: Annotated[str | None, opt("--dtype", help="Compute dtype of the weights line: fp32 | fp16 | bf16 | fp8 \\[default: bf16].", job=False)] = None
    p: Annotated[int | None, opt("--p", help="p: bytes per value of the compute dtype (4 fp32, 2 bf16, 1 fp8) \\[default: 2].", parse=whole, job=False)] = None
    tensor: Annotated[int, opt("--T", "--tensor-parallel", help="T: tensor-parallel ranks.", parse=whole, job=False)] = 1




Causal = Annotated[bool, opt("--causal/--no-causal", help="Halve the attention scores and re-weighting FLOPs (Megatron, FlashAttention convention) \\[default: full, as eager PyTorch].", job=False)]
Recompute = Annotated[str | None, opt("--recompute", help="none | selective | full | op: hardware FLOPs (Korthikanti et al. 2022; op: torchtitan per-op AC) \\[default: none].")]
Dtype = Annotated[str | None, opt("--dtype", help=DTYPE_HELP + ", whose dense peak is the denominator \\[default: bf16, else fp16].", job=False)]
PeakP = Annotated[int | None, opt("--p", help=P_HELP + " \\[default: 2].", parse=whole, job=False)]


class FlopsRequest(ModelRequest):
    """`tcalc flops`: a step's FLOPs; training time for a token budget; compute-optimal sizing."""

    command = "flops"
    common = ('model', 'seq_len', 'batch_size', 'tokens', 'gpus', 'gpu', 'mfu')  # the options shown first (help, MCP schema)
    section = "training"
    seq_len: SeqLen = None
    batch_size: Annotated[int | None, opt("--B", "--batch-size", help="B: sequences per step \\[default: 1].", panel=WORKLOAD, parse=whole)] = None
    causal: Causal = False
    windowed: Annotated[bool, opt("--windowed/--no-windowed", help="Sliding/chunked layers at what a windowed kernel computes (~S·W) \\[default: off: full S×S masked, as eager PyTorch].", job=False)] = False
    recompute: Recompute = None
    tokens: Annotated[int | None, opt("--tokens", help="Training-time estimate for this token budget, e.g. 300e9 or 1.4T \\[default: none].", parse=count, job=False)] = None
    gpus: Annotated[int | None, opt("--gpus", help="GPUs for the training-time estimate \\[default: none; needed with --tokens].", parse=whole, job=False)] = None
    gpu: Annotated[str | None, opt("--gpu", help="GPU for the training-time estimate, e.g. a100-80gb \\[default: h100].", job=False)] = None
    dtype: Dtype = None
    p: PeakP = None
    mfu: Annotated[float | None, opt("--mfu", help="Assumed MFU (fraction) for the training-time estimate \\[default: 0.4].", parse=fraction, job=False)] = None
    budget: Annotated[int | None, opt("--budget", help="Compute-optimal N and tokens for this FLOP budget, e.g. 1e24 \\[default: none].", parse=count, job=False)] = None




class MfuRequest(ModelRequest):
    """`tcalc mfu`: MFU and HFU from a measured step time (with the global batch) or throughput."""

    command = "mfu"
    common = ('model', 'seq_len', 'gpus', 'gpu', 'global_batch', 'step_time', 'tokens_per_s')  # the options shown first (help, MCP schema)
    section = "training"
    seq_len: SeqLen = None
    gpus: Annotated[int, opt("--gpus", help="GPUs (accelerator chips) in the run.", parse=whole, job=False)] = 1
    gpu: Annotated[str | None, opt("--gpu", help="GPU, e.g. a100-80gb \\[default: h100].", job=False)] = None
    dtype: Dtype = None
    p: PeakP = None
    global_batch: Annotated[int | None, opt("--global-batch", help="Sequences per optimizer step (all GPUs) \\[default: none; with --step-time].", parse=whole, job=False)] = None
    global_batch_tokens: GlobalBatchTokens = None
    hfu_convention: Annotated[str, opt("--hfu-convention", help="executed (the recomputed attention core once) | paper (Korthikanti et al. 2022 eq. 8: three times).", job=False)] = "executed"
    step_time: Annotated[float | None, opt("--step-time", help="Measured seconds per step \\[default: none; with --global-batch].", parse=positive, job=False)] = None
    tokens_per_s: Annotated[float | None, opt("--tokens-per-s", help="Measured throughput, tokens/s (all GPUs) \\[default: none; instead of --step-time].", parse=positive, job=False)] = None
    recompute: Recompute = None
    causal: Causal = False

