"""Pipeline stages of a training run: which layers each stage holds (`stage_layers`,
`pipeline_units`), the micro-batches in flight on a stage under its schedule
(`chunk_forwards_in_flight`; Narayanan et al. 2021, 1F1B and interleaved), and the checks of a layout.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformer_calc.model.config import Parallelism, PipelineSchedule


# Schedules that run chunks of unequal size, so need no P·v | L: DeepSeek-V3 trained its 61 layers
# on PP16 with DualPipe (arXiv:2412.19437 §3.2 and §3.2.1: two chunks per rank, 16 pipeline ranks);
# DualPipe itself (github.com/deepseek-ai/DualPipe) takes any modules per chunk. tcalc splits the
# layers as evenly as possible: stages differ by one block, a stage's two chunks by one block.
UNEVEN_CHUNK_SCHEDULES = (PipelineSchedule.dualpipe,)
MAX_LISTED_STAGES = 64  # beyond this only the first and last stage are computed (the others
# hold no more layers, fewer micro-batches and no embedding or head: never the most loaded)


def stage_layers(L: int, P: int) -> list[int]:
    """Layers per stage, as even as possible (the first L mod P stages take one more)."""
    if P > L:
        raise ValueError(f"pipeline stages P ({P}) exceed n_layers ({L}); use P <= {L}")
    return [_layers_on_stage(L, P, s) for s in range(P)]


def _layers_on_stage(L: int, P: int, s: int) -> int:
    return L // P + (1 if s < L % P else 0)


# ---------------------------------------------------------------------------- pipelines as run
@dataclass(frozen=True)
class Chunk:
    """One model chunk (virtual stage) of one pipeline rank: blocks [start, stop), and whether it
    runs the embedding or the head and loss."""

    start: int
    stop: int
    embedding: bool = False
    head: bool = False

    @property
    def n_layers(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class PipelineStage:
    """Pipeline rank `stage`: its model chunks in chunk order (one without interleaving)."""

    stage: int
    chunks: tuple[Chunk, ...]

    @property
    def n_layers(self) -> int:
        return sum(c.n_layers for c in self.chunks)


def uneven_split(par: Parallelism) -> bool:
    return (par.first_stage_layers is not None or par.last_stage_layers is not None
            or par.embedding_in_split or par.loss_in_split)  # fmt: skip


def pipeline_units(L: int, par: Parallelism) -> list[int]:
    """Units of the split per pipeline rank (blocks; with embedding_in_split / loss_in_split the
    embedding and the head+loss count as one unit each), checked as Megatron-core checks them.

    Source: megatron/core/transformer/transformer_config.py (TransformerConfig.__post_init__,
    "Uneven PP" and account_for_embedding/loss_in_pipeline_split) and transformer_layer.py
    (get_transformer_layer_offset):
    - first/last given (--decoder-first/last-pipeline-num-layers): those stages hold them, the
      middle stages split the rest evenly (it must divide); with v virtual stages v divides the
      first, the last and each middle stage's count. Not together with the accounting flags.
    - embedding/loss in the split: L + 1 (+ 1) units, divisible by P (by P·v when interleaved).
    - otherwise: tcalc's even split (the first L mod P stages take one more; Megatron itself needs
      P | L), P·v | L when interleaved.
    """
    P, v = par.pipeline, par.virtual_stages
    first, last = par.first_stage_layers, par.last_stage_layers
    if (first is not None or last is not None) and (par.embedding_in_split or par.loss_in_split):
        raise ValueError("first_stage_layers / last_stage_layers cannot be combined with embedding_in_split / "
                         "loss_in_split (Megatron-core refuses both); give one way of evening the stages")
    if first is not None or last is not None:
        middle_stages = P - (first is not None) - (last is not None)
        middle = L - (first or 0) - (last or 0)
        if middle_stages < 0 or middle < 0 or bool(middle) != bool(middle_stages):
            raise ValueError(f"first_stage_layers ({first}) and last_stage_layers ({last}) leave {middle} blocks for "
                             f"{max(middle_stages, 0)} middle stages of P = {P}; choose counts that leave blocks for "
                             "every middle stage and none without one")
        if middle_stages and middle % middle_stages:
            raise ValueError(f"the {middle} middle blocks must split evenly over the {middle_stages} middle stages "
                             f"(n_layers {L} - first {first or 0} - last {last or 0}); change first/last_stage_layers")
        each = middle // middle_stages if middle_stages else 0
        units = [each] * P
        if first is not None:
            units[0] = first
        if last is not None:
            units[-1] = last
        if v > 1 and any(u % v for u in units):
            raise ValueError(f"with {v} virtual stages every stage's block count must be a multiple of {v} "
                             f"(stages hold {sorted(set(units))}); change first/last_stage_layers or --virtual-stages")
        return units
    if par.embedding_in_split or par.loss_in_split:
        N = L + par.embedding_in_split + par.loss_in_split
        if N % (P * v):
            raise ValueError(f"n_layers ({L}) + embedding and loss units ({N - L}) = {N} must be divisible by P x "
                             f"virtual stages ({P} x {v}) when they count in the pipeline split")
        return [N // P] * P
    if P > L:
        raise ValueError(f"pipeline stages P ({P}) exceed n_layers ({L}); use P <= {L}")
    if v > 1 and L % (P * v) and par.schedule in UNEVEN_CHUNK_SCHEDULES and P * v <= L:
        return [_layers_on_stage(L, P, s) for s in range(P)]  # chunks of a stage differ by one block at most
    if v > 1 and L % (P * v):
        raise ValueError(f"n_layers ({L}) must be divisible by P x virtual stages ({P} x {v}); or give "
                         "first/last_stage_layers, or embedding_in_split / loss_in_split, as Megatron-core does")
    return [_layers_on_stage(L, P, s) for s in range(P)]


def pipeline_stage(L: int, par: Parallelism, s: int, units: list[int] | None = None) -> PipelineStage:
    """Rank s's chunks. Chunk c of rank s covers units [c·N/v + offset_s, + units_s/v), offset_s
    the units of the ranks before it in one round (Megatron get_transformer_layer_offset: model
    chunk c of every rank holds the c-th of v consecutive slices of the model)."""
    units = units if units is not None else pipeline_units(L, par)
    v = par.virtual_stages if par.pipeline > 1 else 1
    emb, loss = int(par.embedding_in_split), int(par.loss_in_split)
    if v == 1:  # one chunk: units [units before s, + units_s), as below with every width [u] (the common case, O(s))
        a = sum(units[:s])
        start, stop = min(max(a - emb, 0), L), min(max(a + units[s] - emb, 0), L)
        return PipelineStage(s, (Chunk(start, stop, embedding=s == 0, head=s == par.pipeline - 1),))
    widths = [chunk_widths(u, v) for u in units]  # equal unless the schedule allows uneven chunks
    chunks = []
    for c in range(v):
        a = sum(w[k] for w in widths for k in range(c)) + sum(w[c] for w in widths[:s])
        b = a + widths[s][c]
        # units -> blocks: the embedding is unit 0, the head and loss unit N - 1
        start, stop = min(max(a - emb, 0), L), min(max(b - emb, 0), L)
        chunks.append(Chunk(start, stop, embedding=s == 0 and c == 0,
                            head=s == par.pipeline - 1 and c == v - 1))
    del loss
    return PipelineStage(s, tuple(chunks))


def chunk_widths(units: int, v: int) -> list[int]:
    """A stage's units over its v chunks: equal when v divides them, else the first take one more."""
    return [units // v + (1 if c < units % v else 0) for c in range(v)]


def chunk_forwards_in_flight(P: int, v: int, m: int, s: int, group: int | None = None) -> list[int]:
    """Forwards whose activations rank s holds when its first backward starts, per model chunk.

    Non-interleaved 1F1B (Narayanan et al. 2021 §2.2.1; Megatron-core schedules.py
    forward_backward_pipelining_without_interleaving): P − s − 1 warm-up forwards and one more,
    at most m. Interleaved (§2.2.2; forward_backward_pipelining_with_interleaving):
    2·(P − s − 1) + (v − 1)·N warm-up forwards and one more, at most m·v, taken in groups of N
    micro-batches per chunk (get_model_chunk_id: forward k runs chunk (k mod N·v) // N). N, the
    contiguous micro-batches per chunk (`group`), is P in Narayanan et al.'s schedule (the
    default); the Llama 3 paper's schedule makes it tunable (arXiv:2407.21783 §3.3.2, Figure 6:
    "N = 5"), as Megatron-core's `microbatch_group_size_per_vp_stage` does (P ≤ N ≤ m).
    When N does not divide m the last group holds the m mod N left (get_model_chunk_id's
    microbatch_group_size_per_vp_stage tables run them through every chunk in turn).
    """
    if v <= 1 or P <= 1:
        return [min(P - s, m)]
    N = P if group is None else group
    total = min(2 * (P - s - 1) + (v - 1) * N + 1, m * v)
    full, last = divmod(m, N)  # groups of N micro-batches, and the last group's size
    if total <= full * N * v:
        rounds, rest = divmod(total, N * v)
        return [rounds * N + min(max(rest - c * N, 0), N) for c in range(v)]
    rest = total - full * N * v  # into the last, smaller group (last > 0 here: total <= m·v)
    return [full * N + min(max(rest - c * last, 0), last) for c in range(v)]


def check_microbatch_group(par: Parallelism, m: int) -> None:
    """Megatron-core's range for N (schedules.py forward_backward_pipelining_with_interleaving:
    "The number of contiguous micro-batches in a virtual pipeline stage should range in [PP, M]"),
    the range the Llama 3 paper describes between DFS (N = P) and BFS (N = M)."""
    N = par.microbatch_group
    if N is None:
        return
    if par.schedule is not PipelineSchedule.interleaved:
        raise ValueError(f"microbatch_group ({N}) groups the micro-batches of an interleaved schedule; "
                         "give --virtual-stages 2 or more, or drop --microbatch-group")
    if not par.pipeline <= N <= m:
        raise ValueError(f"microbatch_group ({N}) must lie between P ({par.pipeline}) and the micro-batches per "
                         f"step ({m}); give an N in that range or drop --microbatch-group")
