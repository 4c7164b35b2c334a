"""Training memory per GPU: weights, gradients, optimizer states and activations.

Sources: seed notes 003, Part "Training", sec. "Memory" (mixed precision: M_model = 2N,
M_grad = 4N, M_optim = 12N; activations per layer: attention BS((5p+1)D + (2p+1)AS), MLP
(2Ep+p+1)BSD, LayerNorm 2pBSD; tensor- and sequence-parallel forms), Korthikanti et al. 2022
("Reducing Activation Recomputation in Large Transformer Models", Table 2 and sec. 5: sequence
parallelism, selective and full recomputation), Rajbhandari et al. 2020 (ZeRO stages 1-3),
Narayanan et al. 2021 (1F1B pipeline schedule), Dao et al. 2022 (FlashAttention stores no S x S
matrix, only softmax statistics).

Conventions (docs/formulas.md "Training memory" has the tables and worked examples):
- Bytes are exact ints. A micro-batch is B sequences of S tokens on one data-parallel replica.
- Model states follow the seed: in mixed precision the fp32 master copy is counted with the
  optimizer (12 bytes/parameter for Adam), gradients are 4 bytes unless `grad_bytes` says 2.
- Activations count the inputs each operation keeps for its backward pass, p bytes per element,
  dropout masks 1 byte per element (torch.bool) and only when dropout is on.
- The `torch-eager` profile (docs/formulas.md §2.4) instead counts, tensor by tensor, what eager
  PyTorch running the transformers modeling code saves for backward (validated against
  saved_tensors_hooks measurements: tools/crosscheck/activations.py, docs/validation.md).
- Pipeline: 1F1B keeps up to P micro-batches in flight on the first stage (P - s on stage s,
  assuming at least P micro-batches per step); embedding on the first stage, final norm and head
  on the last. The report is for the most loaded stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from transformer_calc.errors import TcalcError
from transformer_calc.estimators.attention import MLA, attention_block
from transformer_calc.estimators.support_table import Unpriced, refuse
from transformer_calc.estimators.params import ShardParams, check_tensor_parallel, kv_heads_per_rank, shard_params
from transformer_calc.estimators.training.activations import (  # noqa: F401  (re-exported)
    BlockParts,
    b_min,
    block_parts,
    head_activations,
    layer_activations,
    mixer_activations,
)
from transformer_calc.estimators.training.eager import (  # noqa: F401  (re-exported)
    EagerCode,
    FP32_BYTES,
    GELU_NEW_EXTRA,
    HF_GPT2,
    HF_GPT2_EXACT_GELU,
    HF_LLAMA,
    INDEX_BYTES,
    LOSS_SCALAR_BYTES,
    QKV_OPERANDS,
    STAT_BYTES,
    eager_code,
    torch_eager_head,
    torch_eager_layer,
)
from transformer_calc.estimators.training.optimizers import SHAPED
from transformer_calc.estimators.training.pipeline import (  # noqa: F401  (re-exported)
    Chunk,
    MAX_LISTED_STAGES,
    PipelineStage,
    check_microbatch_group,
    chunk_forwards_in_flight,
    pipeline_stage,
    pipeline_units,
    stage_layers,
    uneven_split,
)
from transformer_calc.estimators.training.schedules import PARAMETER_COPIES, forwards_in_flight
from transformer_calc.estimators.training.hybrid_layers import attention_layers
from transformer_calc.estimators.training.layer_structure import LayerStructure, layer_structure, stage_counts
from transformer_calc.estimators.training.support import check_hybrid_training  # noqa: F401  (re-exported)
from transformer_calc.estimators.training.layer_activations import (  # noqa: F401  (re-exported)
    LayerActivations,
    FUSED_SWIGLU_SAVED,
    GATED_MLP_SAVED,
    LOSS_BYTES,
    MASK_BYTES,
    OUTPUT_GATE_SAVED,
    PLAIN_MLP_SAVED,
    SOFTMAX_STAT_BYTES,
    ceil_div,
)
from transformer_calc.model.config import (
    ActivationProfile,
    CPCommType,
    FP8Recipe,
    Framework,
    LayerAttention,
    MASTER_COPY_BYTES,
    ModelConfig,
    Offload,
    Optimizer,
    Parallelism,
    Precision,
    Recompute,
    Training,
    Workload,
)

# Activations per layer (activations.py), the pipeline's stages (pipeline.py) and the torch-eager
# profile (eager.py) live beside this module; their names are re-exported here, the public import path.


def optimizer_bytes_per_param(tr: Training) -> int:
    """Optimizer memory per parameter: states (+ the fp32 master copy in mixed precision), for the
    optimizers whose bytes do not depend on shapes.

    Seed eq. (optimizer_states_mem_mp): Adam in mixed precision keeps 12 bytes/parameter: 4 for
    the master copy, 4 + 4 for the two moments. In fp32 (eq. optimizer_states_mem_no_mp) 8.
    Pure bf16 keeps states in 2 bytes and no master copy. Adafactor, Muon and the 8-bit AdamWs
    depend on the tensors' shapes (transformer_calc/estimators/training/optimizers.py); for them this is the master
    copy plus the nominal per-element states (Adafactor 0, Muon 1, 8-bit 2 one-byte), and the
    memory itself is computed tensor by tensor.
    """
    from transformer_calc.estimators.training.optimizers import EIGHT_BIT, STATES, state_bytes

    master = MASTER_COPY_BYTES if tr.precision is Precision.mixed else 0
    if tr.optimizer in EIGHT_BIT:
        return master + 2
    nominal = {Optimizer.adafactor: 0, Optimizer.muon: 1}
    states = STATES[tr.optimizer] if tr.optimizer in STATES else nominal[tr.optimizer]
    return master + states * state_bytes(tr)


# ---------------------------------------------------------------------------- per GPU
@dataclass(frozen=True)
class StageMemory:
    """Memory of one GPU of one pipeline stage (bytes)."""

    stage: int
    n_layers: int
    params: int  # parameters held by this GPU before ZeRO sharding
    weights: int
    gradients: int
    optimizer: int
    attention: int
    mlp: int
    norm: int
    other: int  # embedding/head/loss activations (first and last stage)
    in_flight: int  # forwards whose activations are alive (1F1B: micro-batches; interleaved: model-chunk forwards)
    recompute_working: int = 0  # what recomputation rebuilds for one block during backward
    trainable: int | None = None  # parameters with gradients on this GPU before ZeRO (None: params)
    adapter_weights: int = 0  # of `weights`: the trainable parameters' copy (adapters, trained embedding/head)
    quantized_weights: int = 0  # of `weights`: the NF4 codes and constants (QLoRA)
    fp8_weights: int = 0  # of `weights`: FP8 weight copies (both usages) and scaling state
    host_weights: int = 0  # off the GPU (ZeRO-Infinity parameter offload): 16-bit parameter partition
    host_gradients: int = 0  # off the GPU (ZeRO-Offload): fp32 gradient partition
    host_optimizer: int = 0  # off the GPU (ZeRO-Offload): optimizer states and fp32 master

    @property
    def trainable_params(self) -> int:
        return self.params if self.trainable is None else self.trainable

    @property
    def offloaded(self) -> int:
        """Bytes this GPU's training keeps in host memory or on NVMe."""
        return self.host_weights + self.host_gradients + self.host_optimizer

    @property
    def stored(self) -> int:
        """Activations kept for backward (everything but the recomputation working set)."""
        return self.attention + self.mlp + self.norm + self.other

    @property
    def activations(self) -> int:
        return self.stored + self.recompute_working

    @property
    def model_states(self) -> int:
        return self.weights + self.gradients + self.optimizer

    @property
    def total(self) -> int:
        return self.model_states + self.activations


