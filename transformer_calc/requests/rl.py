"""`tcalc rl`: an RL post-training step (GRPO, PPO), its options declared once.

The trainer's options are the training commands' (requests/training.py: the same fields, flags and
parsers: --T, --P, --cp, --ep, --zero, --framework, --recompute, --micro-batch), the engine's the
serving commands' (requests/inference.py: --engine, --memory-utilization, --max-num-seqs,
--weight-dtype, --kv-dtype); what is new is the algorithm (group size, prompts, the response
lengths, the reference and critic) and the placement (colocated or split pools, the engine's own
T). A job file's model: section is read (the model); RL has no section of its own.
"""

from __future__ import annotations

from typing import Annotated, Any

from transformer_calc.errors import TcalcError
from transformer_calc.requests.base import fraction, length, opt, positive, text, whole, whole_or_zero
from transformer_calc.requests.inference import (BatchedTokens, Engine, MatmulEff, MaxSeqs, MemoryUtil)
from transformer_calc.requests.model import ModelRequest
from transformer_calc.requests.training import (Etp, FlashOpt, FrameworkOpt, GpuOpt, GradBytes, InterNode, NodeSize,
                                                OffloadDevice, OffloadOpt, OptimizerOpt, RecomputeOpt, SequenceParallelOpt,
                                                ZeroOpt)

ALGORITHM = "Algorithm"
TRAINER = "Trainer"
ROLLOUT = "Rollout engine"
PLACEMENT = "Placement"


def _choice(*choices: str) -> Any:
    def parse(value: Any) -> str:
        word = text(value).strip().lower()
        if word not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return word
    return parse


