"""`tcalc train` and `tcalc plan`: their requests, apart from `tcalc memory`'s (requests/training.py,
whose options and configs they share), so that `tcalc memory` does not build their ~115 fields
(issue 39: start-up imports what the invoked command needs)."""

from __future__ import annotations

from typing import Annotated, Any

from transformer_calc.errors import TcalcError
from transformer_calc.requests import cost
from transformer_calc.requests.base import DTYPE_HELP, P_HELP, ProfileOpt, count, fraction, opt, positive, whole
from transformer_calc.requests.model import ModelRequest
from transformer_calc.requests.training import (
    Activations, CPCommTypeOpt, Compile, CrossEntropy, Dropout, EmbeddingInSplit, Etp, FP32Unquantized,
    FP8, Finetune, FirstStage, FlashOpt, FrameworkOpt, FusedOptimizer, GlobalBatch, GlobalBatchTokens,
    GpuOpt, GradBytes, Head, InterNode, LastStage, LoraAlpha, LoraRank, LoraTargets, LossInSplit,
    MicrobatchGroup, NodeSize, OffloadDevice, OffloadOpt, OptimizerOpt, PARALLEL, PipelineScheduleOpt,
    RecomputeOpt, SeqLen, SequenceParallelOpt, TRAINING, TrainEmbeddings, TrainHead, ZeroOpt,
)


