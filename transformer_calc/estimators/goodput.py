"""Failures, checkpoints and goodput of a training run: expected interruptions, the checkpoint's
size and save/restore time, the optimal checkpoint interval and the share of wall-clock time
that trains (issue 40; docs/formulas.md "Failures and goodput").

Conventions:

- An interruption is anything that stops the synchronous job and restarts it from the last
  checkpoint (planned maintenance included: it costs the same restart). Interruptions arrive at a
  constant rate per GPU (a Poisson process, exponential times between them), so a job of N GPUs
  has a mean time to interruption M = 1 / (λ·N) (Kokolis et al. 2024 fit MTTF ∝ 1/N the same way).
- λ is FITTED on one source, Llama 3 (Dubey et al. 2024, arXiv:2407.21783 §3.3.4, Table 5):
  466 job interruptions (47 planned, 419 unexpected) in a 54-day snapshot of pre-training on
  16,384 H100. It is CHECKED against another published study, Kokolis et al. 2024 ("Revisiting
  Reliability in Large-Scale Machine Learning Research Clusters", arXiv:2410.21680, HPCA 2025):
  6.50 (RSC-1) and 2.34 (RSC-2) failures per 1000 node-days of 8 A100: Llama 3's unexpected rate,
  3.79 per 1000 node-days, lies between the two (tests/test_goodput.py).
- A checkpoint is the training state tcalc prices in memory: the weights, the fp32 master copy
  (mixed precision) and the optimizer's states (estimators/training/optimizers.py), all ranks
  together, once (data-parallel replicas write one copy). Gradients are not saved.
- Saving: synchronous, training stops for the whole write, δ = bytes / storage bandwidth;
  asynchronous (torch.distributed.checkpoint async_save, Megatron-core's async save), training
  stops only for the copy of each GPU's share to host memory over its host link, δ = share /
  host bandwidth, and the write proceeds in the background (assumed to finish within the
  interval). Restoring reads the checkpoint back at the storage bandwidth.
- The interval between checkpoints is Daly's higher-order optimum (Daly 2006, "A higher order
  estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3) eq. 37), which
  extends Young's first-order τ = √(2·δ·M) (Young 1974, CACM 17(9)).
- Goodput (the effective-training-time share, Llama 3's "effective training time", Kokolis et
  al.'s ETTR) to first order in δ/τ and τ/M: every interval of τ seconds of training pays δ to
  save; every interruption loses, on average, half an interval of work (τ + δ)/2 and the restart
  R = restart overhead + restore. goodput = 1 − δ/τ − (R + (τ + δ)/2)/M.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SECONDS_PER_DAY = 86_400
GPUS_PER_NODE = 8  # the node of the studies below: 8 GPUs (Grand Teton H100; RSC A100 nodes)

# Llama 3 (arXiv:2407.21783 §3.3.4, Table 5): a 54-day snapshot of 405B pre-training on 16,384 H100.
LLAMA3_GPUS = 16_384
LLAMA3_DAYS = 54
LLAMA3_INTERRUPTIONS = 466  # 47 planned + 419 unexpected
LLAMA3_UNEXPECTED = 419
LLAMA3_EFFECTIVE_TIME = 0.90  # "higher than 90% effective training time"
# FITTED on Llama 3 alone (the only source): job interruptions per GPU-day, planned ones included.
INTERRUPTIONS_PER_GPU_DAY = LLAMA3_INTERRUPTIONS / (LLAMA3_GPUS * LLAMA3_DAYS)  # 5.27e-4
# The check (not fitted): Kokolis et al. 2024 (arXiv:2410.21680) §IV, failures per 1000 node-days.
KOKOLIS_RSC1_PER_1000_NODE_DAYS = 6.50
KOKOLIS_RSC2_PER_1000_NODE_DAYS = 2.34

# ASSUMED (no published figure fits every stack): seconds from an interruption to training again,
# the checkpoint's read aside: detection, rescheduling onto healthy nodes, process start-up and NCCL
# initialisation. Kokolis et al. §V and Llama 3 §3.3.4 describe the steps, not one time; `--restart-s`.
RESTART_S = 600.0
# Storage bandwidth per GPU, bytes/s, each direction: Llama 3 §3.3.1, Tectonic "sustains 2 TB/s
# throughput with a peak of 7 TB/s" for 16,384 GPUs: the sustained figure's share, 0.122 GB/s per GPU.
STORAGE_BYTES_S_PER_GPU = 2e12 / LLAMA3_GPUS


def mean_time_to_interruption_s(gpus: int, interruptions_per_gpu_day: float) -> float:
    """M = 1 / (λ·N): the job stops when any of its N GPUs' interruptions arrives (module docstring)."""
    return SECONDS_PER_DAY / (interruptions_per_gpu_day * gpus)


def checkpoint_bytes(trainable_params: int, weight_params: int, weight_bytes: int, master_bytes: int,
                     optimizer_state_bytes: int) -> int:
    """One checkpoint: the weights (weight_params · their bytes), the fp32 master copy of the trainable
    parameters and the optimizer's states (all ranks, one copy; optimizers.model_groups)."""
    return weight_params * weight_bytes + trainable_params * master_bytes + optimizer_state_bytes


def young_interval_s(save_s: float, mtti_s: float) -> float:
    """Young (1974): τ = √(2·δ·M), the compute time between checkpoints that minimises the expected loss."""
    return math.sqrt(2 * save_s * mtti_s)


def daly_interval_s(save_s: float, mtti_s: float) -> float:
    """Daly (2006, eq. 37): τ = √(2δM)·[1 + ⅓·√(δ/2M) + ⅑·(δ/2M)] − δ for δ < 2M, else τ = M."""
    d, M = save_s, mtti_s
    if d >= 2 * M:
        return M
    x = d / (2 * M)
    return math.sqrt(2 * d * M) * (1 + math.sqrt(x) / 3 + x / 9) - d


@dataclass(frozen=True)
class Goodput:
    """A run's failures and checkpoints: what turns its failure-free time into wall-clock time."""

    mtti_s: float  # M, mean time to interruption of the whole job
    save_s: float  # δ, training stopped per checkpoint
    restore_s: float  # reading the checkpoint back
    restart_s: float  # R: restart overhead + restore
    interval_s: float  # τ, training between checkpoints
    goodput: float  # the share of wall-clock time that trains
    wall_s: float  # failure-free time / goodput
    interruptions: float  # expected over the wall-clock time: wall / M


def goodput(train_s: float, mtti_s: float, save_s: float, restore_s: float, restart_overhead_s: float,
            interval_s: float | None = None) -> Goodput:
    """Goodput = 1 − δ/τ − (R + (τ + δ)/2)/M (module docstring), τ Daly's optimum unless given;
    wall-clock = train_s / goodput; interruptions = wall / M. Raises ValueError when the losses
    take the whole time (goodput <= 0: the job cannot make progress between interruptions)."""
    tau = daly_interval_s(save_s, mtti_s) if interval_s is None else interval_s
    R = restart_overhead_s + restore_s
    share = 1 - save_s / tau - (R + (tau + save_s) / 2) / mtti_s
    if not share > 0:
        raise ValueError(f"the job cannot progress: the mean time to interruption ({mtti_s:.0f} s) is not longer than "
                         f"a restart ({R:.0f} s) and the work lost with it; fewer GPUs, faster storage or a lower rate")
    wall = train_s / share
    return Goodput(mtti_s=mtti_s, save_s=save_s, restore_s=restore_s, restart_s=R, interval_s=tau, goodput=share,
                   wall_s=wall, interruptions=wall / mtti_s)
