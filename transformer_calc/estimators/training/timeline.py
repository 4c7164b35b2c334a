"""Peak training memory: the memory timeline of one training step on one GPU.

`training_memory` (memory.py) gives what a GPU holds: model states and the activations kept for
backward. They are never all alive together with the step's transients, and the transients can set
the peak: the loss's B·S·V tensors at today's vocabularies, the attention-score gradients of eager
attention, ZeRO-3's gathered parameters, the optimizer's temporaries. This module walks the step
phase by phase for each pipeline stage and reports the largest phase, named, with its breakdown;
the sum of every term stays available as an upper bound (docs/formulas.md §2.5).

Phases (one micro-batch; with a pipeline, the stage's in-flight micro-batches are alive):

  forward          states + the stored activations of every in-flight micro-batch
  loss forward     (last stage) + the logits and their fp32 copy while the loss runs
  loss backward    (last stage) + the gradients of the loss w.r.t. log-probabilities and logits
  backward         at the stage's last block: its MLP and norm activations already freed, the
                   attention backward's transients (eager: the S x S score gradients), the
                   recomputation working set, the head's gradients
  backward of the first block
                   the same transients at the stage's first block, with (nearly) every gradient
                   allocated and only that block's activations left
  backward end     all gradients, no activations
  optimizer step   all gradients + the optimizer's temporaries

Gradients are resident through the forward when the framework keeps a buffer (Megatron-core's
main_grad) or when gradients accumulate over several micro-batches (pipelines, accumulation);
otherwise (PyTorch/DeepSpeed, one micro-batch) they appear during the backward and are freed by
zero_grad(set_to_none=True) after the step.

Framework conventions (`Training.framework`), each with the code it follows:
- pytorch: torch.optim.AdamW's default foreach step keeps one fp32 temporary per parameter
  (torch/optim/adamw.py `_multi_tensor_adamw`: `exp_avg_sq_sqrt = torch._foreach_sqrt(...)`);
  DistributedDataParallel copies gradients into its buckets (gradient_as_bucket_view=False, the
  default: "the saved memory size will be equal to the total gradients size" when True, per the
  DDP docs); FSDP2 (ZeRO-3) holds the unit it computes and the one it prefetches unsharded, and
  reduce-scatters one unit's unsharded gradients at a time (units: each block, and the root with
  the embedding, final norm and head).
- megatron: persistent gradient buffer (distributed/param_and_grad_buffer.py), buckets are views
  of it; fused Adam; fused SwiGLU keeps 3·F per token; vocab-parallel cross-entropy keeps the fp32
  softmax and computes the gradient in place (tensor_parallel/cross_entropy.py).
- deepspeed: ZeRO-1/2 reduce into an `reduce_bucket_size` = 5e8-element bucket and all-gather the
  updated parameters in `allgather_bucket_size` = 5e8-element buckets; ZeRO-3's working set is
  DeepSpeed's own estimate, 4 bytes x the largest layer's parameters
  (runtime/zero/stage3.py `estimate_zero3_model_states_mem_needs`: largest_layer_memory);
  fused Adam (no temporaries).

What nvidia-smi shows is more than what PyTorch allocates: the CUDA context (driver, cuBLAS and
kernel images; CUDA_CONTEXT_BYTES, an assumption of its order) and the caching allocator's
reserve (blocks cached but not in use; ALLOCATOR_RESERVE, a stated fraction of the peak). Both are
reported apart; the fit check counts the context, not the reserve.
"""

from __future__ import annotations

from transformer_calc.errors import TcalcError

from dataclasses import dataclass
from typing import Any

from transformer_calc.model.units import MIB
from transformer_calc.model.config import (
    ActivationProfile,
    CrossEntropy,
    Finetune,
    Framework,
    ModelConfig,
    Optimizer,
    Parallelism,
    Precision,
    Recompute,
    Training,
    Workload,
)
from transformer_calc.estimators.training.memory import (
    FP32_BYTES,
    FrameworkMemory,
    StageMemory,
    block_parts,
    ceil_div,
    eager_code,
    head_activations,
    kv_heads_per_rank,
    layer_activations,
    layers_differ,
    training_memory,
)
from transformer_calc.estimators.mixers import MIXERS
from transformer_calc.estimators.params import shard_params
from transformer_calc.estimators.training.layer_structure import layer_structure

