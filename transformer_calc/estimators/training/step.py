"""Training step time of a parallel layout: compute, communication, pipeline bubble (issue 17).

The seed leaves "Latency" (training) and "Pipeline Parallelism" empty; this fills them with an
analytic model in the style of Calculon and SimuMax, every term cited here and stated in
docs/formulas.md §6, every constant named and overridable.

One optimizer step on N = T·CP·P·dp GPUs processes the global batch of G sequences of S tokens;
each data-parallel replica runs m = G / (dp·b) micro-batches of b sequences through P pipeline
stages (1F1B; interleaved with v virtual stages). Per GPU:

- compute: the exact matmul FLOPs tcalc counts (`count_flops`, recomputation included: hardware
  FLOPs), divided over the T·CP·P·dp GPUs, at an achievable fraction of the dense peak (maximum
  achievable matmul FLOPS, measured: A100 SXM 85.9 %, H100 SXM 80.1 %, B200 77.6 %, GB200 72.9 %, MI300X 60.1 %,
  Stas Bekman's ml-engineering `compute/accelerator` MAMF table); memory-bound work (norms,
  activation functions, residual adds, the softmax of eager attention, the optimizer step) as
  bytes moved over HBM bandwidth at MEMORY_EFFICIENCY (copies reach ~90 % of the datasheet).
- tensor parallelism: per layer and micro-batch 2 all-reduces forward and 2 backward (Megatron-LM,
  Shoeybi et al. 2019; with SP the same bytes as reduce-scatter + all-gather, Korthikanti et al.
  2022), of b·S·D·p bytes each, on the ring (2(T−1)/T of the message per GPU) plus a latency per
  collective; not overlapped (Megatron's default).
- pipeline: the 1F1B bubble (P−1)/(v·m) of the ideal time (Narayanan et al. 2021, eq. 1 and §2.2.2),
  or the zero-bubble / DualPipe schedule's (schedules.py, `pipeline_schedule`), and the
  point-to-point activations between stages (b·S·D·p, /T with the scatter-gather optimisation),
  2 per micro-batch on the critical path.
- data parallelism: the gradient all-reduce (ZeRO-0), or reduce-scatter of gradients + all-gather
  of the updated weights (ZeRO-1/2, Megatron's distributed optimizer), plus the forward and
  backward all-gathers of weights under ZeRO-3; overlapped with the backward of the last
  micro-batch except one layer's worth (bucketed reduction, PyTorch DDP / Megatron
  overlap_grad_reduce), the rest exposed; PyTorch FSDP (ZeRO-3 of the pytorch and torchtitan
  profiles) per block behind each block's compute (profiles.fsdp2_step).
- MoE (moe_time.py): 4 all-to-alls per MoE layer and micro-batch (dispatch and combine, forward
  and backward) of b·S·k·D·p bytes over ep ranks, inside and across the NVLink domain; token
  permutation, router, the local experts' weight traffic and a fitted fixed cost per local
  expert; the load imbalance scales the busiest rank's expert FLOPs and traffic.
- context parallelism: the ring exchange of K/V blocks, hidden behind the attention core when it
  is shorter (FlashAttention ring kernels), else the excess is exposed (cp_comm_type p2p); or
  Llama 3's all-gather CP (arXiv:2407.21783 §3.3.2; cp_comm_type all_gather): K/V all-gathered
  before attention and dK/dV reduce-scattered after it, exposed.
- network: a two-level fabric: inside a node (NVLink/NVSwitch domain, `node_size` GPUs) at half
  the bidirectional NVLink figure per direction, between nodes at the per-GPU NIC bandwidth; a
  group whose ranks span more than one node runs at the NIC bandwidth.

All times are floats in seconds; FLOPs and bytes exact ints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from transformer_calc.devices.hardware import COLLECTIVE_LATENCY_S, INTER_NODE_LATENCY_S
from transformer_calc.estimators.flops import count_flops, layer_flops
from transformer_calc.devices.hardware import POWER_CAP_CLOCK_EXPONENT, power_cap_clock_scale  # noqa: F401 - re-exported
from transformer_calc.estimators.params import kv_heads_per_rank, shard_params
from transformer_calc.model.config import (
    CPCommType,
    FP8Recipe,
    Framework,
    ModelConfig,
    Parallelism,
    Precision,
    Recompute,
    Training,
    Workload,
)


# Maximum achievable matmul FLOPS / dense peak, bf16 (stas00/ml-engineering, compute/accelerator
# README, "Maximum Achievable Matmul FLOPS comparison table"; GB200 72.9 % and B300 78.6 % from its
# 2026 revision, torch 2.10 nightly / 2.9.1 with CUDA 13.0); others: DEFAULT_MATMUL_EFFICIENCY.
MATMUL_EFFICIENCY = {"A100": 0.859, "H100": 0.801, "H800": 0.801, "H200": 0.803, "GH200": 0.830, "B200": 0.776,
                     "GB200": 0.729, "B300": 0.786, "MI250X": 0.767, "MI300X": 0.601}  # fmt: skip
DEFAULT_MATMUL_EFFICIENCY = 0.80
# A whole training step's GEMMs (per-rank shapes under TP, weight-gradient GEMMs, attention kernels)
# reach a fraction of the largest-shape MAMF. FITTED: 0.69 minimises the mean error on the 10 runs
# of Narayanan et al. 2021 Table 1 (tools/validation/train_runs.yaml, ids narayanan-*), and is
# checked on the 25 other runs there (Korthikanti et al. 2022, MosaicML MPT, NVIDIA dgxc, NeMo):
# docs/validation.md "Training runs". `--matmul-efficiency` replaces the product.
TRAINING_GEMM_FRACTION = 0.69
# The `megatron` time profile on Hopper and Blackwell (Megatron-core with Transformer Engine: TE
# GEMMs, fused attention, fused kernels) reaches a larger fraction of the MAMF than the 2021-22
# Megatron-LM runs the fraction above was fitted on. FITTED: 0.736 is the fraction that gives a
# median error of 0 on the only source it is fitted on, NVIDIA's dgxc-benchmarking BF16 tables
# for NeMo 24.09 on H100 (tools/validation/train_runs.yaml, ids dgxc-*: GPT-3 175B, Llama 3.1 8B,
# 70B, 405B); validated on NeMo 24.07's FP8 performance summary and the Llama 3 paper's Table 4
# (docs/validation.md). B200 and later take the Hopper fit (no Blackwell run fitted; an assumption).
MEGATRON_GEMM_FRACTION = {"H100": 0.736, "H800": 0.736, "H200": 0.736, "GH200": 0.736, "B200": 0.736, "B300": 0.736,
                          "GB200": 0.736, "GB300": 0.736}  # fmt: skip
MEMORY_EFFICIENCY = 0.90  # achieved / datasheet HBM bandwidth for large copies (measured ~90 %)
# A power-capped board runs at its cap's sustained clock (devices/hardware.py power_cap_clock_scale).
# Node size and per-GPU NIC bandwidth (one direction) by platform: DGX A100 8 GPUs, 8 x 200 Gb/s
# HDR; DGX H100/H200 and HGX B200 8 GPUs, 8 x 400 Gb/s NDR; GB200/GB300 NVL72 72 GPUs in one
# NVLink domain, 800 Gb/s per GPU (ConnectX-8 on GB300; 400 on GB200); H800 (the H100 die with NVLink
# cut to 400 GB/s) 8 per node with a 400 Gb/s IB NIC per GPU (DeepSeek-V3 §3.1). Flags override.
NETWORK = {"A100": (8, 25e9), "H100": (8, 50e9), "H800": (8, 50e9), "H200": (8, 50e9), "B200": (8, 50e9), "B300": (8, 100e9),
           "GB200": (72, 50e9), "GB300": (72, 100e9), "MI300X": (8, 50e9), "MI325X": (8, 50e9),
           "MI355X": (8, 50e9)}  # fmt: skip
DEFAULT_NETWORK = (8, 25e9)
ALL_REDUCES_PER_LAYER = 2  # forward: after attention and after the MLP (backward: 2 more)
# All-gather context parallelism (cp_comm_type all_gather), per layer and micro-batch: the forward's
# K/V all-gather, the backward's second K/V all-gather and its dK/dV reduce-scatter (Transformer
# Engine AttnFuncWithCPAndKVAllGather; Llama 3 §3.3.2 states the all-gather, not the backward).
CP_ALL_GATHER_COLLECTIVES = 3


def lookup_efficiency(table: dict, name: str, default):
    key = name.upper()
    for prefix in sorted(table, key=len, reverse=True):
        if key.startswith(prefix):
            return table[prefix]
    return default


@dataclass(frozen=True)
class Network:
    """The two-level fabric: `node_size` GPUs share NVLink at `intra_bytes_s` per direction; a
    group spanning nodes runs at the per-GPU NIC's `inter_bytes_s`."""

    node_size: int
    intra_bytes_s: float
    inter_bytes_s: float
    intra_latency_s: float = COLLECTIVE_LATENCY_S
    inter_latency_s: float = INTER_NODE_LATENCY_S

    def link(self, span: int) -> tuple[float, float]:
        """(bandwidth, latency) of a group whose ranks span `span` consecutive GPUs."""
        if span <= self.node_size:
            return self.intra_bytes_s, self.intra_latency_s
        return self.inter_bytes_s, self.inter_latency_s


