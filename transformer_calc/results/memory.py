"""`tcalc memory`: peak training memory per GPU (the phase timeline), its breakdown, the fit on a GPU.

The typed result (`MemoryResult`) is the command's JSON (`model_dump(mode="json")`), the Python
API's return value and what render reads; docs/cli.md documents its keys. Bytes are per GPU of
the most loaded pipeline stage unless a key says otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import create_model

from transformer_calc.estimators.params import count_params
from transformer_calc.model.config import (
    Finetune,
    LoraTarget,
    ModelConfig,
    Offload,
    OffloadDevice,
    Optimizer,
    Parallelism,
    Training,
    Workload,
)
from transformer_calc.results.base import Result, Section
from transformer_calc.results.common import (Assumptions, CheckpointSection, ModelSection, TowersSection, WorkloadSection,
                                            assumptions_section, model_section, towers_section)

if TYPE_CHECKING:
    from transformer_calc.requests.training import MemoryRequest


def _config_fields(cls: Any) -> dict[str, Any]:
    """A config model's JSON fields, in its order, with its types (excluded fields left out)."""
    return {name: (f.annotation, ...) for name, f in cls.model_fields.items() if not f.exclude}


# The workload, training and parallelism sections: each config as resolved (defaults filled in),
# generated from the config's own fields, as the model section is: a new option is a new key here
# without a second declaration.
TrainingSection = create_model("TrainingSection", __base__=Section, **_config_fields(Training))
ParallelismSection = create_model(
    "ParallelismSection", __base__=Section, **_config_fields(Parallelism),
    gpus=(int, ...),  # T·CP·P·dp
)


def _config_section(section: Any, config: Any, **derived: Any) -> Any:
    """A config's section: every field of `config` (defaults filled in), then the derived keys."""
    return section(**{name: getattr(config, name) for name in _config_fields(type(config))}, **derived)


class MemoryParams(Section):
    total: int  # the whole model
    per_gpu: int  # held by the most loaded GPU before ZeRO sharding
    trainable: int  # with gradients (all of them in full training; adapters, embedding, head otherwise)
    trainable_per_gpu: int


class PhaseBytes(Section):
    """What one GPU holds at one moment of the step (estimators.training.timeline.Phase)."""

    phase: str
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int  # stored for backward (and being recomputed)
    transient_bytes: int  # the phase's own temporaries (logits, gradients of intermediates, optimizer temps)
    gathered_bytes: int  # ZeRO-3 / FSDP parameters gathered unsharded
    buckets_bytes: int  # gradient communication buffers
    total_bytes: int


class StateBytes(Section):
    """Model states and activations as the terms of the seed's sum (not a moment of the step)."""

    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    total_bytes: int


class WeightsDetail(Section):
    """Of `per_gpu.weights_bytes`."""

    frozen_bytes: int  # fine-tuning: the frozen base (0 in full training)
    quantized_bytes: int  # of the frozen base: NF4 codes and constants (QLoRA)
    trainable_bytes: int  # the trained parameters' copy
    fp8_copies_bytes: int  # FP8 weight copies and scaling state (fp8_recipe)


class ActivationBytes(Section):
    """Of `per_gpu.activations_bytes`: stored activations by where they come from."""

    attention_bytes: int
    mlp_bytes: int
    norm_bytes: int
    other_bytes: int  # embedding, final norm, head and loss (first and last stage)
    recompute_working_bytes: int  # what recomputation rebuilds for one block during backward


class BytesPerParam(Section):
    """Full training: bytes per parameter of each model state."""

    weights: int  # p
    gradients: int
    optimizer: int  # states (+ the fp32 master copy in mixed precision); nominal for shaped optimizers


class AdapterBytesPerParam(Section):
    """Adapters (LoRA, QLoRA, DoRA): the frozen weights per parameter, the rest per trainable parameter."""

    weights: int  # frozen parameters not quantized
    quantized_weights: float | None  # QLoRA: NF4 with double quantization (4.127 bits); None otherwise
    trainable_weights: int
    gradients: int
    optimizer: int  # states only: the trainable copy is the master