def _rollout_gpus(value: Any) -> int | str:
    """--rollout-gpus: a whole number, or auto (`tcalc rl` tries the splits)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    return whole(value)


def _mean_len(value: Any) -> float:
    """A mean response length in tokens (a float: a log's mean, e.g. 932.5)."""
    return positive(value)


class RlRequest(ModelRequest):
    """`tcalc rl`: one RL step's phases, time and memory per GPU."""

    command = "rl"
    section = None
    # ------------------------------------------------------------------ the algorithm
    algorithm: Annotated[str | None, opt("--algorithm", help="grpo (group-relative advantages, no critic) | ppo (a critic of the policy's size: its value pass and its update) \\[default: grpo].", panel=ALGORITHM, parse=_choice("grpo", "ppo"), job=False)] = None
    group_size: Annotated[int | None, opt("--group-size", help="G: samples per prompt (verl rollout.n, NeMo-RL num_generations_per_prompt) \\[default: 5 grpo, as verl's GRPO example; 1 ppo].", panel=ALGORITHM, parse=whole, job=False)] = None
    prompts_per_step: Annotated[int | None, opt("--prompts-per-step", help="Prompts per step (verl data.train_batch_size, NeMo-RL num_prompts_per_step) \\[default: 1024, verl's GRPO example].", panel=ALGORITHM, parse=whole, job=False)] = None
    seq_len: Annotated[int | None, opt("--prompt-len", "--S", "--seq-len", help="P: prompt tokens per sample \\[default: 512, verl's GRPO example's max_prompt_length].", panel=ALGORITHM, parse=length, job=False)] = None
    max_response_len: Annotated[int | None, opt("--max-response-len", help="L: the longest response, longer ones cut (verl data.max_response_length) \\[default: 1024].", panel=ALGORITHM, parse=length, job=False)] = None
    response_len_mean: Annotated[float | None, opt("--response-len-mean", help="μ: mean response tokens (verl's response_length/mean) \\[default: L/2].", panel=ALGORITHM, parse=_mean_len, job=False)] = None
    response_len_dist: Annotated[str | None, opt("--response-len-dist", help="Response lengths: exponential (clipped at L: a long tail, the step waits for its longest sample) | uniform | fixed (every response μ) \\[default: exponential].", panel=ALGORITHM, parse=_choice("exponential", "uniform", "fixed"), job=False)] = None
    kl_reference: Annotated[bool | None, opt("--kl-reference/--no-kl-reference", help="A reference model's log-probs for a KL term (its weights held, its forward priced) \\[default: on, as verl's GRPO example; off for DAPO].", panel=ALGORITHM, job=False)] = None
    mini_batches: Annotated[int | None, opt("--mini-batches", help="Optimizer steps per epoch: the samples / ppo_mini_batch_size \\[default: 4, verl's GRPO example (1024 / 256)].", panel=ALGORITHM, parse=whole, job=False)] = None
    epochs: Annotated[int | None, opt("--epochs", help="Passes over the step's samples (ppo_epochs) \\[default: 1].", panel=ALGORITHM, parse=whole, job=False)] = None
    partial_rollouts: Annotated[bool, opt("--partial-rollouts/--no-partial-rollouts", help="Unfinished samples carried to the next step (Kimi k1.5; NeMo-RL's async GRPO with in_flight_weight_updates): the engine stays full, no tail \\[default: off].", panel=ALGORITHM, job=False)] = False
    off_policy_steps: Annotated[int | None, opt("--off-policy-steps", help="0: on-policy; 1: the next step's generation runs during this step's passes and updates (split pools; NeMo-RL's and verl's one-step off-policy) \\[default: 0].", panel=ALGORITHM, parse=whole_or_zero, job=False)] = None
    # ------------------------------------------------------------------ placement
    gpus: Annotated[int | None, opt("--gpus", help="GPUs in all (trainer and engine) \\[default: 8].", panel=PLACEMENT, parse=whole, job=False)] = None
    gpu: GpuOpt = None
    placement: Annotated[str | None, opt("--placement", help="colocated (trainer and engine on every GPU, in turn: verl's hybrid engine) | split (two pools: OpenRLHF, NeMo-RL non-colocated) \\[default: colocated].", panel=PLACEMENT, parse=_choice("colocated", "split"), job=False)] = None
    rollout_gpus: Annotated[int | str | None, opt("--rollout-gpus", help="Split pools: the engine's GPUs, the trainer has the rest; auto: every split of --gpus priced, the fastest that fits chosen (JSON split_plan) \\[default: half of --gpus].", panel=PLACEMENT, parse=_rollout_gpus, job=False)] = None
    sleep: Annotated[bool | None, opt("--sleep/--no-sleep", help="Colocated: the engine frees its KV cache and offloads its weights while the trainer works (vLLM sleep mode, SGLang memory release) \\[default: on].", panel=PLACEMENT, job=False)] = None
    offload_idle: Annotated[bool | None, opt("--offload-idle/--no-offload-idle", help="Colocated: the trainer's, reference's and critic's states on the host during generation (verl param_offload + optimizer_offload) \\[default: off].", panel=PLACEMENT, job=False)] = None
    node_size: NodeSize = None
    inter_node_gb_s: InterNode = None
    # ------------------------------------------------------------------ the rollout engine
    engine: Engine = None
    rollout_tensor: Annotated[int | None, opt("--rollout-tensor", help="T_e: the engine's tensor-parallel GPUs per replica; replicas = engine GPUs / T_e \\[default: 2, verl's GRPO example].", panel=ROLLOUT, parse=whole, job=False)] = None
    memory_utilization: MemoryUtil = None
    max_num_seqs: MaxSeqs = None
    max_num_batched_tokens: BatchedTokens = None
    weight_dtype: Annotated[str | None, opt("--weight-dtype", help="The engine's weights, and the weight sync's: bf16 | fp8 (quantized at sync) \\[default: bf16].", panel=ROLLOUT, parse=_choice("bf16", "fp16", "fp8"), job=False)] = None
    kv_dtype: Annotated[str | None, opt("--kv-dtype", help="KV-cache dtype \\[default: the activation dtype].", panel=ROLLOUT, job=False)] = None
    # ------------------------------------------------------------------ the trainer
    framework: FrameworkOpt = None
    tensor: Annotated[int | None, opt("--T", "--tensor-parallel", help="T: the trainer's tensor-parallel ranks \\[default: 1].", panel=TRAINER, parse=whole, job=False)] = None
    pipeline: Annotated[int | None, opt("--P", "--pipeline-parallel", help="P: the trainer's pipeline stages \\[default: 1].", panel=TRAINER, parse=whole, job=False)] = None
    context: Annotated[int | None, opt("--cp", "--context-parallel", help="The trainer's context-parallel ranks (verl's Ulysses) \\[default: 1].", panel=TRAINER, parse=whole, job=False)] = None
    expert: Annotated[int | None, opt("--ep", "--expert-parallel", help="The trainer's expert-parallel ranks (MoE) \\[default: 1].", panel=TRAINER, parse=whole, job=False)] = None
    expert_tensor: Etp = None
    sequence_parallel: SequenceParallelOpt = None
    zero: ZeroOpt = None
    recompute: RecomputeOpt = None
    flash: FlashOpt = None
    optimizer: OptimizerOpt = None
    grad_bytes: GradBytes = None
    offload: OffloadOpt = None
    offload_device: OffloadDevice = None
    batch_size: Annotated[int | None, opt("--micro-batch", "--B", "--batch-size", help="The trainer's micro-batch b (sequences) \\[default: the fastest that fits at P + L, as tcalc train chooses].", panel=TRAINER, parse=whole, job=False)] = None
    matmul_efficiency: MatmulEff = None
    generation_efficiency: Annotated[float | None, opt("--generation-efficiency", help="The fraction of `tcalc serve`'s rates the RL framework's generation achieves \\[default: 0.79, fitted on NeMo-RL's H100 runs (docs/validation.md); 1: serve's own].", panel=ROLLOUT, parse=fraction, job=False)] = None
    trainer_efficiency: Annotated[float | None, opt("--trainer-efficiency", help="The fraction of `tcalc train`'s rates the RL framework's log-prob passes and updates achieve \\[default: 0.73, fitted on NeMo-RL's H100 runs (docs/validation.md); 1: train's own].", panel=TRAINER, parse=fraction, job=False)] = None

    def check(self, label: Any) -> None:
        if self.placement != "split" and self.rollout_gpus is not None:
            raise TcalcError(f"{label('rollout_gpus').rstrip('= ')} sizes the engine's pool of split pools: give "
                             "--placement split, or drop it")
        if self.placement == "split":
            for name in ("sleep", "offload_idle"):
                if getattr(self, name) is not None:
                    raise TcalcError(f"{label(name).rstrip('= ')} frees a colocated GPU between phases; split pools "
                                     "keep each model on its own GPUs: drop it, or give --placement colocated")
        if self.off_policy_steps and self.placement != "split":
            raise TcalcError(f"{label('off_policy_steps').rstrip('= ')} overlaps the generation with the trainer's "
                             "work, which needs split pools: give --placement split, or drop it")
        if self.off_policy_steps is not None and self.off_policy_steps > 1:
            raise TcalcError(f"{label('off_policy_steps').rstrip('= ')}{self.off_policy_steps}: 0 (on-policy) or 1 "
                             "(one step off-policy)")