def default_network(gpu) -> Network:
    node, nic = lookup_efficiency(NETWORK, gpu.name, DEFAULT_NETWORK)
    intra = (gpu.interconnect_bytes_s or gpu.pcie_bytes_s or nic * 2) / 2
    return Network(node_size=node, intra_bytes_s=intra, inter_bytes_s=nic)


def ring_all_reduce_s(size: int, n: int, bw: float, lat: float) -> float:
    """Ring all-reduce of `size` bytes over n ranks: 2(n−1)/n·size/bw + 2(n−1)·α (Patarasuk & Yuan 2009)."""
    return 0.0 if n <= 1 else 2 * (n - 1) / n * size / bw + 2 * (n - 1) * lat


def ring_gather_s(size: int, n: int, bw: float, lat: float) -> float:
    """Ring reduce-scatter or all-gather (also all-to-all) of `size` bytes: (n−1)/n·size/bw + (n−1)·α."""
    return 0.0 if n <= 1 else (n - 1) / n * size / bw + (n - 1) * lat


@dataclass(frozen=True)
class StepEstimate:
    """One optimizer step of a layout (seconds per GPU, the slowest stage)."""

    gpus: int
    micro_batches: int
    global_batch: int
    seq_len: int
    model_flops: int  # one step, all GPUs, no recompute
    hardware_flops: int  # with recomputation
    peak_flops_s: float  # per GPU, the dense peak used for MFU
    compute_s: float
    memory_bound_s: float
    tp_comm_s: float
    pp_bubble_s: float
    pp_comm_s: float
    dp_comm_s: float  # the whole data-parallel communication
    dp_exposed_s: float  # what the backward does not hide
    optimizer_s: float
    moe_all_to_all_s: float
    cp_comm_s: float  # exposed context-parallel traffic (the ring's unhidden part, or all-gather CP's all of it)
    assumptions: dict = field(default_factory=dict)
    moe_overhead_s: float = 0.0  # permutation, router, expert weight traffic, imbalance, fixed cost (moe_time.py)
    offload_pcie_s: float = 0.0  # ZeRO-Offload / ZeRO-Infinity host <-> GPU transfers (not overlapped)
    stage_times_s: tuple[float, ...] = ()  # one micro-batch's forward + backward on each pipeline stage
    step_overhead_s: float = 0.0  # a calibrated profile's fixed cost per step (results/calibrate.py; issue 37)

    @property
    def step_time_s(self) -> float:
        return (self.compute_s + self.memory_bound_s + self.tp_comm_s + self.pp_bubble_s + self.pp_comm_s
                + self.dp_exposed_s + self.optimizer_s + self.moe_all_to_all_s + self.cp_comm_s
                + self.offload_pcie_s + self.moe_overhead_s + self.step_overhead_s)

    @property
    def tokens_per_s(self) -> float:
        return self.global_batch * self.seq_len / self.step_time_s

    @property
    def mfu(self) -> float:
        return self.model_flops / (self.step_time_s * self.gpus * self.peak_flops_s)

    @property
    def hfu(self) -> float:
        return self.hardware_flops / (self.step_time_s * self.gpus * self.peak_flops_s)

    @property
    def tflops_per_gpu(self) -> float:
        return self.model_flops / self.step_time_s / self.gpus / 1e12

    @property
    def breakdown(self) -> dict[str, float]:
        return {
            "compute_s": self.compute_s, "memory_bound_s": self.memory_bound_s, "tp_comm_s": self.tp_comm_s,
            "pp_bubble_s": self.pp_bubble_s, "pp_comm_s": self.pp_comm_s, "dp_comm_exposed_s": self.dp_exposed_s,
            "optimizer_s": self.optimizer_s, "moe_all_to_all_s": self.moe_all_to_all_s, "cp_comm_s": self.cp_comm_s,
            "offload_pcie_s": self.offload_pcie_s, "moe_overhead_s": self.moe_overhead_s,
        }  # fmt: skip