class OptimizerGroup(Section):
    """One parameter group of the optimizer (estimators.training.optimizers.GroupBytes)."""

    group: str
    params: int
    state_bytes: int
    bytes_per_param: float | None  # None: a group of no parameters


class OptimizerGroups(Section):
    """The optimizer's parameter groups over the whole model (T = 1)."""

    optimizer: Optimizer
    master_bytes_per_param: int  # the fp32 master copy (mixed precision, full training), else 0
    groups: list[OptimizerGroup]
    state_bytes: int
    state_bytes_per_param: float | None  # None: no parameters
    paged: bool  # paged-adamw-8bit: unified memory, counted on the GPU


class StageRow(Section):
    """One pipeline stage's GPU."""

    stage: int
    n_layers: int
    params: int
    model_states_bytes: int
    activations_bytes: int
    total_bytes: int  # the seed's sum
    peak_bytes: int  # the peak of its step
    peak_phase: str


class MemorySection(Section):
    peak_bytes: int  # the step's peak on the most loaded GPU
    peak_phase: str
    peak: PhaseBytes
    sum_bytes: int  # every term at once: an upper bound
    cuda_context_bytes: int
    allocator_reserve_bytes: int  # the caching allocator's unused reserve
    nvidia_smi_bytes: int  # peak + CUDA context + allocator reserve
    phases: list[PhaseBytes]
    per_gpu: StateBytes
    weights_detail: WeightsDetail
    activations: ActivationBytes
    activation_ratio: float | None  # activations / model states; None: no model states on the GPU
    stage: int  # the most loaded pipeline stage
    in_flight_micro_batches: int  # whose activations are alive on it (1F1B; interleaved: model-chunk forwards)
    bytes_per_param: BytesPerParam | AdapterBytesPerParam
    optimizer_groups: OptimizerGroups
    stages: list[StageRow]


class FinetuneSection(Section):
    method: Finetune
    lora_rank: int
    lora_alpha: float | None
    lora_alpha_memory_effect: str
    lora_targets: list[LoraTarget]
    adapted_modules: int
    trainable_params: int
    adapter_params: int  # LoRA A and B (+ DoRA magnitudes)
    trainable_embedding_params: int
    trainable_head_params: int
    trainable_fraction: float  # trainable / frozen
    frozen_params: int
    frozen_weight_format: str  # how the frozen base is held, in words


class OffloadSection(Section):
    """ZeRO-Offload / ZeRO-Infinity: what lives off the GPU."""

    what: Offload
    device: OffloadDevice
    gpu_bytes: int  # the peak the GPU still holds
    host_weights_bytes: int  # per GPU
    host_gradients_bytes: int
    host_optimizer_bytes: int
    host_bytes_per_gpu: int  # 0 when offloaded to NVMe
    nvme_bytes_per_gpu: int  # 0 when offloaded to host memory
    gpus_per_node: int
    host_bytes_per_node: int
    nvme_bytes_per_node: int


class GpuFit(Section):
    name: str
    memory_bytes: int
    usable_bytes: int  # less the CUDA context
    headroom_bytes: int  # usable - peak (negative: does not fit)


class TensorPipeline(Section):
    T: int
    P: int


class FitSection(Section):
    max_micro_batch: int  # largest B that fits (0: none)
    min_tensor_parallel: int | None  # smallest T that fits at the given P (None: none up to 64)
    min_tensor_pipeline: TensorPipeline | None  # smallest T·P that fits (None: none)


class MemoryResult(Result):
    model: ModelSection
    workload: WorkloadSection
    training: TrainingSection
    parallelism: ParallelismSection
    params: MemoryParams
    memory: MemorySection
    b_min: float  # seed B_min: mixed precision saves memory above this micro-batch
    assumptions: Assumptions  # the defaults this answer assumed (requests/defaults.py), with their sources
    finetune: FinetuneSection | None = None  # adapters only
    offload: OffloadSection | None = None  # --offload only
    gpu: GpuFit | None = None  # --gpu only, as fits and fit
    fits: bool | None = None
    fit: FitSection | None = None
    towers: TowersSection | None = None  # a multimodal model: its towers are not in training memory
    checkpoint: CheckpointSection | None = None  # a checkpoint as MODEL only