CUDA_CONTEXT_BYTES = 512 * MIB  # CUDA context + cuBLAS/cuDNN workspaces + kernel images: of the
# order PyTorch users report on A100/H100 (300-800 MiB with driver and libraries); an assumption
ALLOCATOR_RESERVE = 0.05  # caching-allocator blocks reserved but unused, as a fraction of the peak
DEEPSPEED_REDUCE_BUCKET = 500_000_000  # zero_optimization.reduce_bucket_size default (elements)
DEEPSPEED_ALLGATHER_BUCKET = 500_000_000  # zero_optimization.allgather_bucket_size default
DEEPSPEED_Z3_BYTES_PER_PARAM = 4  # estimate_zero3_model_states_mem_needs: 4 x largest layer
CHUNK_TOKENS = 1024  # chunked cross-entropy: tokens per chunk (an assumption; Liger sizes it ~V/D)
ADAM_FOREACH_TEMPS = 1  # foreach AdamW: one temporary per parameter (the sqrt of the second moment)


@dataclass(frozen=True)
class Phase:
    """What one GPU holds at one moment of the step (bytes)."""

    name: str
    weights: int
    gradients: int
    optimizer: int
    activations: int  # stored for backward (and being recomputed)
    transient: int  # the phase's own temporaries (logits, gradients of intermediates, optimizer temps)
    gathered: int  # ZeRO-3 / FSDP parameters gathered unsharded
    buckets: int  # gradient communication buffers

    @property
    def total(self) -> int:
        return (
            self.weights + self.gradients + self.optimizer + self.activations
            + self.transient + self.gathered + self.buckets
        )  # fmt: skip

    def as_dict(self) -> dict[str, int | str]:
        return {
            "phase": self.name,
            "weights_bytes": self.weights,
            "gradients_bytes": self.gradients,
            "optimizer_bytes": self.optimizer,
            "activations_bytes": self.activations,
            "transient_bytes": self.transient,
            "gathered_bytes": self.gathered,
            "buckets_bytes": self.buckets,
            "total_bytes": self.total,
        }


@dataclass(frozen=True)
class Timeline:
    """The phases of one training step on one pipeline stage's GPU."""

    stage: StageMemory
    phases: tuple[Phase, ...]

    @property
    def peak(self) -> Phase:
        return max(self.phases, key=lambda ph: ph.total)  # the first of equal ones

    @property
    def peak_bytes(self) -> int:
        return self.peak.total

    @property
    def sum_bytes(self) -> int:
        """Every term at once (the largest transient of each kind): an upper bound of the peak."""
        return (
            self.stage.weights + self.stage.optimizer + max(ph.gradients for ph in self.phases)
            + self.stage.activations + sum(_kinds(self.phases).values())
            + max(ph.gathered for ph in self.phases) + max(ph.buckets for ph in self.phases)
        )  # fmt: skip


def _kinds(phases: tuple[Phase, ...]) -> dict[str, int]:
    """The largest transient of each phase (summed for the upper bound)."""
    return {ph.name: ph.transient for ph in phases}


def micro_batches(tr: Training, par: Parallelism) -> int:
    """Micro-batches per optimizer step: given, or P under a pipeline (1F1B needs >= P), else 1."""
    if tr.micro_batches is not None:
        return tr.micro_batches
    return par.pipeline if par.pipeline > 1 else 1