@dataclass(frozen=True)
class FrameworkMemory:
    """Megatron-core memory settings `Training` does not carry (no CLI flag yet; the validation rows of
    tools/validation/train_runs.yaml give them from the recipes they ran).

    fp8_param_gather: Megatron-core's `--fp8-param-gather` (Megatron-Bridge MixedPrecisionConfig
        `fp8_param_gather`, on in its FP8 current-scaling and MXFP8 recipes,
        src/megatron/bridge/training/mixed_precision.py): the GEMM weights are created as FP8 tensors
        (Transformer Engine `fp8_model_init`), so no 16-bit compute copy of them is held beside the
        FP8 copies and the distributed optimizer's fp32 master; under MXFP8 the 16-bit parameters
        live in the gradient buffer for the all-gather (`reuse_grad_buf_for_mxfp8_param_ag`,
        megatron/core/distributed/param_and_grad_buffer.py), no buffer of their own either.
    offloaded_layers: Megatron-core's activation offloading (`cpu_offloading`,
        `cpu_offloading_num_layers`, `cpu_offloading_weights` off: Megatron-Bridge
        scripts/performance/utils/overrides.py _set_recompute_overrides): the stored activations of
        the first N blocks go to host memory (megatron/core/transformer/transformer_block.py
        `get_cpu_offload_context`); its double-buffered handler keeps one offloaded block in transit
        on the GPU (copied out during the next block's forward, back in during the later block's
        backward). Megatron refuses it with pipeline parallelism and needs N < the layers
        (megatron/core/transformer/transformer_config.py); the time of the copies is not priced
        (they overlap the compute).
    """

    fp8_param_gather: bool = False
    offloaded_layers: int = 0
    recompute_modules: tuple[str, ...] = ()

    # recompute_modules: Megatron-core's `--recompute-modules` (recompute_granularity selective);
    # priced: "mla_up_proj", Multi-Latent Attention's up-projections
    # (megatron/core/transformer/multi_latent_attention.py `recompute_up_proj`: the up-projected and
    # rotated q, k, v go through a CheckpointWithoutOutput whose outputs are discarded once the core
    # attention has run, `discard_output_and_register_recompute(core_attn_out)`, and rebuilt before
    # its backward): a block keeps its latents, not the per-head q, k, v, and one block's q, k, v
    # are alive again during its backward (the recomputation working set).
    # each priced module -> the attention block whose projections it recomputes (estimators/attention.py)
    PRICED_MODULES = MappingProxyType({"mla_up_proj": MLA})