@dataclass(frozen=True)
class StageTime:
    """One micro-batch's forward and backward on one GPU of a pipeline stage (seconds)."""

    compute: float
    memory: float
    tp: float
    moe: float
    cp: float
    moe_overhead: float = 0.0

    @property
    def total(self) -> float:
        return self.compute + self.memory + self.tp + self.moe + self.cp + self.moe_overhead


def micro_batch_count(global_batch: int, par: Parallelism, micro_batch: int) -> int:
    """m = G / (dp·b); an error naming the fix when it does not divide."""
    per_replica, rest = divmod(global_batch, par.data)
    if rest or per_replica == 0:
        raise ValueError(f"the global batch ({global_batch}) must be a multiple of dp ({par.data}); "
                         f"use a multiple of {par.data}")
    m, rest = divmod(per_replica, micro_batch)
    if rest or m == 0:
        raise ValueError(f"the per-replica batch ({per_replica}) must be a multiple of the micro-batch "
                         f"({micro_batch}); choose a micro-batch that divides it")
    return m


def _fp8_gemms(tr: Training) -> bool:
    """FP8 matmuls: the seed's p = 1, or a Transformer Engine FP8 recipe (fp8.py)."""
    return tr.p == 1 or tr.fp8_recipe.value != "none"


def _peak(gpu, tr: Training) -> float:
    from transformer_calc.devices.hardware import peak_dtype, peak_flops

    low = "fp4" if tr.fp8_recipe is FP8Recipe.nvfp4 else "fp8"  # the recipe's GEMM peak (precision.py)
    dtype = "fp32" if tr.precision is Precision.fp32 else (low if _fp8_gemms(tr) else None)
    return float(peak_flops(gpu, peak_dtype(gpu, dtype)))


@dataclass(frozen=True)
class _Setup:
    """The settings one step is priced under: the layout, the network, the achievable rates."""

    m: ModelConfig
    tr: Training
    par: Parallelism
    gpu: Any
    units: Any  # pipeline_units: the stages as Megatron-core splits them
    net: Network
    megatron: bool
    torchtitan: bool
    eff: float  # achievable fraction of the dense peak for matmuls
    memory_efficiency: float
    overlap_tp: bool
    b: int  # the micro-batch
    S: int
    mb: int  # micro-batches per replica
    global_batch: int
    peak: float
    bw_hbm: float  # achievable HBM bytes/s

    @property
    def per_stage_gpus(self) -> float:
        """The T·CP·dp GPUs that share a stage."""
        return self.par.gpus / self.par.pipeline


def _setup(m: ModelConfig, w: Workload, tr: Training, par: Parallelism, gpu: Any, global_batch: int,
           network: Network | None, matmul_efficiency: float | None, memory_efficiency: float,
           tp_comm_overlap: bool | None) -> _Setup:
    """The layout, network and rates of a step, checked in order (each refusal names its fix)."""
    from transformer_calc.estimators.training.memory import pipeline_units

    units = pipeline_units(m.n_layers, par)  # the stages as Megatron-core splits them (checked)
    from transformer_calc.estimators.flops import check_op_recompute

    check_op_recompute(m, tr.recompute, flash=tr.flash, adapters=bool(tr.adapters))
    if w.seq_len % par.context:
        raise ValueError(f"S ({w.seq_len}) must be divisible by the context-parallel size cp ({par.context})")
    net = network or default_network(gpu)
    megatron = tr.framework.value == "megatron"
    torchtitan = tr.framework.value == "torchtitan"
    from transformer_calc.estimators.training.profiles import TORCHTITAN_GEMM_FRACTION

    fraction = (lookup_efficiency(MEGATRON_GEMM_FRACTION, gpu.name, TRAINING_GEMM_FRACTION) if megatron
                else TORCHTITAN_GEMM_FRACTION if torchtitan else TRAINING_GEMM_FRACTION)
    eff = (matmul_efficiency if matmul_efficiency is not None  # the user's measurement on their own board
           else lookup_efficiency(MATMUL_EFFICIENCY, gpu.name, DEFAULT_MATMUL_EFFICIENCY) * fraction
           * power_cap_clock_scale(gpu))
    # Megatron's --tp-comm-overlap (Transformer Engine userbuffers) needs sequence parallelism;
    # the megatron profile runs it whenever it can, as NeMo's and Megatron-Bridge's recipes do.
    overlap_tp = (megatron and par.sequence_parallel and par.tensor > 1) if tp_comm_overlap is None else tp_comm_overlap
    if not 0 < eff <= 1 or not 0 < memory_efficiency <= 1:
        raise ValueError("matmul and memory efficiencies must be fractions in (0, 1]")
    mb = micro_batch_count(global_batch, par, w.batch_size)
    from transformer_calc.devices.hardware import check_fp8_recipe

    check_fp8_recipe(tr.fp8_recipe.value, gpu)  # before the recipe's peak is looked up
    return _Setup(m, tr, par, gpu, units, net, megatron, torchtitan, eff, memory_efficiency, overlap_tp,
                  w.batch_size, w.seq_len, mb, global_batch, _peak(gpu, tr), gpu.memory_bw_bytes_s * memory_efficiency)


