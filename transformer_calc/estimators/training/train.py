"""Training step time (`tcalc train`) and the planner (`tcalc plan`), the public import path of both:
one optimizer step of a parallel layout, compute, communication and the pipeline bubble (step.py,
whose docstring states the model and its sources), and the layouts of a GPU count that fit, fastest
first (plan.py)."""

from __future__ import annotations

from transformer_calc.estimators.training.plan import (  # noqa: F401  (re-exported)
    MICRO_BATCHES,
    MicroBatchTrial,
    PLAN_SCHEDULES,
    PLAN_VIRTUAL_STAGES,
    PLAN_ZERO,
    Plan,
    auto_virtual_stages,
    fastest_micro_batch,
    pipeline_splits,
    plan_layouts,
    virtual_stage_choices,
)
from transformer_calc.estimators.training.step import (  # noqa: F401  (re-exported)
    ALL_REDUCES_PER_LAYER,
    CP_ALL_GATHER_COLLECTIVES,
    DEFAULT_MATMUL_EFFICIENCY,
    DEFAULT_NETWORK,
    MATMUL_EFFICIENCY,
    MEGATRON_GEMM_FRACTION,
    MEMORY_EFFICIENCY,
    NETWORK,
    Network,
    StageTime,
    StepEstimate,
    TRAINING_GEMM_FRACTION,
    default_network,
    estimate_step,
    lookup_efficiency,
    micro_batch_count,
    ring_all_reduce_s,
    ring_gather_s,
)