@dataclass(frozen=True)
class _Run:
    """What every stage of one training_memory call shares: the settings, one layer's activations, the
    rank's shard (S already split over cp, dp already cp·dp)."""

    m: ModelConfig
    w: Workload  # S / cp
    tr: Training
    par: Parallelism
    fwm: FrameworkMemory
    layers: LayerStructure
    dp: int  # dp · cp: the ranks ZeRO shards the states over
    shard: ShardParams
    edp: int  # the expert-data-parallel ranks (· cp)
    layer: LayerActivations  # one MoE layer (or the one kind of layer)
    dense_act: LayerActivations  # one dense layer
    parts: Any  # BlockParts or a model's layer classes, when layers differ
    first_extra: int
    last_extra: int
    working: int  # the recomputation working set (and the CP ring's K/V buffers)
    mla_qkv: int  # recompute_modules mla_up_proj: the per-head q, k, v one block rebuilds
    opt_bytes: int  # optimizer bytes per parameter (or per trainable one under adapters)
    side_first: int  # adapters outside the layers, first stage
    side_last: int  # ... last stage
    table: int  # the embedding table on one rank (its adapters' base)
    units: Any  # pipeline_units
    v: int  # virtual stages
    m_micro: int  # micro-batches in flight (timeline.micro_batches)


def training_memory(
    m: ModelConfig,
    w: Workload,
    tr: Training = Training.model_validate({}),  # the defaults: p and grad_bytes follow the precision
    par: Parallelism = Parallelism(),
    *,
    eager: EagerCode | None = None,
    all_stages: bool = True,
    framework_memory: FrameworkMemory | None = None,
) -> list[StageMemory]:
    """Per-GPU memory of every pipeline stage (most loaded: `max(stages, key=total)`).

    O(1) in L, S and B; O(P) for P <= MAX_LISTED_STAGES, else (or with all_stages=False, enough
    to find the most loaded) only the first and last stage.
    `eager` matters only to the torch-eager profile (default: `eager_code(m)`).
    `framework_memory`: Megatron-core settings outside `Training` (FrameworkMemory).

    The base sum is one stage's parameters (`_stage_memory`), its model states (`_model_states`:
    ZeRO, adapters, FSDP2, DualPipe's copies, shaped optimizers, FP8 copies, offload) and the
    activations of its micro-batches in flight (`_stage_activations`).
    """
    check_hybrid_training(m, tr)
    fwm = framework_memory or FrameworkMemory()
    _check_framework_memory(m, tr, par, fwm)
    layers = layer_structure(m)
    layers.check_layout(m, par)
    run = _prepare(m, w, tr, par, fwm, layers, eager)
    return [_stage_memory(run, s) for s in _stages_to_evaluate(m, par.pipeline, all_stages, uneven=uneven_split(par))]