def _compute(c: _Setup) -> tuple[Any, int, int, float]:
    """(the step's FLOPs, model FLOPs, hardware FLOPs, the whole step's compute seconds on one GPU of each
    of the P stages together): the executed FLOPs at the achievable peak, with the contributions of
    adapters (no weight gradients of frozen weights), FP8 recipes and torchtitan's SDPA kernels."""
    m, tr, gpu, eff, peak = c.m, c.tr, c.gpu, c.eff, c.peak
    # The time uses what runs: flash kernels skip the masked half of causal attention, eager
    # attention computes all of it. MFU/HFU count the same attention FLOPs (causal with flash, as
    # Megatron-LM's num_floating_point_operations and the Llama 3 paper's MFU do): counting the full
    # S² that a causal kernel never runs would put MFU above 1 at long S (S = 1M: 1.14).
    step = count_flops(m, Workload(seq_len=c.S, batch_size=c.global_batch), causal=tr.flash)
    full = step
    model_flops, hw_flops = full.total, full.hardware(tr.recompute)
    executed = step.hardware(tr.recompute)
    if tr.adapters:  # frozen weights: no weight gradients; the adapters' own matmuls (finetune.py)
        from transformer_calc.estimators.training.gemma4 import finetune_step_flops  # finetune's, Gemma 4's too

        is_full = tr.recompute is Recompute.full
        skipped, adapters_model = finetune_step_flops(m, full, tr, False)  # model FLOPs: no recompute
        adapters_hw = finetune_step_flops(m, full, tr, is_full)[1]
        model_flops, hw_flops = model_flops - skipped + adapters_model, hw_flops - skipped + adapters_hw
        skipped, added = finetune_step_flops(m, step, tr, is_full)
        executed = executed - skipped + added
    # The whole step's compute on one GPU of each of the P stages together (T·CP·dp GPUs share a stage)
    compute_all = executed / c.per_stage_gpus / (peak * eff)
    bf16 = _peak(gpu, tr.model_copy(update={"p": 2, "fp8_recipe": FP8Recipe.none}))
    if tr.fp8_recipe is not FP8Recipe.none:  # a precision recipe: which GEMMs run low, at what rate (precision.py)
        from transformer_calc.estimators.training import precision

        linear_block = 3 * (step.layers - step.attention_cores) / m.n_layers  # one block's linears, all passes
        high = precision.high_precision_flops(m, step, tr, linear_block)
        compute_all = precision.compute_s(executed, high, bf16, peak, eff, tr.fp8_recipe, gpu.name) / c.per_stage_gpus
    elif _fp8_gemms(tr):  # the seed's p = 1: every matmul at the fp8 peak but the attention core (bf16)
        cores = step.attention_cores * (3 + (1 if tr.recompute in (Recompute.selective, Recompute.full) else 0))
        compute_all += cores / c.per_stage_gpus / eff * (1 / bf16 - 1 / peak)
    if c.torchtitan and tr.flash:  # its SDPA flash kernels' measured rates on Hopper (profiles.py)
        from transformer_calc.estimators.training.profiles import SDPA_FLASH_FLOPS_S, attention_core_s

        recompute_core = tr.recompute in (Recompute.selective, Recompute.full)  # op saves SDPA's outputs
        rates = lookup_efficiency(SDPA_FLASH_FLOPS_S, gpu.name, None)
        clock = power_cap_clock_scale(gpu)  # the rates were measured at the rated power
        rates = None if rates is None else (rates[0] * clock, rates[1] * clock)
        core_s = attention_core_s(rates, step.attention_cores, recompute_core)
        if core_s is not None:
            bf16 = _peak(gpu, tr.model_copy(update={"p": 2, "fp8_recipe": FP8Recipe.none}))
            priced = step.attention_cores * (3 + recompute_core) / (bf16 * eff)
            compute_all += (core_s - priced) / c.per_stage_gpus
    return step, model_flops, hw_flops, compute_all


StageKey = tuple[int, int, bool, bool]  # (MoE blocks, dense blocks, embedding, head)


@dataclass(frozen=True)
class _StageFlops:
    """Each stage's share of the executed FLOPs: its blocks (a MoE block and a dense block apart,
    attention averaged over the attention kinds) and, on the last stage, the LM head (Megatron
    places the output layer and loss there: megatron/core/models/gpt/gpt_model.py post_process)."""

    attn_f: float
    moe_f: float
    dense_f: float
    passes: float  # forward, backward (2 forwards), recomputed share of a forward
    head_f: float  # 3 · (LM head + embedding projection)
    kinds: dict[StageKey, int]  # stages of each kind
    stage_key: tuple[StageKey, ...]  # each stage's kind

    def of(self, n_moe: int, n_dense: int, head: bool) -> float:
        blocks = n_moe * (self.attn_f + self.moe_f) + n_dense * (self.attn_f + self.dense_f)
        return blocks * self.passes + (self.head_f if head else 0)

    @property
    def whole(self) -> float:
        return sum(count * self.of(k[0], k[1], k[3]) for k, count in self.kinds.items())


def _stage_flops(c: _Setup, step: Any) -> tuple[_StageFlops, float]:
    """(the stages' FLOPs by kind, the recomputed share of a forward)."""
    from transformer_calc.estimators.training.memory import pipeline_stage

    m, tr, P = c.m, c.tr, c.par.pipeline
    moe_f = step.layer.mlp_total  # the MLP of a MoE block (a dense model's only kind)
    dense_f = (layer_flops(m, Workload(seq_len=c.S, batch_size=c.global_batch), causal=tr.flash, moe=False).mlp_total
               if m.is_moe else moe_f)
    n_moe_all = m.n_moe_layers()
    attn_f = (step.layers - n_moe_all * moe_f - (m.n_layers - n_moe_all) * dense_f) / m.n_layers
    rec = {Recompute.full: 1.0, Recompute.selective: step.attention_cores / max(step.layers, 1),
           Recompute.op: step.op_recompute / max(step.layers, 1)}.get(tr.recompute, 0.0)
    kinds: dict[StageKey, int] = {}
    stage_key = []
    for s_ in range(P):
        chunks = pipeline_stage(m.n_layers, c.par, s_, c.units).chunks
        n_moe_s = sum(m.n_moe_layers(ch.start, ch.stop) for ch in chunks)
        key = (n_moe_s, sum(ch.n_layers for ch in chunks) - n_moe_s, s_ == 0, s_ == P - 1)
        kinds[key] = kinds.get(key, 0) + 1
        stage_key.append(key)
    head_f = 3 * (step.lm_head + step.embedding_projection)
    return _StageFlops(attn_f, moe_f, dense_f, 3 + rec, head_f, kinds, tuple(stage_key)), rec