def memory_report(
    m: ModelConfig,
    w: Workload,
    tr: Training,
    par: Parallelism,
    gpu: Any | None = None,
    checkpoint: CheckpointSection | None = None,
    assumed: list[Any] = (),  # type: ignore[assignment]
) -> MemoryResult:
    """`tcalc memory`: training memory per GPU of the most loaded pipeline stage, with fitting."""
    from transformer_calc.estimators.training.memory import b_min
    from transformer_calc.estimators.training.timeline import stage_timelines
    from transformer_calc.estimators.training.layer_structure import trainable_params  # finetune's, Gemma 4's classes too

    timelines = stage_timelines(m, w, tr, par)
    timeline = max(timelines, key=lambda tl: tl.peak_bytes)
    worst, peak = timeline.stage, timeline.peak
    trainable = trainable_params(m, tr)
    optional: dict[str, Any] = {}  # the sections this run produces beyond the fixed ones
    if tr.adapters:
        optional["finetune"] = _finetune_section(m, tr, trainable)
    if tr.offload is not Offload.none:
        optional["offload"] = _offload_section(tr, par, worst, peak.total)
    if gpu is not None:
        optional.update(_fit_sections(m, w, tr, par, gpu, peak.total))
    if (towers := towers_section(m, "training")) is not None:
        optional["towers"] = towers
    if checkpoint is not None:
        optional["checkpoint"] = checkpoint
    return MemoryResult(
        model=model_section(m),
        workload=_config_section(WorkloadSection, w),
        training=_config_section(TrainingSection, tr),
        parallelism=_config_section(ParallelismSection, par, gpus=par.gpus),
        params=MemoryParams(total=count_params(m).total, per_gpu=worst.params,
                           trainable=trainable.total, trainable_per_gpu=worst.trainable_params),
        memory=_memory_section(m, tr, timelines, timeline),
        b_min=b_min(m, w.seq_len),
        assumptions=assumptions_section(assumed),
        **optional,
    )


def _fit_sections(m: ModelConfig, w: Workload, tr: Training, par: Parallelism, gpu: Any,
                  peak_bytes: int) -> dict[str, Any]:
    """The GPU, whether the peak fits its usable memory, and the largest B and smallest T, T·P that fit."""
    from transformer_calc.estimators.training.timeline import fit_capacity, max_micro_batch, min_parallelism

    capacity = fit_capacity(gpu.memory_bytes)
    fit_T = min_parallelism(m, w, tr, par, capacity)
    fit_TP = min_parallelism(m, w, tr, par, capacity, vary_pipeline=True)
    return {
        "gpu": GpuFit(name=gpu.name, memory_bytes=gpu.memory_bytes, usable_bytes=capacity,
                      headroom_bytes=capacity - peak_bytes),
        "fits": peak_bytes <= capacity,
        "fit": FitSection(
            max_micro_batch=max_micro_batch(m, w, tr, par, capacity),
            min_tensor_parallel=fit_T[0] if fit_T else None,
            min_tensor_pipeline=TensorPipeline(T=fit_TP[0], P=fit_TP[1]) if fit_TP else None,
        ),
    }