def stage_timeline(
    m: ModelConfig, w: Workload, tr: Training, par: Parallelism, st: StageMemory, *, memo: dict | None = None
) -> Timeline:
    """The phases of one step on the GPU of pipeline stage `st` (see the module docstring).
    `memo`: a dict shared by the stages of one (m, w, tr, par), holding what does not depend on
    the stage (a block's activations), so that it is computed once for all of them.

    The base is the stage's model states and stored activations (`st`); the contributions are the
    head's gradients, the loss's B·S·V tensors (`_loss_tensors`), the backward's transients through
    the last and the first block (`_backward`), the optimizer's temporaries, ZeRO-3's gathered
    parameters and the gradient buckets (`_gathered_and_buckets`) and QLoRA's dequantized matrix."""
    memo = {} if memo is None else memo
    if par.context > 1:  # each context-parallel rank holds S/cp tokens (memory.training_memory)
        w = w.model_copy(update={"seq_len": w.seq_len // par.context})
    is_last = st.stage == par.pipeline - 1
    shard = shard_params(m, par.tensor, par.expert, par.expert_tensor)

    grads_fwd, head_grads = _forward_gradients(m, tr, par, st, shard, is_last)
    # Stored activations (of all in-flight micro-batches) and the last block's parts.
    if "block" not in memo:  # one block's activations without and with recomputation (stage-free)
        memo["block"] = layer_activations(m, w, tr.model_copy(update={"recompute": Recompute.none}), par)
        kept = layer_activations(m, w, tr, par).total  # the first block as stored
        memo["kept"] = block_parts(m, w, tr, par).largest if layers_differ(m) else kept  # hybrids, Gemma 4: the largest
    loss_fwd, loss_bwd = _loss_tensors(m, w, tr, par, is_last)
    bwd = _backward(m, w, tr, par, st, shard, memo["block"], memo["kept"], grads_fwd)
    opt_temp = _optimizer_temporaries(tr, st)
    gathered, resident_buckets, bwd_buckets, end_buckets, opt_buckets = _gathered_and_buckets(
        tr, par, st, shard, bwd.largest_block)
    # QLoRA: bitsandbytes dequantizes one matrix at a time to 16 bits for its matmul (forward and
    # backward): the largest one is alive as a temporary.
    dequant = 0
    if tr.finetune is Finetune.qlora:
        from transformer_calc.estimators.training.gemma4 import largest_quantized_matrix  # Gemma 4's classes too

        dequant = largest_quantized_matrix(m, par.tensor, par.expert, par.expert_tensor) * tr.p if st.n_layers else 0
    attn_bwd = bwd.attn_bwd + dequant

    W, O, G, stored = st.weights, st.optimizer, st.gradients, st.stored
    phases = [
        Phase("forward", W, grads_fwd, O, stored, dequant, gathered, resident_buckets),
    ]
    if is_last:
        phases.append(Phase("loss forward", W, grads_fwd, O, stored, loss_fwd, gathered, resident_buckets))
        phases.append(Phase("loss backward", W, grads_fwd, O, stored, loss_bwd, gathered, resident_buckets))
    phases += [
        Phase("backward", W, max(grads_fwd, head_grads), O, bwd.bwd_acts, attn_bwd, gathered,
              resident_buckets + bwd_buckets),
        Phase("backward of the first block", W, bwd.grads_first, O, bwd.first_acts, attn_bwd, gathered,
              resident_buckets + bwd_buckets),
        Phase("backward end", W, G, O, 0, 0, 0, resident_buckets + end_buckets),
        Phase("optimizer step", W, G, O, 0, opt_temp, 0, resident_buckets + opt_buckets),
    ]
    return Timeline(stage=st, phases=tuple(phases))


def _forward_gradients(m: ModelConfig, tr: Training, par: Parallelism, st: StageMemory, shard: Any,
                       is_last: bool) -> tuple[int, int]:
    """(gradients resident through the forward: with a persistent buffer or accumulation, the head's
    gradients on the last stage)."""
    persistent = tr.framework is Framework.megatron or micro_batches(tr, par) > 1
    grads_fwd = st.gradients if persistent else 0
    head_params = shard.final_norm + (shard.lm_head or shard.tied_head_copy or shard.embedding)
    if tr.adapters:  # only a trained head has a gradient (PEFT modules_to_save)
        from transformer_calc.estimators.training.trainable import head_trained

        head_params = (shard.lm_head or shard.tied_head_copy or shard.embedding) if head_trained(m, tr) else 0
    return grads_fwd, min(st.gradients, head_params * tr.grad_bytes) if is_last else 0


def _loss_tensors(m: ModelConfig, w: Workload, tr: Training, par: Parallelism, is_last: bool) -> tuple[int, int]:
    """(forward, backward) bytes of the loss's B·S·V tensors (vocabulary-parallel: V/T per rank), last
    stage only, by cross-entropy kernel."""
    B, S, T, p = w.batch_size, w.seq_len, par.tensor, tr.p
    bsv = B * S * ceil_div(m.vocab_size, T)
    loss_fwd = loss_bwd = 0
    if is_last and tr.head_activations and tr.activations is not ActivationProfile.seed:
        kernel = tr.loss_kernel
        upcast = FP32_BYTES if p < FP32_BYTES else 0
        if kernel is CrossEntropy.eager:
            # logits (p) and their fp32 copy, log_softmax's output being stored (in `stored`);
            # backward: d(log-probs) and d(logits) in fp32 together (the cast of d(logits) back to
            # p comes after d(log-probs) is freed: never more than two B·S·V buffers).
            loss_fwd = p * bsv + upcast * bsv
            loss_bwd = 2 * FP32_BYTES * bsv
        elif kernel is CrossEntropy.fused:
            # the fp32 softmax is built from the logits (kept: stored); its gradient in place
            loss_fwd = p * bsv
            loss_bwd = p * bsv if upcast else 0
        else:  # chunked: one chunk's fp32 logits and their gradient
            chunk = min(B * S, CHUNK_TOKENS) * ceil_div(m.vocab_size, T)
            loss_fwd = loss_bwd = 2 * FP32_BYTES * chunk
    return loss_fwd, loss_bwd


@dataclass(frozen=True)
class _Backward:
    attn_bwd: int  # the attention (or mixer) backward's transient
    bwd_acts: int  # activations alive through the last block's backward
    first_acts: int  # ... through the first block's
    grads_first: int  # gradients alive through the first block's backward
    largest_block: int  # the largest block's parameters (a ZeRO-3 unit)


def _backward(m: ModelConfig, w: Workload, tr: Training, par: Parallelism, st: StageMemory, shard: Any,
              block: Any, kept: int, grads_fwd: int) -> _Backward:
    """The backward's peaks: through the stage's last block (its MLP and norm activations are consumed,
    the attention backward allocates the score gradients, eager, or dq/dk/dv, flash) and through its
    first block (nearly every gradient exists)."""
    B, S, T, p = w.batch_size, w.seq_len, par.tensor, tr.p
    is_first, is_last = st.stage == 0, st.stage == par.pipeline - 1
    stored, working = st.stored, st.recompute_working
    A_t = m.n_heads // T
    kv_t = kv_heads_per_rank(m.attention_kv_heads, T)  # MLA: A_t (T divides A)
    # Consumed before the attention backward peaks: the block's MLP activations and its norms but
    # the first (the block's input norm is differentiated last), W_O's input and, when the softmax
    # is kept in fp32, its cast copy that P·V took.
    norms = max(m.norms_per_layer, 1)
    layers = layer_structure(m)
    hd, v_dim, kv_t = layers.last_attention_widths(m, m.head_dim, m.v_dim, kv_t)  # Gemma 4: the last layer's class
    consumed = block.mlp + block.norm * (norms - 1) // norms + p * B * S * A_t * v_dim
    if tr.flash:
        attn_bwd = p * B * S * (2 * A_t * hd + kv_t * (hd + v_dim))
    else:
        fp32_softmax = (
            tr.activations is ActivationProfile.torch_eager and eager_code(m).softmax_fp32 and p < FP32_BYTES
        )
        soft = FP32_BYTES if fp32_softmax else p
        attn_bwd = 2 * soft * B * A_t * S * S  # the softmax's output gradient and input gradient
        consumed += p * B * A_t * S * S if fp32_softmax else 0
    # the head's and the loss's stored tensors are consumed by the loss backward
    stored_bwd = stored - head_activations(m, w, tr, par)[1] if is_last else stored
    if tr.recompute is Recompute.full:
        bwd_acts = stored_bwd + max(working - consumed, 0)
    else:
        bwd_acts = max(stored_bwd - consumed, 0) + working
    # ... and through the stage's first block, when (without a persistent buffer) nearly every
    # gradient exists: this micro-batch keeps only that block's activations (and the embedding's),
    # the other in-flight micro-batches all of theirs. `kept`: the first block as stored (recompute
    # applied; a hybrid's largest block).
    others = stored * (st.in_flight - 1) // st.in_flight
    first_extra = head_activations(m, w, tr, par)[0] if is_first else 0
    if tr.recompute is Recompute.full:
        first_acts = others + kept + first_extra + max(working - consumed, 0)
    else:
        first_acts = others + max(kept - consumed, 0) + first_extra + working
    # missing then: the block's gradients and (untied, first stage) the embedding's; a tied table
    # already has its gradient from the head
    untied_embedding = is_first and not (m.tied_embeddings and is_last)
    largest_block, first_block = layers.block_params(m, shard)
    first_params = first_block + (shard.embedding if untied_embedding else 0)
    grads_first = max(grads_fwd, st.gradients - st.gradients * min(first_params, st.params) // max(st.params, 1))
    # a mixer's backward may allocate more than attention's (Mamba's loop over tokens); no mixer, no term
    fused = tr.activations is not ActivationProfile.torch_eager
    attn_bwd = max([attn_bwd] + [MIXERS[k].backward_transient_bytes(m, B, S, p, T, fused) for k in m.mixer_kinds])
    if layers.recomputed_block_peaks_at_start and tr.recompute is Recompute.full:
        # the block's backward peaks as it starts, the whole block alive (Gemma 4); the larger of the two
        bwd_acts = max(bwd_acts, stored_bwd + working - attn_bwd)
        first_acts = max(first_acts, others + kept + first_extra + working - attn_bwd)
    if st.n_layers == 0:
        attn_bwd, bwd_acts, first_acts = 0, stored, stored
    return _Backward(attn_bwd, bwd_acts, first_acts, grads_first, largest_block)


def _optimizer_temporaries(tr: Training, st: StageMemory) -> int:
    """Optimizer temporaries: foreach Adam(W) in PyTorch, one per (ZeRO-sharded) parameter in the
    dtype of the states (fp32; bf16 for pure-bf16 training)."""
    if tr.optimizer_fused or tr.optimizer not in (Optimizer.adamw, Optimizer.adam):
        return 0
    sharded = st.optimizer // max(_opt_bytes(tr), 1)  # 0 when the optimizer is offloaded
    state_bytes = tr.p if tr.precision is Precision.bf16 else FP32_BYTES
    return ADAM_FOREACH_TEMPS * state_bytes * sharded


def _gathered_and_buckets(tr: Training, par: Parallelism, st: StageMemory, shard: Any,
                          largest_block: int) -> tuple[int, int, int, int, int]:
    """(ZeRO-3 / FSDP gathered parameters, gradient buckets resident, in the backward, at its end, in
    the optimizer step). FSDP units: every block, and the root (embedding, final norm, head);
    DeepSpeed's "layers": blocks, the embedding, the head."""
    fw, p = tr.framework, tr.p
    block_unit = largest_block
    root_unit = shard.embedding + shard.final_norm + shard.lm_head
    largest_layer = max(block_unit, shard.embedding, shard.lm_head)
    gathered = 0
    if par.zero >= 3 and par.data > 1 and not (fw is Framework.torchtitan and par.pipeline > 1):  # torchtitan's PP: kept whole
        if fw is Framework.deepspeed:
            gathered = DEEPSPEED_Z3_BYTES_PER_PARAM * largest_layer
        else:  # the unit computed and the one prefetched: at most the root and a block
            gathered = (max(root_unit, block_unit) + block_unit) * p
    resident_buckets = bwd_buckets = end_buckets = opt_buckets = 0
    # Gradient buckets hold trainable parameters' gradients only (adapters: a small fraction).
    trained = st.trainable_params

    def frac(units: int) -> int:
        return units if trained == st.params else ceil_div(units * trained, max(st.params, 1))

    block_unit_g, root_unit_g = frac(block_unit), frac(root_unit)
    offloaded_grads = st.host_gradients > 0
    if par.data > 1 or offloaded_grads:
        if fw in (Framework.pytorch, Framework.torchtitan) and not offloaded_grads:
            if par.zero == 0:
                resident_buckets = st.gradients  # DDP's bucket copies of every gradient
            else:  # FSDP reduce-scatters one unit's unsharded gradients at a time
                bwd_buckets = block_unit_g * tr.grad_bytes
                end_buckets = max(root_unit_g, block_unit_g) * tr.grad_bytes
        elif fw is Framework.deepspeed or offloaded_grads:
            # DeepSpeed's reduce bucket (the way gradients leave the GPU under ZeRO-Offload too)
            bwd_buckets = end_buckets = min(DEEPSPEED_REDUCE_BUCKET, trained) * tr.grad_bytes
            if par.zero in (1, 2):
                opt_buckets = min(DEEPSPEED_ALLGATHER_BUCKET, st.params) * p
    return gathered, resident_buckets, bwd_buckets, end_buckets, opt_buckets

def _opt_bytes(tr: Training) -> int:
    """Optimizer bytes per parameter held (per trainable parameter under adapters: no master)."""
    from transformer_calc.estimators.training.memory import optimizer_bytes_per_param, trainable_optimizer_bytes

    return trainable_optimizer_bytes(tr) if tr.adapters else optimizer_bytes_per_param(tr)


def peak_memory(
    m: ModelConfig, w: Workload, tr: Training = Training.model_validate({}), par: Parallelism = Parallelism(),
    *, all_stages: bool = True, framework_memory: FrameworkMemory | None = None,
) -> Timeline:
    """The timeline of the pipeline stage whose peak is largest (ties: the earlier stage).
    `framework_memory`: Megatron-core settings outside `Training` (memory.FrameworkMemory)."""
    stages = training_memory(m, w, tr, par, all_stages=all_stages, framework_memory=framework_memory)
    memo: dict = {}
    return max((stage_timeline(m, w, tr, par, st, memo=memo) for st in stages), key=lambda tl: tl.peak_bytes)


def stage_timelines(
    m: ModelConfig, w: Workload, tr: Training = Training.model_validate({}), par: Parallelism = Parallelism(),
    *, all_stages: bool = True, framework_memory: FrameworkMemory | None = None,
) -> list[Timeline]:
    memo: dict = {}
    stages = training_memory(m, w, tr, par, all_stages=all_stages, framework_memory=framework_memory)
    return [stage_timeline(m, w, tr, par, st, memo=memo) for st in stages]


def allocator_reserve(peak_bytes: int, fraction: float = ALLOCATOR_RESERVE) -> int:
    """The caching allocator's unused reserve, a stated fraction of the peak (whole bytes)."""
    return int(peak_bytes * fraction)


def fit_capacity(gpu_bytes: int, cuda_context: int = CUDA_CONTEXT_BYTES) -> int:
    """What PyTorch can allocate on a GPU of `gpu_bytes`: its capacity less the CUDA context."""
    return gpu_bytes - cuda_context


def max_micro_batch(m: ModelConfig, w: Workload, tr: Training, par: Parallelism, capacity: int) -> int:
    """Largest micro-batch B whose peak (`peak_memory`: every stage, every phase) fits in
    `capacity` bytes (0: not even B = 1). The one fit finder: `tcalc memory --gpu` reports it.

    Nearly every phase is affine in B (states fixed; activations and transients linear), so the
    lines through B = 1 and 2 give B_max = min over phases of (capacity - fixed) // per_sequence
    in one step. Not every term is: the chunked cross-entropy holds min(B·S, CHUNK_TOKENS) tokens
    of logits, and integer shares round. So the estimate is only a start: it is kept when B fits
    and B + 1 does not, else the answer is bracketed (doubling) and bisected, evaluating the peak
    itself; the result always satisfies "B fits, B + 1 does not".
    """

    def fits(b: int) -> bool:
        return peak_memory(m, w.model_copy(update={"batch_size": b}), tr, par).peak_bytes <= capacity

    if not fits(1):
        return 0
    one = stage_timelines(m, w.model_copy(update={"batch_size": 1}), tr, par)
    two = stage_timelines(m, w.model_copy(update={"batch_size": 2}), tr, par)
    limits = [
        (capacity - (pa.total - (pb.total - pa.total))) // (pb.total - pa.total)
        for a, b in zip(one, two) for pa, pb in zip(a.phases, b.phases) if pb.total > pa.total
    ]
    if not limits:
        raise ValueError("the peak memory does not grow with the micro-batch; no largest B exists")
    guess = max(min(limits), 1)
    if fits(guess):
        low, high = guess, guess + 1
        while fits(high):  # the lines undershot: double until a B does not fit
            low, high = high, 2 * high
    else:
        low, high = 1, guess  # the lines overshot (a transient that stops growing)
    while high - low > 1:  # invariant: low fits, high does not
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def min_parallelism(
    m: ModelConfig, w: Workload, tr: Training, par: Parallelism, capacity: int,
    vary_pipeline: bool = False, max_pipeline: int = 64,
) -> tuple[int, int] | None:
    """Smallest T (pipeline fixed) or smallest T·P (ties: smaller T) whose peak fits `capacity`.

    A layout that cannot fit by two of its stages' phases alone is passed over without its timeline:
    every timeline holds the weights and optimizer states throughout, with the gradients in its
    "backward end" phase and the stored activations in its "forward" phase (each phase adds only
    bytes >= 0 to these), so its peak is at least W + O + max(G, stored). The answer is
    peak_memory's; the search, which prices every smaller layout first, costs a fraction (issue 39).

    Most layouts are passed over without pricing them at all: the whole model's weights, optimizer
    states and gradients at T = 1 (and P = 1 when P varies), W₁ + O₁ + G₁, are spread over the T (·P)
    GPUs of a layout with every parameter held at least once (replicated norms and biases, padded
    vocabularies and a split embedding only add), so its most loaded GPU holds at least
    (W₁ + O₁ + G₁) / (T·P) in its "backward end" phase: a layout with more than capacity · T·P cannot fit."""
    from transformer_calc.estimators.training.memory import valid_tensor_parallel

    Ps = range(1, min(m.n_layers, max_pipeline) + 1) if vary_pipeline else [par.pipeline]
    candidates = sorted(((T * P, T, P) for T in valid_tensor_parallel(m) for P in Ps), key=lambda c: (c[0], c[1]))
    whole_states = None  # W₁ + O₁ + G₁: the first candidate's (T = 1, the smallest P) most loaded GPU
    for _, T, P in candidates:
        split = T * P if vary_pipeline else T
        if whole_states is not None and whole_states > capacity * split:
            continue
        trial = par.model_copy(update={"tensor": T, "pipeline": P})
        try:  # peak_memory(m, w, tr, trial, all_stages=False).peak_bytes, its stages' states checked first
            stages = training_memory(m, w, tr, trial, all_stages=False)
            if split == 1:
                whole_states = max(st.weights + st.optimizer + st.gradients for st in stages)
            if max(st.weights + st.optimizer + max(st.gradients, st.stored) for st in stages) > capacity:
                continue
            memo: dict = {}
            if max(stage_timeline(m, w, tr, trial, st, memo=memo).peak_bytes for st in stages) <= capacity:
                return T, P
        except TcalcError:
            raise
        except ValueError:  # a layout this model cannot take (e.g. experts over T x dp)
            continue
    return None