def _virtual_stages(value: Any) -> int | str:
    """--virtual-stages: a positive count, or auto (`tcalc train` chooses)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    return whole(value)


class TrainRequest(ModelRequest):
    """`tcalc train`: a layout's step time; the training: keys but data parallelism (what the GPUs
    leave) and the micro-batches per step (from the global batch)."""

    command = "train"
    common = ('model', 'gpus', 'gpu', 'seq_len', 'global_batch', 'tensor', 'pipeline', 'zero', 'recompute', 'fp8_recipe', 'tokens')  # the options shown first (help, MCP schema)
    section = "training"
    gpus: Annotated[int | None, opt("--gpus", help="GPUs in all; dp = gpus / (T·P·CP) \\[default: the job file's data x T x P x CP, else 8].", parse=whole, job=False)] = None
    gpu: GpuOpt = None
    seq_len: SeqLen = None
    global_batch: GlobalBatch = None
    global_batch_tokens: GlobalBatchTokens = None
    batch_size: Annotated[int | None, opt("--micro-batch", "--B", "--batch-size", help="Micro-batch b \\[default: the job file's, else the fastest that fits].", parse=whole)] = None
    tensor: Annotated[int | None, opt("--T", "--tensor-parallel", help="T: tensor-parallel ranks \\[default: 1].", panel=PARALLEL, parse=whole)] = None
    pipeline: Annotated[int | None, opt("--P", "--pipeline-parallel", help="P: pipeline stages (1F1B) \\[default: 1].", panel=PARALLEL, parse=whole)] = None
    virtual_stages: Annotated[int | str | None, opt("--virtual-stages", help="Interleaved model chunks per stage, or auto: the fastest of 1, 2, 4, 8 that the split and the schedule allow and that fits \\[default: 1].", panel=PARALLEL, parse=lambda v: _virtual_stages(v))] = None
    first_stage_layers: FirstStage = None
    last_stage_layers: LastStage = None
    embedding_in_split: EmbeddingInSplit = None
    loss_in_split: LossInSplit = None
    pipeline_schedule: PipelineScheduleOpt = None
    context: Annotated[int | None, opt("--cp", "--context-parallel", help="Context-parallel ranks (long sequences) \\[default: 1].", panel=PARALLEL, parse=whole)] = None
    cp_comm_type: CPCommTypeOpt = None
    microbatch_group: MicrobatchGroup = None
    expert: Annotated[int | None, opt("--ep", "--expert-parallel", help="Expert-parallel ranks (MoE) \\[default: 1].", panel=PARALLEL, parse=whole)] = None
    sequence_parallel: SequenceParallelOpt = None
    zero: ZeroOpt = None
    recompute: RecomputeOpt = None
    flash: FlashOpt = None
    precision: Annotated[str | None, opt("--precision", help="mixed | bf16 | fp32 \\[default: mixed; fp32 with --dtype fp32].", panel=TRAINING)] = None
    dtype: Annotated[str | None, opt("--dtype", help=DTYPE_HELP + " (fp8: matmuls at the fp8 peak) \\[default: bf16].", panel=TRAINING, job=False)] = None
    p: Annotated[int | None, opt("--p", help=P_HELP + " \\[default: 2].", panel=TRAINING, parse=whole)] = None
    framework: FrameworkOpt = None
    finetune: Finetune = None
    lora_rank: LoraRank = None
    lora_targets: LoraTargets = None
    offload: OffloadOpt = None
    offload_device: OffloadDevice = None
    fp8_recipe: FP8 = None
    compile: Compile = None
    matmul_efficiency: Annotated[float | None, opt("--matmul-efficiency", help="Achievable fraction of the dense peak \\[default: measured MAMF per GPU].", parse=fraction, job=False)] = None
    moe_load_imbalance: Annotated[float | None, opt("--moe-load-imbalance", help="MoE: the busiest expert-parallel rank's tokens over the mean, >= 1 (scales its expert FLOPs, all-to-all and permutation) \\[default: 1.0, balanced, as the Megatron-Bridge benchmarks force it].", panel=PARALLEL, parse=positive, job=False)] = None
    moe_a2a_overlap: Annotated[bool | None, opt("--moe-a2a-overlap/--no-moe-a2a-overlap", help="MoE: each micro-batch's all-to-all runs under another micro-batch's compute (Megatron --overlap-moe-expert-parallel-comm) \\[default: off, Megatron-core's default].", panel=PARALLEL, job=False)] = None
    dispatch_dtype: Annotated[str | None, opt("--dispatch-dtype", help="MoE: the dispatch's hidden-state dtype, bf16 | fp16 | fp8 (one fp32 scale per 128 channels; DeepSeek-V3 dispatches in FP8, its forward and backward combines in BF16) \\[default: the activation dtype].", panel=PARALLEL, job=False)] = None
    moe_max_nodes: Annotated[int | None, opt("--moe-max-nodes", help="MoE: node-limited routing, the nodes a token reaches at most, one NIC transfer per node, its copies forwarded over NVLink (DeepSeek-V3: 4) \\[default: none: every copy on its own].", panel=PARALLEL, parse=whole, job=False)] = None
    tp_comm_overlap: Annotated[bool | None, opt("--tp-comm-overlap/--no-tp-comm-overlap", help="Tensor-parallel collectives overlapped with the GEMMs (Megatron --tp-comm-overlap, TE userbuffers) \\[default: on for --framework megatron with --sp and T > 1].", panel=PARALLEL, job=False)] = None
    node_size: NodeSize = None
    inter_node_gb_s: InterNode = None
    tokens: Annotated[int | None, opt("--tokens", help="Token budget for days, GPU-hours and cost, e.g. 15T \\[default: none].", parse=count, job=False)] = None
    price_per_gpu_hour: cost.Price = None
    price_kind: cost.PriceKind = None
    prices: cost.Prices = None
    pue: cost.Pue = None
    node_overhead: cost.NodeOverhead = None
    grid_intensity_g_per_kwh: cost.GridIntensity = None
    interruptions_per_gpu_day: cost.InterruptionRate = None
    storage_gb_s: cost.StorageGbS = None
    checkpoint_mode: cost.CheckpointMode = None
    checkpoint_interval_s: cost.CheckpointInterval = None
    restart_s: cost.RestartS = None
    optimizer: OptimizerOpt = None
    grad_bytes: GradBytes = None
    activations: Activations = None
    cross_entropy: CrossEntropy = None
    dropout: Dropout = None
    head_activations: Head = None
    fused_optimizer: FusedOptimizer = None
    expert_tensor: Etp = None
    lora_alpha: LoraAlpha = None
    train_embeddings: TrainEmbeddings = None
    train_head: TrainHead = None
    fp32_unquantized: FP32Unquantized = None
    profile: ProfileOpt = None

    def check(self, label: Any) -> None:
        for name in ("price_per_gpu_hour", "price_kind", "prices", "pue", "node_overhead", "grid_intensity_g_per_kwh",
                     "interruptions_per_gpu_day", "storage_gb_s", "checkpoint_mode", "checkpoint_interval_s", "restart_s"):
            if getattr(self, name) is not None and self.tokens is None:
                raise TcalcError(f"{label(name).rstrip('= ')} prices a token budget: give --tokens too "
                                 "(e.g. --tokens 15T), or drop it")


class PlanRequest(ModelRequest):
    """`tcalc plan`: the layout is plan's to choose; the settings that are not the layout."""

    command = "plan"
    common = ('model', 'gpus', 'gpu', 'seq_len', 'global_batch', 'global_batch_tokens')  # the options shown first (help, MCP schema)
    section = "training"
    gpus: Annotated[int, opt("--gpus", help="GPUs in all.", parse=whole, job=False)] = 8
    gpu: GpuOpt = None
    seq_len: SeqLen = None
    global_batch: Annotated[int | None, opt("--global-batch", help="Global batch in sequences \\[default: none; this or --global-batch-tokens].", parse=count, job=False)] = None
    global_batch_tokens: GlobalBatchTokens = None
    top: Annotated[int, opt("--top", help="Layouts shown.", parse=whole, job=False)] = 10
    profile: ProfileOpt = None
    flash: FlashOpt = None
    framework: FrameworkOpt = None
    compile: Compile = None
    finetune: Finetune = None
    lora_rank: LoraRank = None
    lora_targets: LoraTargets = None
    node_size: NodeSize = None
    inter_node_gb_s: InterNode = None
