"""Training memory: Korthikanti et al. 2022 Table 2, the seed's GPT-3 case study, ZeRO, pipeline, fit."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from transformer_calc.model.config import ModelConfig, Parallelism, Training, Workload
from transformer_calc.estimators.training.memory import (
    b_min,
    layer_activations,
    most_loaded,
    optimizer_bytes_per_param,
    stage_layers,
    training_memory,
)
from transformer_calc.estimators.params import count_params, tensor_parallel_params
from transformer_calc.sources.presets import preset_model

from conftest import model_configs

# Korthikanti et al. 2022, Table 2 (bytes per layer at p=2, E=4, MHA, dropout on):
# s=2048, b=2, h=1024, a=16, t=8.
s, b, h, a, t = 2048, 2, 1024, 16, 8
KORTHIKANTI = ModelConfig.model_validate(
    {"L": 4, "D": h, "A": a, "V": 50304, "positional": "rotary", "dropout": 0.1}
)
WORK = Workload(seq_len=s, batch_size=b)


@pytest.mark.parametrize("profile", ["seed", "default"])
@pytest.mark.parametrize(
    ("case", "training", "par", "expected"),
    [
        ("no-parallelism", {}, {}, s * b * h * 34 + 5 * a * s * s * b),
        ("tensor-parallel", {}, {"tensor": t}, 10 * s * b * h + 24 * s * b * h // t + 5 * a * s * s * b // t),
        ("tensor+sequence", {}, {"tensor": t, "sequence_parallel": True}, (34 * s * b * h + 5 * a * s * s * b) // t),
        ("selective+TP+SP", {"recompute": "selective"}, {"tensor": t, "sequence_parallel": True}, 34 * s * b * h // t),
        ("full-recompute", {"recompute": "full"}, {}, 2 * s * b * h),
    ],
)
def test_korthikanti_2022_table2(profile, case, training, par, expected):
    tr = Training(activations=profile, dropout=True, **training)
    got = layer_activations(KORTHIKANTI, WORK, tr, Parallelism(**par)).total
    assert got == expected, case


def test_seed_activation_equations_per_component():
    """Seed eqs. att_actmem_vanilla, mlp_actmem_vanilla, LayerNorm 2pBDS (here p=4, fp32)."""
    p, B, S, D, A, E = 4, 3, 64, 32, 4, 4
    m = ModelConfig.model_validate({"L": 1, "D": D, "A": A, "V": 100})
    got = layer_activations(m, Workload(seq_len=S, batch_size=B), Training(precision="fp32", activations="seed"))
    assert got.attention == B * S * ((5 * p + 1) * D + (2 * p + 1) * A * S)
    assert got.mlp == (2 * E * p + p + 1) * B * D * S
    assert got.norm == 2 * p * B * D * S


def test_seed_tensor_parallel_forms():
    """Seed eq. act_mem_attn_mlp: attention BS((p + 4p/T + 1)D + (2p+1)AS/T), MLP (2Ep/T + p + 1)BDS."""
    p, B, S, D, A, E, T = 2, 2, 128, 64, 8, 4, 4
    m = ModelConfig.model_validate({"L": 1, "D": D, "A": A, "V": 100})
    got = layer_activations(m, Workload(seq_len=S, batch_size=B), Training(activations="seed"), Parallelism(tensor=T))
    assert got.attention == B * S * ((p + 4 * p // T + 1) * D + (2 * p + 1) * A * S // T)
    assert got.mlp == (2 * E * p // T + p + 1) * B * D * S


GPT3_N = 174_604_259_328  # tests/test_presets_params.py


def test_seed_gpt3_case_study_model_states_T1():
    """Seed "Case Study: Mixed-Precision GPT3": 2N + 4N + 12N (printed figures: errata GPT3-1..4)."""
    st1 = training_memory(preset_model("gpt3"), Workload(seq_len=2048), Training(activations="seed"))[0]
    assert (st1.weights, st1.gradients, st1.optimizer) == (2 * GPT3_N, 4 * GPT3_N, 12 * GPT3_N)
    assert st1.model_states == 3_142_876_667_904  # 2927.0 GiB (the seed prints 1463 TiB)


@pytest.mark.parametrize("S", [1, 512, 2048])
def test_seed_gpt3_case_study_activations(S):
    """Errata GPT3-6: M_act = B·S·(40,108,032 + 46,080·S) bytes (seed: 3e-2·BS(1 + S/1e3) 'TiB')."""
    for B in (1, 4):
        st1 = training_memory(preset_model("gpt3"), Workload(seq_len=S, batch_size=B), Training(activations="seed"))[0]
        assert st1.activations == B * S * (40_108_032 + 46_080 * S)


def test_seed_gpt3_ratio_at_full_context():
    """Errata GPT3-7: activations / non-activations at S=2048 is 0.0876·B (the seed prints .2B)."""
    st1 = training_memory(preset_model("gpt3"), Workload(seq_len=2048, batch_size=1), Training(activations="seed"))[0]
    assert st1.activations / st1.model_states == pytest.approx(0.08763, abs=1e-5)


def test_seed_gpt3_case_study_T8():
    """Errata GPT3-8: with T=8, model states 18 bytes x the per-rank parameters (~366 GiB; printed
    187 TiB), activations L·BS·(13D + 5AS/8) = 15,335,424·BS + 5,760·BS² bytes."""
    gpt3 = preset_model("gpt3")
    for S, B in ((2048, 1), (1024, 3)):
        st8 = training_memory(gpt3, Workload(seq_len=S, batch_size=B), Training(activations="seed"), Parallelism(tensor=8))[0]
        assert st8.model_states == 18 * tensor_parallel_params(gpt3, 8) == 393_368_002_560
        assert st8.activations == 15_335_424 * B * S + 5_760 * B * S * S


def test_b_min_seed_equation():
    """Seed eq. min_mp_batch_size: B_min = 6D²/(8DS + AS²); GPT-3 at S=2048 gives 1.5."""
    assert b_min(preset_model("gpt3"), 2048) == pytest.approx(1.5)


@pytest.mark.parametrize(
    ("optimizer", "precision", "expected"),
    [
        ("adamw", "mixed", 12),  # seed eq. optimizer_states_mem_mp
        ("adamw", "fp32", 8),  # seed eq. optimizer_states_mem_no_mp
        ("adam", "bf16", 4),
        ("sgd", "mixed", 4),
        ("sgd", "fp32", 0),
        ("sgd-momentum", "fp32", 4),
        ("lion", "mixed", 8),
        ("adam-8bit", "mixed", 6),
    ],
)
def test_optimizer_bytes_per_param(optimizer, precision, expected):
    assert optimizer_bytes_per_param(Training(optimizer=optimizer, precision=precision)) == expected


@pytest.mark.parametrize(
    ("zero", "per_param"),
    [(0, lambda N, d: 16 * N), (1, lambda N, d: 4 * N + 12 * N // d), (2, lambda N, d: 2 * N + 14 * N // d), (3, lambda N, d: 16 * N // d)],
)
def test_zero_stages_divide_16_bytes_per_param(zero, per_param):
    """Rajbhandari et al. 2020 (ZeRO) Fig. 1: mixed-precision Adam = 2 + 2 + 12 = 16 bytes/param,
    partitioned over N_d data-parallel ranks: P_os, P_os+g, P_os+g+p."""
    m = ModelConfig.model_validate({"L": 2, "D": 64, "A": 4, "V": 64, "K": 64})
    N, dp = count_params(m).total, 8
    assert N % dp == 0
    st0 = training_memory(m, Workload(seq_len=8), Training(grad_bytes=2), Parallelism(data=dp, zero=zero))[0]
    assert st0.model_states == per_param(N, dp)


def test_pipeline_stages_layout():
    m = ModelConfig.model_validate({"L": 10, "D": 64, "A": 4, "V": 1000, "K": 64, "dropout": 0.0})
    w, tr = Workload(seq_len=16, batch_size=2), Training()
    stages = training_memory(m, w, tr, Parallelism(pipeline=4))
    assert [s.n_layers for s in stages] == stage_layers(10, 4) == [3, 3, 2, 2]
    assert [s.in_flight for s in stages] == [4, 3, 2, 1]  # 1F1B warm-up depth
    p = count_params(m)
    assert stages[0].params == p.embedding + p.position + 3 * p.layer.total
    assert stages[-1].params == 2 * p.layer.total + p.final_norm + p.embedding  # tied head copy
    per_layer = layer_activations(m, w, tr).total
    assert stages[1].activations == 3 * 3 * per_layer
    assert most_loaded(stages).stage == 0


def test_pipeline_rejects_more_stages_than_layers():
    m = ModelConfig.model_validate({"L": 2, "D": 64, "A": 4, "V": 100})
    with pytest.raises(ValueError, match=r"pipeline stages P \(3\) exceed n_layers \(2\)"):
        training_memory(m, Workload(seq_len=8), Training(), Parallelism(pipeline=3))


def test_flash_keeps_softmax_statistics_only():
    m = preset_model("gpt2")
    w = Workload(seq_len=1024, batch_size=1)
    eager = layer_activations(m, w, Training(dropout=True))
    flash = layer_activations(m, w, Training(dropout=True, flash=True))
    A, S, p = 12, 1024, 2
    assert eager.attention - flash.attention == (2 * p + 1) * A * S * S - 4 * A * S


def test_head_terms_and_switch():
    m, w = preset_model("llama-3-8b"), Workload(seq_len=8192, batch_size=1)
    with_head = training_memory(m, w, Training())[0]
    without = training_memory(m, w, Training(head_activations=False))[0]
    # final norm input + head input (p·S·D each) + fp32 softmax over V (no dropout in Llama 3)
    assert with_head.other - without.other == 2 * 2 * 8192 * 4096 + 4 * 8192 * 128256


@settings(max_examples=50, deadline=None)
@given(model_configs(), st.integers(1, 64), st.integers(1, 4))
def test_activations_linear_in_batch(m, S, k):
    tr = Training()
    one = layer_activations(m, Workload(seq_len=S, batch_size=1), tr)
    many = layer_activations(m, Workload(seq_len=S, batch_size=k), tr)
    assert many.total == k * one.total


@settings(max_examples=50, deadline=None)
@given(model_configs(), st.sampled_from([2, 4]))
def test_sequence_parallel_divides_everything_by_T(m, T):
    assume(m.n_heads % T == 0 and m.d_ff % T == 0 and m.n_kv_heads % T == 0)
    w = Workload(seq_len=16 * T, batch_size=2)
    full = layer_activations(m, w, Training())
    sp = layer_activations(m, w, Training(), Parallelism(tensor=T, sequence_parallel=True))
    # Korthikanti sec. 4.2.2: with SP every term is sharded T ways. The MoE router logits and the
    # routed token copies are computed from the gathered input and stay whole on every rank.
    replicated = 0
    if m.is_moe:
        replicated = 2 * 2 * 16 * T * (m.experts_per_token * m.d_model + m.n_experts)
    assert T * sp.total == full.total + (T - 1) * replicated


@settings(max_examples=50, deadline=None)
@given(model_configs(), st.integers(1, 4))
def test_T1_equals_unsharded_and_dp_without_zero_changes_nothing(m, dp):
    w, tr = Workload(seq_len=32, batch_size=2), Training()
    base = training_memory(m, w, tr)[0]
    assert training_memory(m, w, tr, Parallelism(tensor=1, data=dp))[0] == base
    assert base.params == count_params(m).total


@settings(max_examples=40, deadline=None)
@given(model_configs(max_layers=12), st.integers(2, 12))
def test_first_and_last_stage_hold_the_most(m, P):
    assume(P <= m.n_layers)
    w, tr, par = Workload(seq_len=32, batch_size=2), Training(), Parallelism(pipeline=P)
    every = training_memory(m, w, tr, par)
    ends = training_memory(m, w, tr, par, all_stages=False)
    assert most_loaded(every) == most_loaded(ends)
    assert [s.stage for s in ends] == [0, P - 1]


# ---------------------------------------------------------------------------- pipelines as run (issue 24)
from transformer_calc.estimators.training.memory import (  # noqa: E402
    Chunk,
    chunk_forwards_in_flight,
    pipeline_stage,
    pipeline_units,
)


def test_llama3_405b_layout_embedding_and_loss_as_layers():
    """Llama 3 paper (arXiv:2407.21783) §3.3.2: 126 blocks on PP 16, one block fewer on the first
    and last stages, "the first model chunk on the first stage has only the embedding, and the
    last model chunk on the last stage has only output projection and loss": (126 + 2) / 16 = 8
    units per stage, one per chunk with v = 8 (Megatron account_for_embedding/loss_in_pipeline_split)."""
    par = Parallelism(pipeline=16, virtual_stages=8, embedding_in_split=True, loss_in_split=True)
    assert pipeline_units(126, par) == [8] * 16
    first, last = pipeline_stage(126, par, 0), pipeline_stage(126, par, 15)
    assert first.chunks[0] == Chunk(0, 0, embedding=True) and last.chunks[-1] == Chunk(126, 126, head=True)
    assert first.n_layers == last.n_layers == 7 and pipeline_stage(126, par, 7).n_layers == 8
    assert pipeline_stage(126, par, 1).chunks[:2] == (Chunk(0, 1), Chunk(16, 17))  # chunk c: the c-th slice
    covered = sorted(i for s in range(16) for c in pipeline_stage(126, par, s).chunks for i in range(c.start, c.stop))
    assert covered == list(range(126))  # every block once


def test_qwen3_235b_and_deepseek_v3_layouts():
    """Megatron-Bridge recipes: Qwen3-235B-A22B (94 blocks) at PP 16 with the embedding and loss
    accounted (qwen3_235b_a22b_pretrain_config: 96 / 16 = 6); DeepSeek-V3 (61 blocks) at PP 16,
    layout [embedding + 4 decoders] + 14 x [4 decoders] + [1 decoder + MTP + loss]
    (deepseek_v3_pretrain_config), i.e. --decoder-first-pipeline-num-layers 4, last 1."""
    qwen = Parallelism(pipeline=16, embedding_in_split=True, loss_in_split=True)
    assert pipeline_units(94, qwen) == [6] * 16
    assert [pipeline_stage(94, qwen, s).n_layers for s in (0, 1, 15)] == [5, 6, 5]
    ds = Parallelism(pipeline=16, first_stage_layers=4, last_stage_layers=1)
    assert pipeline_units(61, ds) == [4] + [4] * 14 + [1]
    assert pipeline_stage(61, ds, 15).chunks == (Chunk(60, 61, head=True),)
    m = preset_model("deepseek-v3")
    stages = training_memory(m, Workload(seq_len=4096), Training(flash=True, recompute="selective"),
                             Parallelism(tensor=2, pipeline=16, data=64, expert=64, sequence_parallel=True,
                                         zero=1, first_stage_layers=4, last_stage_layers=1), all_stages=False)
    # mixed dense and MoE blocks: the first four stages and the last are evaluated
    assert [(s.stage, s.n_layers) for s in stages] == [(0, 4), (1, 4), (2, 4), (3, 4), (15, 1)]


def test_uneven_split_errors_name_the_fix():
    with pytest.raises(ValueError, match="divisible by P x virtual stages"):
        pipeline_units(126, Parallelism(pipeline=16, virtual_stages=2))
    with pytest.raises(ValueError, match="split evenly over the 14 middle stages"):
        pipeline_units(61, Parallelism(pipeline=16, first_stage_layers=3, last_stage_layers=1))
    with pytest.raises(ValueError, match="multiple of 2"):
        pipeline_units(61, Parallelism(pipeline=16, virtual_stages=2, first_stage_layers=4, last_stage_layers=1))
    with pytest.raises(ValueError, match="cannot be combined"):
        pipeline_units(61, Parallelism(pipeline=16, first_stage_layers=4, loss_in_split=True))
    with pytest.raises(ValueError, match="must be divisible by P"):
        pipeline_units(61, Parallelism(pipeline=16, embedding_in_split=True, loss_in_split=True))


def test_forwards_in_flight_follow_megatrons_schedules():
    """schedules.py: 1F1B warms up P - s - 1 forwards (at most m); the interleaved schedule
    2(P - s - 1) + (v - 1)P, forwards taken P micro-batches per chunk; +1 before the first backward."""
    assert [chunk_forwards_in_flight(4, 1, 8, s) for s in range(4)] == [[4], [3], [2], [1]]
    assert chunk_forwards_in_flight(4, 1, 2, 0) == [2]  # fewer micro-batches than stages
    # P=4, v=2, m=8, stage 0: 2·3 + 4 + 1 = 11 forwards: micro-batches 0-3 of chunk 0, 0-3 of chunk 1, 4-6 of chunk 0
    assert chunk_forwards_in_flight(4, 2, 8, 0) == [7, 4]
    assert chunk_forwards_in_flight(4, 2, 8, 3) == [4, 1]
    assert chunk_forwards_in_flight(16, 8, 16, 1) == [16] * 8  # Llama 3 at 16k GPUs: all forwards first (m·v = 128)


def test_interleaving_stores_more_on_the_first_stage():
    """Korthikanti et al. 2022 §4.2.3: the interleaved schedule keeps L·(1 + (P - 1)/(P·v)) layers'
    activations on the first stage (m >= P): 8 blocks over P = 4 with v = 2 keep 2·3 + 4 + 1 = 11
    chunk forwards of one block each, 8·(1 + 3/8) = 11 blocks, against 4 micro-batches x 2 blocks."""
    m = ModelConfig.model_validate({"L": 8, "D": 64, "A": 4, "V": 100, "K": 64, "dropout": 0.0})
    w, tr = Workload(seq_len=16), Training(micro_batches=8)
    per_layer = layer_activations(m, w, tr).total
    plain = training_memory(m, w, tr, Parallelism(pipeline=4))[0]
    inter = training_memory(m, w, tr, Parallelism(pipeline=4, virtual_stages=2))[0]
    assert plain.attention + plain.mlp + plain.norm == 4 * 2 * per_layer
    assert inter.attention + inter.mlp + inter.norm == 11 * per_layer