@dataclass(frozen=True)
class _PerLayer:
    """One micro-batch's seconds per layer (and at the stage's edges) on one GPU, by term."""

    layer_mem_s: float  # memory-bound work of one layer
    dq_layer_s: float  # QLoRA's dequantization of one layer's NF4 weights
    embedding_mem_s: float
    loss_mem_s: float
    tp_layer_s: float
    tp_edge_s: float  # the embedding's (or the head's) one TP collective
    a2a_layer_s: float  # a MoE layer's all-to-all
    moe_extra_s: float  # a MoE layer's permutation, router, expert traffic, imbalance
    cp_layer_s: float


def _memory_bound(c: _Setup) -> tuple[float, float, float, float]:
    """(one layer's, the embedding's, the loss's memory-bound seconds, QLoRA's dequantization per layer)
    for one micro-batch on one GPU."""
    from transformer_calc.estimators.training.memory import FP32_BYTES
    from transformer_calc.estimators.training.profiles import elementwise_bytes

    m, tr, par = c.m, c.tr, c.par
    T, cp, ep, S, D, p, bw_hbm = par.tensor, par.context, par.expert, c.S, m.d_model, tr.p, c.bw_hbm
    # Memory-bound work per token and layer (forward; backward 2x; recompute adds a forward):
    # norms read and write D, residual adds read 2D and write D (2 per layer), the activation
    # function reads its inputs and writes F (per active expert), eager softmax reads and writes
    # the S scores per head. Bytes of p each, sharded like the activations.
    # The kernels' bytes per element are the time profile's (profiles.py: fused, or torchtitan's
    # eager / compiled ops).
    per_token_layer = elementwise_bytes(m, tr).per_token_layer(m, T)
    if not tr.flash:
        per_token_layer += 2 * 2 * (m.n_heads // T) * S / cp * p  # softmax read + write, and its mask/scale pass
    # Full and per-op recompute re-run every elementwise op of the block (op saves matmul and
    # SDPA outputs only: torchtitan/parallelisms/parallelize_llama.py _save_list)
    mem_passes = 3 + (1 if tr.recompute in (Recompute.full, Recompute.op) else 0)
    tokens_mb = c.b * S / cp  # one micro-batch's tokens on one GPU
    layer_mem_s = mem_passes * per_token_layer * tokens_mb / bw_hbm
    if tr.fp8_recipe is not FP8Recipe.none:  # the recipe's casts (precision.py)
        layer_mem_s += _cast_s(c, tokens_mb)
    # Embedding and loss as stage work: the lookup writes b·S·D (forward) and its gradient is
    # accumulated into the table (backward: read the output gradient, read-modify-write fp32
    # rows); the vocabulary-parallel cross-entropy reads the logits, writes the fp32 softmax and
    # turns it into the logits' gradient in place (megatron/core/tensor_parallel/cross_entropy.py).
    embedding_mem_s = (p + p + 2 * FP32_BYTES) * tokens_mb * D / T / bw_hbm
    loss_mem_s = (p + FP32_BYTES + FP32_BYTES + p) * tokens_mb * -(-m.vocab_size // T) / bw_hbm
    dq_layer_s = 0.0
    if tr.finetune.value == "qlora":
        # bitsandbytes dequantizes every NF4 weight to 16 bits for each forward and backward matmul
        # (and the recomputed forward): read the NF4 bytes, write p per weight, per micro-batch
        from transformer_calc.estimators.training.finetune import layer_counts, layer_matrices, quantized

        elems, nf4 = quantized(layer_matrices(m, layer_counts(m), T, ep, par.expert_tensor))
        dq = nf4 + p * elems
        dq_passes = 2 + (1 if tr.recompute is Recompute.full else 0)
        dq_layer_s = dq_passes * dq / m.n_layers / bw_hbm
    return layer_mem_s, embedding_mem_s, loss_mem_s, dq_layer_s


def _cast_s(c: _Setup, tokens_mb: float) -> float:
    """Seconds per layer and micro-batch of an FP8/FP4 recipe's casts (precision.py): the activations
    per micro-batch, the weights once per step (cached across micro-batches), averaged over the layers
    (hybrid_layers.cast_bytes_per_layer: a hybrid's layer by layer, a uniform model's block by block)."""
    from transformer_calc.estimators.training import precision
    from transformer_calc.estimators.training.hybrid_layers import cast_bytes_per_layer

    m, tr = c.m, c.tr
    low_blocks = 1 - precision.bf16_block_count(m, tr.fp8_recipe) / m.n_layers
    q_act, q_w = cast_bytes_per_layer(m, lambda: precision.layer_cast_bytes(m, tr, c.par),
                                      lambda: precision.block_cast_bytes(m, tr, c.par))
    return low_blocks * (q_act * tokens_mb + q_w / c.mb) / c.bw_hbm


def _tensor_parallel(c: _Setup) -> tuple[int, float, float]:
    """(one micro-batch's activation message, TP seconds per layer, at the embedding or the head).

    4 all-reduces per layer and micro-batch (+2 with full recompute); the vocabulary-parallel
    embedding's all-reduce (reduce-scatter with SP) and the head's input all-gather with its backward
    reduce-scatter (or the backward all-reduce): one more each."""
    T, tr = c.par.tensor, c.tr
    tp_bw, tp_lat = c.net.link(T)
    msg = c.b * (c.S // c.par.context) * c.m.d_model * max(tr.p, 2)  # activations travel in 16 bits (FP8 recipes too)
    n_ar: float = 2 * ALL_REDUCES_PER_LAYER + (ALL_REDUCES_PER_LAYER if tr.recompute is Recompute.full else 0)
    if tr.recompute is Recompute.op:  # the recomputed forward re-runs the all-gathers (half an all-reduce
        n_ar += ALL_REDUCES_PER_LAYER / 2  # each); reduce-scatter outputs are in the op policy's save list
    return msg, n_ar * ring_all_reduce_s(msg, T, tp_bw, tp_lat), ring_all_reduce_s(msg, T, tp_bw, tp_lat)


def _moe(c: _Setup, step: Any, passes: float, moe_load_imbalance: float | None,
         moe_dispatch: Any = None) -> tuple[float, float, float]:
    """(a MoE layer's all-to-all, its other costs, the load imbalance): all-to-all, permutation, router,
    expert weight traffic, fixed cost per MoE layer and micro-batch (moe_time.py); the busiest rank's
    extra expert FLOPs under load imbalance."""
    if not c.m.is_moe:
        return 0.0, 0.0, 1.0
    from transformer_calc.estimators.training.moe_time import DEFAULT_LOAD_IMBALANCE, moe_block_time

    imbalance = DEFAULT_LOAD_IMBALANCE if moe_load_imbalance is None else moe_load_imbalance
    blk = moe_block_time(c.m, c.tr, c.par, c.net, tokens=c.b * c.S / c.par.context, hbm_bytes_s=c.bw_hbm,
                         load_imbalance=imbalance, dispatch=moe_dispatch)
    routed = step.layer.mlp * passes / c.per_stage_gpus / c.mb / (c.peak * c.eff)  # one MoE layer's routed experts
    return blk.all_to_all, blk.overhead + (imbalance - 1) * routed, imbalance


def _context_parallel(c: _Setup, step: Any) -> float:
    """Context parallelism's exposed seconds per layer and micro-batch, by `cp_comm_type`:

    - p2p: (cp−1) ring steps of the local K/V, forward and backward (3x with the recompute-free
      backward's two passes), minus the attention core it hides behind (FlashAttention ring kernels).
    - all_gather: Llama 3's CP (arXiv:2407.21783 §3.3.2: "we first all-gather the key (K) and value
      (V) tensors, and then compute attention output for the local query (Q) tensor chunk ...
      the all-gather communication latency is exposed in the critical path"), as Transformer
      Engine runs it (context_parallel.py AttnFuncWithCPAndKVAllGather: the forward all-gathers
      K/V, the backward all-gathers them again and reduce-scatters dK/dV): 3 collectives of the
      gathered cp·(local K/V) bytes, (cp−1)/cp of it per GPU, none overlapped."""
    m, par, T, cp = c.m, c.par, c.par.tensor, c.par.context
    if cp == 1:
        return 0.0
    cp_bw, cp_lat = c.net.link(T * cp)
    kv_t = kv_heads_per_rank(m.attention_kv_heads, T)  # MLA: A/T (T divides A)
    kv_bytes = 2 * c.b * (c.S // cp) * kv_t * m.head_dim * c.tr.p
    if par.cp_comm_type is CPCommType.all_gather:
        return CP_ALL_GATHER_COLLECTIVES * ring_gather_s(cp * kv_bytes, cp, cp_bw, cp_lat)
    ring = 3 * (cp - 1) * (kv_bytes / cp_bw + cp_lat)
    core = 3 * step.attention_cores / m.n_layers / c.mb / par.data / (T * cp) / (c.peak * c.eff)  # what it can hide behind
    return max(0.0, ring - core) if c.tr.flash else ring


def _stage_time(c: _Setup, key: StageKey, flops: _StageFlops, compute_all: float, per: _PerLayer,
                core_share: float, moe_a2a_overlap: bool) -> StageTime:
    """One micro-batch's forward and backward on one GPU of a stage (seconds)."""
    n_moe_s, n_dense_s, emb, head = key
    n = n_moe_s + n_dense_s
    whole = flops.whole
    share = flops.of(n_moe_s, n_dense_s, head) / whole if whole else 1 / c.par.pipeline
    compute = compute_all * share / c.mb
    tp = n * per.tp_layer_s + (per.tp_edge_s if emb else 0) + (per.tp_edge_s if head else 0)
    if c.overlap_tp and n:
        # TE userbuffers' ring exchange splits each all-gather / reduce-scatter into T chunks
        # and runs chunk i's GEMM while chunk i + 1 travels (transformer_engine/pytorch/module/
        # base.py initialize_ub, "ring_exchange"; Megatron --tp-comm-overlap): the first chunk
        # stays exposed, the rest hides behind the linear layers' GEMMs (not the attention core)
        # as far as they last.
        T = c.par.tensor
        gemms = compute * (1 - core_share)
        tp = tp / T + max(0.0, tp * (T - 1) / T - gemms)
    return StageTime(
        compute=compute,
        memory=(n * (per.layer_mem_s + per.dq_layer_s) + (per.embedding_mem_s if emb else 0)
                + (per.loss_mem_s if head else 0)),
        tp=tp,
        # Megatron-core --overlap-moe-expert-parallel-comm (Megatron-Bridge moe_a2a_overlap): the
        # all-to-all of one micro-batch runs under another's compute (moe_time.py)
        moe=n_moe_s * (max(0.0, per.a2a_layer_s - compute / n) if moe_a2a_overlap and n else per.a2a_layer_s),
        cp=n * per.cp_layer_s,
        moe_overhead=n_moe_s * per.moe_extra_s,
    )


def _pipeline_p2p(c: _Setup, msg: int) -> float:
    """Pipeline point-to-point: activations b·S·D·p (/T: scatter-gather), 2 per micro-batch."""
    from transformer_calc.estimators.training.schedules import PP_TRAFFIC

    par, P, T = c.par, c.par.pipeline, c.par.tensor
    if P == 1:
        return 0.0
    pp_bw, pp_lat = c.net.link(T * par.context * par.data * 2)  # neighbouring stages are a replica apart
    act = msg // T if par.sequence_parallel or T > 1 else msg
    return 2 * (c.mb + P - 1) * (act / pp_bw + pp_lat) * PP_TRAFFIC.get(par.schedule, 1)


@dataclass(frozen=True)
class _DataParallel:
    params_local: float  # the first stage's parameters on one GPU
    trainable_local: float
    L_stage: int  # the first stage's layers
    dp_s: float
    dp_exposed: float


def _data_parallel(c: _Setup, per_micro: float, rec: float, overlap_dp: bool) -> _DataParallel:
    """Data parallelism over the dp replicas (stride T·CP; experts over the expert-data group). The
    first stage finishes its backward last: its reduction is the one the step waits for. ZeRO's
    collectives, overlapped with the last backward (bucketed), PyTorch FSDP (the torchtitan and
    pytorch profiles' ZeRO-3) and Megatron's distributed optimizer as contributions."""
    from transformer_calc.estimators.training.memory import pipeline_stage

    m, tr, par = c.m, c.tr, c.par
    T, P, dp, cp, p = par.tensor, par.pipeline, par.data, par.context, tr.p
    sh = shard_params(m, T, par.expert, par.expert_tensor)
    first_chunks = pipeline_stage(m.n_layers, par, 0, c.units).chunks
    params_local = sum(sh.blocks(m, ch.start, ch.stop) for ch in first_chunks) + sh.embedding
    if P == 1:
        params_local += sh.final_norm + sh.lm_head
    L_stage = sum(ch.n_layers for ch in first_chunks)
    trainable_local: float = params_local
    if tr.adapters:  # only the trainable parameters have gradients to reduce and states to update
        from transformer_calc.estimators.training.layer_structure import trainable_params  # finetune's, Gemma 4's too

        trainable_local = trainable_params(m, tr).total / (T * P)
    dp_bw, dp_lat = c.net.link(T * cp * dp)
    grad_bytes = trainable_local * tr.grad_bytes
    if par.zero == 0:
        dp_s = ring_all_reduce_s(int(grad_bytes), dp * cp, dp_bw, dp_lat)
    else:
        dp_s = ring_gather_s(int(grad_bytes), dp * cp, dp_bw, dp_lat) + ring_gather_s(int(trainable_local * p), dp * cp, dp_bw, dp_lat)
        if par.zero >= 3:  # weights all-gathered for the forward and again for the backward
            dp_s += 2 * c.mb * ring_gather_s(int(params_local * p), dp * cp, dp_bw, dp_lat)
    backward_last = per_micro * 2 / 3 * (1 - 1 / max(L_stage, 1))
    dp_exposed = max(0.0, dp_s - backward_last) if overlap_dp else dp_s
    if (c.torchtitan or tr.framework is Framework.pytorch) and par.zero >= 3 and dp * cp > 1:
        # PyTorch FSDP (torchtitan's FSDP2; the pytorch profile's FSDP1/FSDP2, a unit per block): per-block
        # collectives prefetched behind the blocks' compute (profiles.fsdp2_step; FSDP notes, "Prefetch Nuances")
        from transformer_calc.estimators.training.profiles import fsdp2_step

        block = (params_local - sh.embedding - (sh.final_norm + sh.lm_head if P == 1 else 0)) / max(L_stage, 1)
        root = params_local - block * L_stage
        # the backward re-runs the forward (full) or its recomputed share (op) first
        r = rec if tr.recompute in (Recompute.full, Recompute.op) else 0
        fwd_block = per_micro / (3 + r) / max(L_stage, 1)
        bwd_block = per_micro * (2 + r) / (3 + r) / max(L_stage, 1)
        traffic = fsdp2_step(
            all_gather_block_s=ring_gather_s(int(block * p), dp * cp, dp_bw, dp_lat),
            reduce_scatter_block_s=ring_gather_s(int(block * tr.grad_bytes), dp * cp, dp_bw, dp_lat),
            all_gather_root_s=ring_gather_s(int(root * p), dp * cp, dp_bw, dp_lat),
            reduce_scatter_root_s=ring_gather_s(int(root * tr.grad_bytes), dp * cp, dp_bw, dp_lat),
            forward_block_s=fwd_block, backward_block_s=bwd_block, blocks=L_stage, micro_batches=c.mb,
            pipelined=P > 1)
        dp_s = traffic.total_s
        dp_exposed = traffic.exposed_s if overlap_dp else dp_s
    if c.megatron and overlap_dp and par.zero in (1, 2):
        # Megatron's distributed optimizer with --overlap-grad-reduce --overlap-param-gather
        # (megatron/core/distributed/param_and_grad_buffer.py; on in Megatron-Bridge's and NeMo's
        # recipes): the gradients' reduce-scatter hides behind the last micro-batch's backward
        # and the updated parameters' all-gather behind the next step's first forward, each
        # but one layer's worth.
        reduce_scatter = ring_gather_s(int(grad_bytes), dp * cp, dp_bw, dp_lat)
        forward_first = per_micro / 3 * (1 - 1 / max(L_stage, 1))
        dp_exposed = max(0.0, reduce_scatter - backward_last) + max(0.0, dp_s - reduce_scatter - forward_first)
    return _DataParallel(params_local, trainable_local, L_stage, dp_s, dp_exposed)


def _optimizer_s(c: _Setup, trainable_local: float) -> float:
    """Optimizer step: read master, states and gradients, write them back (ZeRO-sharded), HBM-bound."""
    from transformer_calc.estimators.training.memory import optimizer_bytes_per_param, trainable_optimizer_bytes

    m, tr, par = c.m, c.tr, c.par
    opt_params = trainable_local / par.data if par.zero >= 1 else trainable_local
    per_param: float = trainable_optimizer_bytes(tr) if tr.adapters else optimizer_bytes_per_param(tr)
    from transformer_calc.estimators.training.optimizers import SHAPED, master_bytes, model_groups

    if tr.optimizer in SHAPED:  # the whole model's state bytes per trainable parameter
        grp = model_groups(m, tr)
        per_param = master_bytes(tr) + sum(g.state_bytes for g in grp) / max(sum(g.params for g in grp), 1)
    opt_bytes = opt_params * (2 * per_param + tr.grad_bytes + tr.p)
    return opt_bytes / c.bw_hbm


def _offload(c: _Setup, dpp: _DataParallel) -> tuple[float, str | None, float]:
    """(host <-> GPU seconds, the host link, its one-direction bytes/s) of ZeRO-Offload (Ren et al. 2021):
    each GPU sends its gradient partition to the host and receives its updated 16-bit parameter
    partition, once per step; parameter offload (ZeRO-Infinity) also fetches the parameter partition
    for every micro-batch's forward and backward. Over PCIe, one direction at half the bidirectional
    x16 figure, not overlapped (an upper bound: DeepSpeed overlaps part of it). The host's CPU-Adam
    step is not priced; the GPU's optimizer time is 0. Grace-Blackwell parts reach host memory over
    NVLink-C2C instead (hardware.host_bandwidth)."""
    from transformer_calc.devices.hardware import host_bandwidth

    tr, dp, p = c.tr, c.par.data, c.tr.p
    host_link, host_bytes_s = host_bandwidth(c.gpu)
    if not host_bytes_s:
        raise ValueError(f"{c.gpu.name} has no host-link (PCIe) bandwidth in the hardware table; offload cannot be priced")
    pcie = host_bytes_s / 2
    partition = dpp.trainable_local / dp
    moved = partition * (tr.grad_bytes + p)
    if tr.offload.value == "optimizer+params":
        moved += 2 * c.mb * (dpp.params_local / dp) * p
    return moved / pcie, host_link, pcie


def estimate_step(
    m: ModelConfig,
    w: Workload,
    tr: Training,
    par: Parallelism,
    gpu,
    *,
    global_batch: int,
    network: Network | None = None,
    matmul_efficiency: float | None = None,
    memory_efficiency: float = MEMORY_EFFICIENCY,
    overlap_dp: bool = True,
    tp_comm_overlap: bool | None = None,
    moe_load_imbalance: float | None = None,
    moe_a2a_overlap: bool = False,
    moe_dispatch: Any = None,  # moe_time.Dispatch: FP8 dispatch, node-limited routing (None: Megatron-core's)
) -> StepEstimate:
    """The step time of one layout (module docstring for every term and its source).

    `w.batch_size` is the micro-batch b; the global batch G is in sequences. The base sum is each
    stage's compute (`_compute`, `_stage_flops`) and its per-layer terms (`_memory_bound`,
    `_tensor_parallel`, `_moe`, `_context_parallel`), the slowest stage times the micro-batches, the
    pipeline's bubble and point-to-point traffic, the data-parallel reduction (`_data_parallel`),
    the optimizer step and offload's transfers.
    """
    c = _setup(m, w, tr, par, gpu, global_batch, network, matmul_efficiency, memory_efficiency, tp_comm_overlap)
    step, model_flops, hw_flops, compute_all = _compute(c)
    flops, rec = _stage_flops(c, step)
    layer_mem_s, embedding_mem_s, loss_mem_s, dq_layer_s = _memory_bound(c)
    msg, tp_layer_s, tp_edge_s = _tensor_parallel(c)
    a2a_layer_s, moe_extra_s, imbalance = _moe(c, step, flops.passes, moe_load_imbalance, moe_dispatch)
    per = _PerLayer(layer_mem_s, dq_layer_s, embedding_mem_s, loss_mem_s, tp_layer_s, tp_edge_s,
                    a2a_layer_s, moe_extra_s, _context_parallel(c, step))
    core_share = step.attention_cores / max(step.layers, 1)  # of a block's FLOPs: the attention core
    times = {key: _stage_time(c, key, flops, compute_all, per, core_share, moe_a2a_overlap) for key in flops.kinds}
    t_max = times[max(times, key=lambda key: times[key].total)]
    mb, P = c.mb, par.pipeline
    bubble_s = _bubble(c, flops, times, core_share)
    pp_s = _pipeline_p2p(c, msg)
    dpp = _data_parallel(c, t_max.total, rec, overlap_dp)
    optimizer_s = _optimizer_s(c, dpp.trainable_local)
    offload_s, host_link, pcie = 0.0, None, 0.0
    if tr.offload.value != "none":
        offload_s, host_link, pcie = _offload(c, dpp)
        optimizer_s = 0.0
    return StepEstimate(
        gpus=par.gpus, micro_batches=mb, global_batch=global_batch, seq_len=c.S,
        model_flops=model_flops, hardware_flops=hw_flops, peak_flops_s=c.peak,
        compute_s=mb * t_max.compute, memory_bound_s=mb * t_max.memory, tp_comm_s=mb * t_max.tp, pp_bubble_s=bubble_s,
        pp_comm_s=pp_s, dp_comm_s=dpp.dp_s, dp_exposed_s=dpp.dp_exposed, optimizer_s=optimizer_s,
        moe_all_to_all_s=mb * t_max.moe, cp_comm_s=mb * t_max.cp, offload_pcie_s=offload_s,
        moe_overhead_s=mb * t_max.moe_overhead,
        stage_times_s=tuple(times[flops.stage_key[s_]].total for s_ in range(P)),
        assumptions=_assumptions(c, overlap_dp, imbalance, moe_a2a_overlap, host_link, pcie),
    )  # fmt: skip


def _bubble(c: _Setup, flops: _StageFlops, times: dict[StageKey, StageTime], core_share: float) -> float:
    """Pipeline bubble: a step of m micro-batches through stages of times t_s (1F1B) takes
    (m − 1)·max t_s + Σ t_s (a flow shop of identical jobs), so the bubble beyond m·max t_s is
    Σ t_s − max t_s; interleaving v chunks per stage divides it by v (Narayanan et al. 2021
    §2.2.2). Even stages: (P − 1)/v · t, the paper's (P − 1)/(v·m) of the ideal time.
    Other schedules (zero-bubble, DualPipe) from their papers: schedules.py, over each stage's
    t_s, its backward B_s (all but one forward) and its weight-gradient GEMMs W_s (one forward of
    its weight matmuls)."""
    from transformer_calc.estimators.training.schedules import bubble_s as schedule_bubble

    parts = [(flops.kinds[key], times[key].total, times[key].total * (1 - 1 / flops.passes),
              times[key].compute * (1 - core_share) / flops.passes) for key in flops.kinds]
    return schedule_bubble(c.par.schedule, parts, c.par.pipeline, c.par.virtual_stages)


def _assumptions(c: _Setup, overlap_dp: bool, imbalance: float, moe_a2a_overlap: bool, host_link: str | None,
                 pcie: float) -> dict[str, Any]:
    """What the step time assumed, as StepEstimate.assumptions reports it."""
    return {"matmul_efficiency": c.eff, "memory_efficiency": c.memory_efficiency,
            "node_size": c.net.node_size, "intra_node_bytes_s": c.net.intra_bytes_s,
            "inter_node_bytes_s": c.net.inter_bytes_s, "overlap_dp": overlap_dp, "tp_comm_overlap": c.overlap_tp,
            **({"cp_comm_type": c.par.cp_comm_type.value} if c.par.context > 1 else {}),
            **({"moe_load_imbalance": imbalance, "moe_a2a_overlap": moe_a2a_overlap} if c.m.is_moe else {}),
            **({"offload_host_link": host_link, "offload_host_bytes_s": pcie, "offload_overlapped": False,
                "cpu_optimizer_priced": False,
                "nvme_drive_bandwidth_priced": False} if c.tr.offload.value != "none" else {})}  # fmt: skip