def _memory_section(m: ModelConfig, tr: Training, timelines: list[Any], timeline: Any) -> MemorySection:
    """The most loaded stage's peak, its phases and terms, and every stage's row."""
    from transformer_calc.estimators.training.timeline import CUDA_CONTEXT_BYTES, allocator_reserve

    worst, peak = timeline.stage, timeline.peak
    non_act = worst.model_states
    reserve = allocator_reserve(peak.total)
    return MemorySection(
        peak_bytes=peak.total,
        peak_phase=peak.name,
        peak=_phase_bytes(peak),
        sum_bytes=timeline.sum_bytes,
        cuda_context_bytes=CUDA_CONTEXT_BYTES,
        allocator_reserve_bytes=reserve,
        nvidia_smi_bytes=peak.total + CUDA_CONTEXT_BYTES + reserve,
        phases=[_phase_bytes(ph) for ph in timeline.phases],
        per_gpu=StateBytes(
            weights_bytes=worst.weights,
            gradients_bytes=worst.gradients,
            optimizer_bytes=worst.optimizer,
            activations_bytes=worst.activations,
            total_bytes=worst.total,
        ),
        weights_detail=WeightsDetail(  # fine-tuning: frozen base (of it NF4) and the trainable copy
            frozen_bytes=worst.weights - worst.adapter_weights if tr.adapters else 0,
            quantized_bytes=worst.quantized_weights,
            trainable_bytes=worst.adapter_weights if tr.adapters else worst.weights - worst.fp8_weights,
            fp8_copies_bytes=worst.fp8_weights,
        ),
        activations=ActivationBytes(
            attention_bytes=worst.attention,
            mlp_bytes=worst.mlp,
            norm_bytes=worst.norm,
            other_bytes=worst.other,
            recompute_working_bytes=worst.recompute_working,
        ),
        activation_ratio=worst.activations / non_act if non_act else None,
        stage=worst.stage,
        in_flight_micro_batches=worst.in_flight,
        bytes_per_param=_bytes_per_param(tr),
        optimizer_groups=_optimizer_groups(m, tr),
        stages=[_stage_row(tl) for tl in timelines],
    )


def _stage_row(tl: Any) -> StageRow:
    """One pipeline stage: its layers, parameters, states, activations and its own peak."""
    return StageRow(
        stage=tl.stage.stage,
        n_layers=tl.stage.n_layers,
        params=tl.stage.params,
        model_states_bytes=tl.stage.model_states,
        activations_bytes=tl.stage.activations,
        total_bytes=tl.stage.total,
        peak_bytes=tl.peak_bytes,
        peak_phase=tl.peak.name,
    )


def _phase_bytes(ph: Any) -> PhaseBytes:
    """One phase of the step (estimators.training.timeline.Phase)."""
    return PhaseBytes(
        phase=ph.name,
        weights_bytes=ph.weights,
        gradients_bytes=ph.gradients,
        optimizer_bytes=ph.optimizer,
        activations_bytes=ph.activations,
        transient_bytes=ph.transient,
        gathered_bytes=ph.gathered,
        buckets_bytes=ph.buckets,
        total_bytes=ph.total,
    )


def _bytes_per_param(tr: Training) -> BytesPerParam | AdapterBytesPerParam:
    """Bytes per parameter of each model state (per trainable parameter under adapters)."""
    from transformer_calc.estimators.training.memory import optimizer_bytes_per_param, trainable_optimizer_bytes

    if not tr.adapters:
        return BytesPerParam(weights=tr.p, gradients=tr.grad_bytes, optimizer=optimizer_bytes_per_param(tr))
    from transformer_calc.estimators.training.finetune import NF4_BLOCK, NF4_BLOCKS_PER_GROUP, trainable_weight_bytes

    nf4_bits = 4 + 8 / NF4_BLOCK + 32 / (NF4_BLOCK * NF4_BLOCKS_PER_GROUP)
    return AdapterBytesPerParam(
        weights=4 if tr.fp32_unquantized else tr.p,  # frozen parameters not quantized
        quantized_weights=nf4_bits / 8 if tr.finetune is Finetune.qlora else None,
        trainable_weights=trainable_weight_bytes(tr),
        gradients=tr.grad_bytes,
        optimizer=trainable_optimizer_bytes(tr),
    )