def _context_split(w: Workload, par: Parallelism) -> tuple[Workload, int]:
    """(the workload one context-parallel rank holds, the ranks ZeRO shards over).

    Context parallelism (Megatron-core CP): each of cp ranks holds S/cp tokens of every sequence and
    its activations; the weights are replicated, and ZeRO / the distributed optimizer shards their
    states over dp x cp."""
    cp = par.context
    if cp == 1:
        return w, par.data
    if w.seq_len % cp:
        raise ValueError(f"S ({w.seq_len}) must be divisible by the context-parallel size cp ({cp})")
    return w.model_copy(update={"seq_len": w.seq_len // cp}), par.data * cp


def _ring_kv_bytes(m: ModelConfig, w: Workload, tr: Training, par: Parallelism) -> int:
    """The attention ring's K/V buffers (cp > 1): per layer being computed, the K/V block received while
    the local one is used (2 buffers of b·(S/cp)·n_kv·h_d·p each for K and V); all-gather CP
    (cp_comm_type all_gather) holds cp such blocks: the gathered K/V. Counted with the recomputation
    working set."""
    if par.context == 1:
        return 0
    T = par.tensor
    kv_t = kv_heads_per_rank(m.attention_kv_heads, T)  # MLA: A/T (T divides A)
    # all_gather CP (Llama 3 §3.3.2; TE AttnFuncWithCPAndKVAllGather): the whole sequence's K/V,
    # gathered, and in the backward their gradients before the reduce-scatter: cp x the ring's
    gathered = par.context if par.cp_comm_type is CPCommType.all_gather else 1
    return gathered * 2 * 2 * w.batch_size * w.seq_len * kv_t * (m.head_dim + m.v_dim) // 2 * tr.p


def _prepare(m: ModelConfig, w: Workload, tr: Training, par: Parallelism, fwm: FrameworkMemory,
             layers: LayerStructure, eager: EagerCode | None) -> _Run:
    """Everything the stages share, computed once (in the order its checks refuse a setting)."""
    T, P = par.tensor, par.pipeline
    w, dp = _context_split(w, par)
    shard = shard_params(m, T, par.expert, par.expert_tensor_size)
    edp = expert_data_parallel(par, par.context)
    layer = layer_activations(m, w, tr, par, eager=eager)
    dense_act = layer_activations(m, w, tr, par, eager=eager, moe=False) if m.is_moe else layer
    parts = block_parts(m, w, tr, par, eager=eager) if layers_differ(m) else None
    first_extra, last_extra = head_activations(m, w, tr, par, eager=eager)
    working = _recompute_working_set(m, w, tr, par, eager)
    mla_qkv = 0
    if "mla_up_proj" in fwm.recompute_modules:  # the per-head q, k, v (FrameworkMemory), one block's rebuilt
        mla_qkv = tr.p * w.batch_size * w.seq_len * (m.n_heads // T) * (2 * m.head_dim + m.v_dim)
        working += mla_qkv
    working += _ring_kv_bytes(m, w, tr, par)
    opt_bytes, side_first, side_last, table = optimizer_bytes_per_param(tr), 0, 0, 0
    if tr.adapters:
        side_first, side_last = layers.side_adapter_params(m, tr)
        table = ceil_div(m.vocab_size, T) * m.d_embedding
        opt_bytes = trainable_optimizer_bytes(tr)
    _check_offload(tr, par)
    units = pipeline_units(m.n_layers, par)
    m_micro = tr.micro_batches if tr.micro_batches is not None else P  # timeline.micro_batches
    check_microbatch_group(par, m_micro)
    return _Run(m, w, tr, par, fwm, layers, dp, shard, edp, layer, dense_act, parts, first_extra, last_extra,
                working, mla_qkv, opt_bytes, side_first, side_last, table, units,
                par.virtual_stages if P > 1 else 1, m_micro)


@dataclass(frozen=True)
class _Stage:
    """One stage's layers and parameters on one GPU."""

    s: int
    chunks: tuple[Chunk, ...]
    n: int  # layers
    first: bool
    last: bool
    params: int
    experts: int  # routed-expert parameters (ZeRO shards them over the expert-data-parallel group)
    n_moe: int
    n_dense: int

    def sharded(self, run: _Run, stage: int) -> int:
        """Parameters one GPU keeps of a state ZeRO shards from `stage` on."""
        if run.par.zero < stage:
            return self.params
        return ceil_div(self.params - self.experts, run.dp) + ceil_div(self.experts, run.edp)


def _stage_memory(run: _Run, s: int) -> StageMemory:
    """One pipeline stage: its parameters, model states and activations."""
    m, par, shard = run.m, run.par, run.shard
    chunks = pipeline_stage(m.n_layers, par, s, run.units).chunks
    first, last = s == 0, s == par.pipeline - 1
    params = run.layers.params(m, shard, chunks, first)
    # Routed experts are sharded by ZeRO over the expert-data-parallel group (Megatron-core
    # distributed optimizer / DeepSpeed-MoE), the rest over all data-parallel replicas.
    n_moe = sum(m.n_moe_layers(c.start, c.stop) for c in chunks)
    if first:
        params += shard.embedding
    if last:
        params += shard.final_norm + shard.lm_head + (shard.tied_head_copy if par.pipeline > 1 else 0)
    n = sum(c.n_layers for c in chunks)
    st = _Stage(s, chunks, n, first, last, params, n_moe * shard.routed_experts, n_moe, n - n_moe)
    # The forwards alive at the stage's first backward, per chunk (1F1B warm-up depth, and
    # the interleaved schedule's: Narayanan et al. 2021 §2.2; chunk_forwards_in_flight)
    # zero-bubble and DualPipe schedules hold their own counts (schedules.forwards_in_flight)
    P = par.pipeline
    alive = (forwards_in_flight(par.schedule, P, run.v, run.m_micro, s)
             or chunk_forwards_in_flight(P, run.v, run.m_micro, s, par.microbatch_group))
    states = _model_states(run, st)
    acts = _stage_activations(run, st, alive)
    return StageMemory(stage=s, n_layers=n, params=params, **states, **acts,
                       recompute_working=run.working if n else 0)


def _model_states(run: _Run, st: _Stage) -> dict[str, Any]:
    """Weights, gradients and optimizer states of a stage on one GPU: ZeRO's shards, then the
    contributions of adapters, FSDP2, DualPipe's copies, FP8 weight copies and offload."""
    tr, par, zero, dp = run.tr, run.par, run.par.zero, run.dp
    weights, trainable, adapter_w, nf4 = st.sharded(run, 3) * tr.p, st.params, 0, 0
    if tr.adapters:
        trainable, weights, adapter_w, nf4 = _adapter_weights(run, st)
    if tr.framework is Framework.torchtitan and zero >= 3 and tr.precision is Precision.mixed and not tr.adapters:
        # FSDP2 in torchtitan (parallelize_llama.apply_fsdp, MixedPrecisionPolicy(param_dtype=bf16)):
        # the sharded parameters are the fp32 master copy (counted with the optimizer); 16-bit
        # copies exist only gathered: a unit at a time (the timeline's `gathered`), or the whole
        # stage under pipeline parallelism, which keeps them unsharded between micro-batches
        # (reshard_after_forward off when PP is on)
        weights = st.params * tr.p if par.pipeline > 1 else 0
    gradients = _shard_trainable(trainable, 2, zero, dp) * tr.grad_bytes if tr.adapters else st.sharded(run, 2) * tr.grad_bytes
    copies = PARAMETER_COPIES.get(par.schedule, 1) if par.pipeline > 1 else 1
    if copies > 1:  # DualPipe: both directions' copies of the parameters, each with its gradients
        weights, gradients = weights * copies, gradients * copies
    optimizer = _optimizer_bytes(run, st, trainable)
    fp8_w, no_16bit = _fp8_weight_bytes(run, st)
    weights += fp8_w - no_16bit
    host_w = host_g = host_o = 0
    if tr.offload is not Offload.none:
        # ZeRO-Offload (Ren et al. 2021): optimizer states, fp32 master and the fp32 gradient
        # partition live on the host, and the update runs there; the GPU keeps the 16-bit
        # parameters and reduces gradients through its buckets (timeline). ZeRO-Infinity's
        # parameter offload (Rajbhandari et al. 2021) moves the ZeRO-3 parameter partition too.
        host_o, optimizer = optimizer, 0
        host_g, gradients = ceil_div(trainable if tr.adapters else st.params, dp) * OFFLOAD_GRAD_BYTES, 0
        if tr.offload is Offload.optimizer_params:
            host_w, weights, adapter_w, nf4, fp8_w = weights, 0, 0, 0, 0
    return {"weights": weights, "gradients": gradients, "optimizer": optimizer,
            "trainable": trainable if tr.adapters else None, "adapter_weights": adapter_w, "quantized_weights": nf4,
            "fp8_weights": fp8_w, "host_weights": host_w, "host_gradients": host_g, "host_optimizer": host_o}


def _adapter_weights(run: _Run, st: _Stage) -> tuple[int, int, int, int]:
    """Under adapters: (trainable parameters, weights, of them the adapters', of them NF4) on one GPU."""
    from transformer_calc.estimators.training.finetune import trainable_weight_bytes

    m, tr, shard, zero = run.m, run.tr, run.shard, run.par.zero
    trainable = run.layers.adapter_params(m, tr, st.chunks, run.par)
    if st.first:
        trainable += run.side_first + (run.table if tr.train_embeddings else 0)
    if st.last:
        trainable += run.side_last
        if not m.tied_embeddings and tr.train_head:
            trainable += shard.lm_head
        elif m.tied_embeddings and (tr.train_head or tr.train_embeddings) and not (st.first and tr.train_embeddings):
            trainable += run.table  # the tied table (the last stage's copy when P > 1)
    frozen, nf4 = run.layers.frozen_weight_bytes(m, tr, st.params, st.chunks, st.first, run.par)
    if zero >= 3:  # ZeRO-3 / FSDP shards the frozen parameters too
        frozen, nf4 = ceil_div(frozen * st.sharded(run, 3), st.params), ceil_div(nf4 * st.sharded(run, 3), st.params)
    adapter_w = _shard_trainable(trainable, 3, zero, run.dp) * trainable_weight_bytes(tr)
    return trainable, frozen + adapter_w, adapter_w, nf4


def _optimizer_bytes(run: _Run, st: _Stage, trainable: int) -> int:
    """Optimizer states of a stage on one GPU: bytes per (ZeRO-sharded) parameter, or tensor by tensor
    for the optimizers whose states depend on each tensor's shape (optimizers.py), sharded pro rata."""
    m, tr, par = run.m, run.tr, run.par
    opt_params = _shard_trainable(trainable, 1, par.zero, run.dp) if tr.adapters else st.sharded(run, 1)
    if tr.optimizer not in SHAPED:
        return opt_params * run.opt_bytes
    from transformer_calc.estimators.training.optimizers import adapter_tensors, groups, stage_tensors

    T, P = par.tensor, par.pipeline
    if tr.adapters:
        tensors = adapter_tensors(m, tr, T, st.n_moe, st.n_dense, st.first, st.last, P,
                                  counts=stage_counts(m, st.chunks) if layers_differ(m) else None)
    else:
        tensors = stage_tensors(m, T, par.expert, par.expert_tensor, st.n_moe, st.n_dense, st.first, st.last, P)
    states = sum(g.state_bytes for g in groups(tr, tensors))
    master = MASTER_COPY_BYTES if tr.precision is Precision.mixed and not tr.adapters else 0
    held = trainable if tr.adapters else st.params
    return master * opt_params + ceil_div(states * opt_params, max(held, 1))


def _fp8_weight_bytes(run: _Run, st: _Stage) -> tuple[int, int]:
    """(FP8 weight copies and scaling state, the 16-bit GEMM weights --fp8-param-gather does not hold)
    of a stage on one GPU (fp8.py); 0, 0 without an FP8 recipe."""
    m, tr, par = run.m, run.tr, run.par
    if tr.fp8_recipe is FP8Recipe.none:
        return 0, 0
    from transformer_calc.estimators.training.finetune import layer_counts, layer_matrices
    from transformer_calc.estimators.training.fp8 import scaling_state_bytes, weight_copy_bytes

    elems = gemms = 0
    for c in st.chunks:  # layer by layer: each sequence kind's linears (attention, Mamba-2's in/out_proj), MLP kinds
        mats = layer_matrices(m, layer_counts(m, c.start, c.stop), par.tensor, par.expert, par.expert_tensor)
        elems, gemms = elems + sum(n * k for n, k in mats), gemms + sum(k for _, k in mats)
    fp8_w = weight_copy_bytes(elems, tr.fp8_recipe) + scaling_state_bytes(gemms, tr.fp8_recipe)
    # --fp8-param-gather: the GEMM weights' 16-bit copy is not held (FrameworkMemory)
    no_16bit = elems * tr.p if run.fwm.fp8_param_gather else 0
    if par.zero >= 3:  # sharded with the weights they are copies of
        fp8_w = ceil_div(fp8_w * st.sharded(run, 3), max(st.params, 1))
        no_16bit = ceil_div(no_16bit * st.sharded(run, 3), max(st.params, 1))
    return fp8_w, no_16bit


def _stage_activations(run: _Run, st: _Stage, alive: tuple[int, ...] | list[int]) -> dict[str, int]:
    """The activations a stage keeps: `alive[i]` micro-batches of chunk i in flight, each keeping its
    layers' stored bytes, the embedding's on the first stage and the head's on the last."""
    m, fwm, chunks = run.m, run.fwm, st.chunks
    in_flight = sum(alive)
    alive_moe = sum(k * m.n_moe_layers(c.start, c.stop) for k, c in zip(alive, chunks))
    alive_dense = sum(k * c.n_layers for k, c in zip(alive, chunks)) - alive_moe
    if fwm.offloaded_layers:  # P = 1 (checked): blocks 0..N-1 of the one micro-batch in flight are on the
        # host but for the one in transit (FrameworkMemory)
        off_moe = m.n_moe_layers(0, fwm.offloaded_layers - 1)
        alive_moe -= in_flight * off_moe
        alive_dense -= in_flight * (fwm.offloaded_layers - 1 - off_moe)
    alive_first = sum(k for k, c in zip(alive, chunks) if c.embedding)
    alive_last = sum(k for k, c in zip(alive, chunks) if c.head)
    other = alive_first * run.first_extra + alive_last * run.last_extra
    if run.parts is not None:  # hybrid: each chunk's layers by kind (BlockParts.chunk)
        acts = [run.parts.chunk(m, c.start, c.stop) for c in chunks]
        attention = sum(k * a.attention for k, a in zip(alive, acts))
        mlp = sum(k * a.mlp for k, a in zip(alive, acts))
        norm = sum(k * a.norm for k, a in zip(alive, acts))
    else:
        layer, dense = run.layer, run.dense_act
        attention = alive_moe * layer.attention + alive_dense * dense.attention
        attention -= (alive_moe + alive_dense) * run.mla_qkv  # recompute_modules mla_up_proj (FrameworkMemory)
        mlp = alive_moe * layer.mlp + alive_dense * dense.mlp
        norm = alive_moe * layer.norm + alive_dense * dense.norm
    return {"attention": attention, "mlp": mlp, "norm": norm, "other": other, "in_flight": in_flight}

def _check_framework_memory(m: ModelConfig, tr: Training, par: Parallelism, fwm: FrameworkMemory) -> None:
    """FrameworkMemory's settings where Megatron-core takes them."""
    if fwm.fp8_param_gather and tr.fp8_recipe is FP8Recipe.none:
        raise ValueError("fp8_param_gather keeps the GEMM weights in FP8: it needs an fp8_recipe")
    unpriced = [k for k in fwm.recompute_modules if k not in FrameworkMemory.PRICED_MODULES]
    if unpriced:
        raise ValueError(f"recompute_modules {', '.join(unpriced)} not priced (priced: "
                         f"{', '.join(FrameworkMemory.PRICED_MODULES)})")
    block = attention_block(m)
    if any(FrameworkMemory.PRICED_MODULES[k] is not block for k in fwm.recompute_modules) or (
            fwm.recompute_modules and (tr.recompute is not Recompute.none or layers_differ(m))):
        raise ValueError("recompute_modules mla_up_proj recomputes Multi-Latent Attention's up-projections: it needs an "
                         "MLA model with uniform blocks and recompute none")
    N = fwm.offloaded_layers
    if N:
        if par.pipeline > 1:  # transformer_config.py: "no support for Pipeline parallelism with CPU offloading"
            raise ValueError(f"activation offloading ({N} layers) is not supported with pipeline parallelism "
                             f"(P {par.pipeline}); use P 1")
        if not 0 < N < m.n_layers:
            raise ValueError(f"offloaded_layers ({N}) must lie between 1 and n_layers - 1 ({m.n_layers - 1})")
        refuse(m, f"activation offloading ({N} layers)", Unpriced.offload)  # uniform blocks only (support_table.py)


OFFLOAD_GRAD_BYTES = 4  # DeepSpeed's CPU optimizer updates from an fp32 gradient partition on the host


def _shard_trainable(count: int, stage: int, zero: int, dp: int) -> int:
    """Trainable parameters one GPU keeps of a state ZeRO shards from `stage` on."""
    return count if zero < stage else ceil_div(count, dp)


def _check_offload(tr: Training, par: Parallelism) -> None:
    """ZeRO-Offload works with ZeRO stages 1-3; parameter offload (ZeRO-Infinity) needs stage 3."""
    if tr.offload is Offload.none:
        return
    if par.zero < 1:
        raise ValueError(f"offload {tr.offload.value} needs ZeRO (DeepSpeed offloads the ZeRO partition); give --zero 1, 2 or 3")
    if tr.offload is Offload.optimizer_params and par.zero < 3:
        raise ValueError(f"offload optimizer+params needs ZeRO stage 3 (zero is {par.zero}); give --zero 3 or --offload optimizer")


def trainable_optimizer_bytes(tr: Training) -> int:
    """Optimizer bytes per trainable parameter under adapters: the states only, since the
    trainable parameters are already held at the update's precision (no separate master copy)."""
    master = MASTER_COPY_BYTES if tr.precision is Precision.mixed else 0
    return optimizer_bytes_per_param(tr) - master


def expert_data_parallel(par: Parallelism, cp: int = 1) -> int:
    """Expert-data-parallel size: the T*CP*dp ranks of a stage regrouped as ep*etp*edp (Megatron-core
    MoE 'parallel folding': context parallelism folds into the expert groups); ep*etp must divide T*CP*dp."""
    ep, etp = par.expert, par.expert_tensor_size
    if (par.tensor * cp * par.data) % (ep * etp):
        raise ValueError(
            f"expert parallel ep ({ep}) x expert tensor parallel ({etp}) must divide T x dp" + (" x CP" if cp > 1 else "")
            + f" ({par.tensor} x {par.data}" + (f" x {cp}" if cp > 1 else "") + "); raise dp or lower ep"
        )
    return par.tensor * cp * par.data // (ep * etp)


def _stages_to_evaluate(m: ModelConfig, P: int, all_stages: bool, uneven: bool = False) -> list[int]:
    """Stages whose memory is computed. Uniform blocks: the middle stages hold no more layers,
    fewer micro-batches and no embedding or head than the first, so the first and the last bound
    them; with an uneven split (first/last stages lighter) the second and the second to last too.
    Mixed dense and MoE blocks (DeepSeek's dense first layers): the stages after the first
    can hold more parameters, so the first MAX_LISTED_STAGES are computed (and the last)."""
    mixed = m.is_moe and m.n_moe_layers() not in (0, m.n_layers)
    mixed = mixed or layer_structure(m).varied  # Gemma 4: a middle stage can hold more of the larger full layers
    if not mixed:
        if all_stages and P <= MAX_LISTED_STAGES:
            return list(range(P))
        return sorted({0, P - 1, *((min(1, P - 1), max(P - 2, 0)) if uneven else ())})
    limit = MAX_LISTED_STAGES if all_stages else 4
    return sorted({*range(min(P, limit)), P - 1})


def _recompute_working_set(
    m: ModelConfig, w: Workload, tr: Training, par: Parallelism, eager: EagerCode | None = None
) -> int:
    """What recomputation rebuilds during backward, alive for one layer at a time.

    Full: one block's activations as if stored; selective: one block's attention core. Not in the
    seed profile (the seed counts stored activations only, as Korthikanti's Table 2 does).
    """
    if tr.recompute is Recompute.none or tr.activations is ActivationProfile.seed:
        return 0
    plain = tr.model_copy(update={"recompute": Recompute.none})
    if layers_differ(m):  # hybrid: the largest block; selective rebuilds one attention core
        stored_parts = block_parts(m, w, plain, par, eager=eager)
        if tr.recompute is Recompute.full:
            return stored_parts.largest
        if not attention_layers(m):  # no layer runs softmax attention: no core to rebuild
            return 0
        kept = layer_activations(m, w, tr, par, eager=eager)
        return layer_activations(m, w, plain, par, eager=eager).attention - kept.attention
    kinds = [m.is_moe] + ([False] if m.is_moe and m.has_dense_mlp_layers else [])
    best = 0
    for moe in kinds:  # the larger of a MoE block's and a dense block's
        stored = layer_activations(m, w, plain, par, eager=eager, moe=moe)
        if tr.recompute is Recompute.full:
            best = max(best, stored.total)
        elif tr.recompute is Recompute.op:  # the block's recomputed tensors, alive for its backward
            best = max(best, stored.total - layer_activations(m, w, tr, par, eager=eager, moe=moe).total, 0)
        else:
            without_core = layer_activations(m, w, tr, par, eager=eager, moe=moe)
            best = max(best, stored.attention - without_core.attention)
    return best


def layers_differ(m: ModelConfig) -> bool:
    """Layers whose activations differ by more than MoE vs dense: a hybrid pattern, blocks that are a
    sequence mixer or an MLP alone (Nemotron-H), Gemma 4's layer classes (training/gemma4.py), or
    MiMo-V2-Flash's attention kinds (training/kind_attention.py)."""
    return m.is_hybrid or m.one_mixer_per_layer or layer_structure(m).differs


def most_loaded(stages: list[StageMemory]) -> StageMemory:
    return max(stages, key=lambda st: st.total)


# ---------------------------------------------------------------------------- fitting
def valid_tensor_parallel(m: ModelConfig, limit: int = 64) -> list[int]:
    """T values the Megatron layout allows: T divides n_heads and d_ff; K/V heads shard or
    replicate (T and n_kv_heads divide one another)."""
    out = []
    for T in range(1, min(limit, m.n_heads) + 1):
        if m.n_heads % T:
            continue
        try:
            check_tensor_parallel(m, T)
            kv_heads_per_rank(m.n_kv_heads, T)
            layer_structure(m).check_tensor(m, T)  # Gemma 4: training at T > 1 not priced for its layer classes yet
        except TcalcError:
            raise
        except ValueError:
            continue
        out.append(T)
    return out