def _optimizer_groups(m: ModelConfig, tr: Training) -> OptimizerGroups:
    """The optimizer's parameter groups over the whole model: state bytes per parameter each."""
    from transformer_calc.estimators.training.optimizers import master_bytes, model_groups

    groups = model_groups(m, tr)
    params = sum(g.params for g in groups)
    states = sum(g.state_bytes for g in groups)
    return OptimizerGroups(
        optimizer=tr.optimizer,
        master_bytes_per_param=master_bytes(tr),
        groups=[
            OptimizerGroup(group=g.group, params=g.params, state_bytes=g.state_bytes,
                           bytes_per_param=g.state_bytes / g.params if g.params else None)
            for g in groups
        ],
        state_bytes=states,
        state_bytes_per_param=states / params if params else None,
        paged=tr.optimizer is Optimizer.paged_adamw_8bit,
    )


def _finetune_section(m: ModelConfig, tr: Training, trainable: Any) -> FinetuneSection:
    total = count_params(m).total
    return FinetuneSection(
        method=tr.finetune,
        lora_rank=tr.lora_rank,
        lora_alpha=tr.lora_alpha,
        lora_alpha_memory_effect="none (alpha/r scales the adapter output; no tensor changes size)",
        lora_targets=list(tr.lora_targets),
        adapted_modules=trainable.adapted_modules,
        trainable_params=trainable.total,
        adapter_params=trainable.adapters,
        trainable_embedding_params=trainable.embedding,
        trainable_head_params=trainable.head,
        trainable_fraction=trainable.total / total,
        frozen_params=total,
        frozen_weight_format="nf4 (double quantization)" if tr.finetune is Finetune.qlora else (
            f"checkpoint ({8 * tr.frozen_weights[0] / tr.frozen_weights[1]:.4g} bits per parameter)"
            if tr.frozen_weights is not None else f"{tr.p}-byte"),
    )


GPUS_PER_NODE = 8  # an HGX/DGX node: host memory per node is per-GPU offload x min(8, GPUs)


def _offload_section(tr: Training, par: Parallelism, st: Any, peak: int) -> OffloadSection:
    node = min(GPUS_PER_NODE, par.gpus)
    per_gpu = st.offloaded
    nvme = tr.offload_device is OffloadDevice.nvme
    return OffloadSection(
        what=tr.offload,
        device=tr.offload_device,
        gpu_bytes=peak,
        host_weights_bytes=st.host_weights,
        host_gradients_bytes=st.host_gradients,
        host_optimizer_bytes=st.host_optimizer,
        host_bytes_per_gpu=0 if nvme else per_gpu,
        nvme_bytes_per_gpu=per_gpu if nvme else 0,
        gpus_per_node=node,
        host_bytes_per_node=0 if nvme else per_gpu * node,
        nvme_bytes_per_node=per_gpu * node if nvme else 0,
    )


def memory_command(src: Any, flags: dict[str, Any]) -> MemoryResult:
    """`tcalc memory` and `tc.memory` from a resolved model source (`sources.resolve.Source`) and the
    options given (job-file key names; None: not given): each the option, else the job file's
    training: key, else the default (config.resolve). `dtype` is the compute dtype, `p` its bytes."""
    from transformer_calc.devices.hardware import COMPUTE_DTYPE_BYTES, check_fp8_recipe, compute_dtype
    from transformer_calc.requests.training import memory_configs
    from transformer_calc.results.common import source_checkpoint, with_checkpoint_weights
    from transformer_calc.sources.presets import gpu as find_gpu

    flags = dict(flags)
    name = compute_dtype(flags.pop("dtype", None), flags.get("p"))  # --dtype / --p: one concept
    if name is not None:
        flags["p"] = COMPUTE_DTYPE_BYTES[name]
    m, job = src.model, src.job
    w, tr, par, gpu_name, assumed = memory_configs(m, job.training if job else {}, flags)
    tr = with_checkpoint_weights(m, tr, src.checkpoint)
    device = find_gpu(gpu_name)
    check_fp8_recipe(tr.fp8_recipe.value, device)
    return memory_report(m, w, tr, par, device, checkpoint=source_checkpoint(src), assumed=assumed)


# ---------------------------------------------------------------------------- the command
def run_memory(req: MemoryRequest) -> MemoryResult:
    return memory_command(req.source(), req.given() | {"dtype": req.dtype})
