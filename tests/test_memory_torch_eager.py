"""The torch-eager activation profile: hand-checked terms, measured bytes, seed/default unchanged.

No torch here: the measured bytes below come from tools/crosscheck/activations.py (CI runs it;
docs/validation.md holds every case).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer_calc.model.config import ModelConfig, Parallelism, Training, Workload
from transformer_calc.sources.hf import from_hf_config
from transformer_calc.estimators.training.memory import (
    HF_GPT2,
    HF_GPT2_EXACT_GELU,
    HF_LLAMA,
    eager_code,
    head_activations,
    layer_activations,
    training_memory,
)
from transformer_calc.sources.presets import preset_model

from conftest import model_configs

EAGER = "torch-eager"


def gpt2(L: int, D: int, A: int, V: int, drop: float = 0.0, act: str = "gelu_new") -> ModelConfig:
    cfg = {"model_type": "gpt2", "n_layer": L, "n_embd": D, "n_head": A, "vocab_size": V,
           "n_positions": 1024, "activation_function": act,
           "attn_pdrop": drop, "resid_pdrop": drop, "embd_pdrop": drop}  # fmt: skip
    return ModelConfig.model_validate(from_hf_config(cfg))


def llama(L: int, D: int, A: int, kv: int, F: int, V: int, drop: float = 0.0) -> ModelConfig:
    cfg = {"model_type": "llama", "num_hidden_layers": L, "hidden_size": D, "num_attention_heads": A,
           "num_key_value_heads": kv, "intermediate_size": F, "vocab_size": V,
           "max_position_embeddings": 1024, "attention_dropout": drop, "tie_word_embeddings": False}  # fmt: skip
    return ModelConfig.model_validate(from_hf_config(cfg))


# ------------------------------------------------------------------ hand-checked terms
def test_gpt2_layer_by_hand():
    """HF GPT-2, fp32, dropout off, B=1, S=4, D=8, A=2, F=32: every saved tensor named."""
    p, B, S, D, A, F = 4, 1, 4, 8, 2, 32
    m = gpt2(1, D, A, 10)
    got = layer_activations(m, Workload(seq_len=S, batch_size=B), Training(precision="fp32", activations=EAGER))
    tokens = B * S
    assert got.norm == 2 * (p * tokens * D + 4 * tokens + 4 * tokens)  # ln_1, ln_2: input, mean, rstd
    assert got.attention == (
        p * tokens * D  # c_attn input
        + 3 * p * tokens * D  # q, k^T, v as the two matmuls take them
        + p * B * A * S * S  # softmax output (also P·V's input: no dropout, no cast)
        + p * tokens * D  # c_proj input
    )
    # c_fc input; gelu_new: x, tanh(u), 0.5·x, 1 + tanh(u); c_proj input
    assert got.mlp == p * tokens * D + (1 + 3 + 1) * p * tokens * F


def test_gpt2_head_by_hand():
    p, B, S, D, V = 2, 2, 4, 8, 10
    m = gpt2(1, D, 2, V, drop=0.1)
    first, last = head_activations(m, Workload(seq_len=S, batch_size=B), Training(precision="bf16", activations=EAGER))
    assert first == 8 * B * S + 8 * S + 1 * B * S * D  # token ids, position ids (int64), dropout mask
    # ln_f (input, mean, rstd), lm_head input, fp32 log_softmax, int64 targets, total_weight
    assert last == (p * B * S * D + 8 * B * S) + p * B * S * D + 4 * B * S * V + 8 * B * S + 4


def test_llama_layer_by_hand():
    """HF Llama, bf16, attention dropout on: RMSNorm upcasts, fp32 softmax, repeat_kv to A heads."""
    p, B, S, D, A, kv, F = 2, 2, 4, 8, 2, 1, 24
    m = llama(1, D, A, kv, F, 10, drop=0.1)
    got = layer_activations(m, Workload(seq_len=S, batch_size=B), Training(precision="bf16", activations=EAGER))
    tokens, hd = B * S, D // A
    # fp32 copy of the input, fp32 rsqrt per token, the normalized x in bf16 (weight * x keeps it)
    assert got.norm == 2 * (4 * tokens * D + 4 * tokens + p * tokens * D)
    assert got.attention == (
        p * tokens * D  # q/k/v projection input
        + 3 * p * tokens * A * hd  # q copy, k and v expanded to A heads
        + 4 * B * A * S * S  # softmax output in fp32
        + p * B * A * S * S  # dropped-out weights in bf16 (P·V's input)
        + 1 * B * A * S * S  # dropout mask (torch.bool)
        + p * tokens * A * hd  # o_proj input; no residual dropout in Llama
    )
    assert got.mlp == p * tokens * D + 4 * p * tokens * F  # gate/up input; silu in, silu out, up, product


def test_llama_head_by_hand():
    p, B, S, D, A, V = 4, 1, 4, 8, 2, 10
    m = llama(1, D, A, A, 16, V)
    first, last = head_activations(m, Workload(seq_len=S, batch_size=B), Training(precision="fp32", activations=EAGER))
    assert first == 8 * B * S + 2 * p * S * (D // A)  # token ids; RoPE cos and sin, shared by all layers
    assert last == (4 * B * S * D + 4 * B * S + p * B * S * D) + p * B * S * D + 4 * B * S * V + 8 * B * S + 4


def test_gqa_saves_nothing_in_eager_attention():
    """repeat_kv expands k and v to A heads before the matmuls: n_kv does not change the bytes."""
    w, tr = Workload(seq_len=64, batch_size=2), Training(activations=EAGER)
    sizes = {llama(2, 256, 8, kv, 512, 100).n_kv_heads: layer_activations(llama(2, 256, 8, kv, 512, 100), w, tr)
             for kv in (1, 2, 8)}  # fmt: skip
    assert len(set(sizes.values())) == 1


def test_exact_gelu_saves_three_fewer_tensors():
    m, w = gpt2(1, 64, 4, 100), Workload(seq_len=16, batch_size=2)
    tr = Training(precision="bf16", activations=EAGER)
    new = layer_activations(m, w, tr, eager=HF_GPT2).mlp
    exact = layer_activations(m, w, tr, eager=HF_GPT2_EXACT_GELU).mlp
    assert new - exact == 3 * 2 * 2 * 16 * m.d_ff


def test_dropout_masks_only_where_the_code_has_dropout():
    w, tr = Workload(seq_len=8, batch_size=1), Training(precision="bf16", activations=EAGER)
    m = llama(1, 32, 4, 2, 64, 50, drop=0.1)
    on, off = (layer_activations(m, w, Training(precision="bf16", activations=EAGER, dropout=d)) for d in (True, False))
    assert on.mlp == off.mlp  # Llama: no residual dropout
    assert on.attention - off.attention == 1 * 4 * 8 * 8  # mask only: the bf16 cast is kept either way
    no_dropout = Training(precision="bf16", activations=EAGER, dropout=False)
    assert head_activations(m, w, tr)[0] == head_activations(m, w, no_dropout)[0]  # no embedding dropout


def test_eager_code_guess():
    assert eager_code(preset_model("gpt2")) == HF_GPT2
    assert eager_code(preset_model("gpt3")) == HF_GPT2
    assert eager_code(preset_model("llama-2-7b")) == HF_LLAMA
    assert eager_code(preset_model("opt-125m")).softmax_fp32  # learned positions with an offset: not GPT-2
    assert eager_code(preset_model("pythia-160m")).act_extra == 0  # exact GELU, rotary


# ------------------------------------------------------------------ measured (golden)
# Measured with tools/crosscheck/activations.py (torch 2.13.0+cpu, transformers 5.23.0):
#   PYTHONPATH=. python tools/crosscheck/activations.py --write-docs
# bytes of the storages saved for backward in one training forward with labels, parameters
# excluded, CUDA's dropout kernel. fp32 cases with B=2 are byte-exact; B=1 stores the padded
# labels (S + 1 int64); CPU keeps bf16 LayerNorm statistics in bf16.
GOLDEN = [
    ("gpt2-gelu_new-fp32-drop0-L2D128", gpt2(2, 128, 4, 1000), "fp32", 64, 2, HF_GPT2, 4_582_916),
    ("gpt2-gelu_new-bf16-drop.1-L2D256", gpt2(2, 256, 4, 4096, 0.1), "bf16", 256, 2, HF_GPT2, 29_511_684),
    ("gpt2-gelu_new-fp32-drop.1-L4D256", gpt2(4, 256, 8, 2048, 0.1), "fp32", 256, 1, HF_GPT2, 51_470_348),
    ("gpt2-gelu-fp32-drop.1-L4D256", gpt2(4, 256, 8, 2048, 0.1, "gelu"), "fp32", 256, 1,
     HF_GPT2_EXACT_GELU, 38_887_436),
    ("gpt2-gelu-bf16-drop0-L2D128", gpt2(2, 128, 4, 1000, 0.0, "gelu"), "bf16", 64, 2, HF_GPT2_EXACT_GELU,
     1_762_308),
    ("llama-fp32-drop0-L2D128", llama(2, 128, 4, 2, 352, 1000), "fp32", 64, 2, HF_LLAMA, 3_744_260),
    ("llama-fp32-drop.1-L2D256", llama(2, 256, 8, 4, 512, 4096, 0.1), "fp32", 128, 2, HF_LLAMA, 19_178_500),
    ("llama-bf16-drop.1-L4D256", llama(4, 256, 8, 2, 688, 2048, 0.1), "bf16", 256, 1, HF_LLAMA, 29_275_148),
    ("llama-bf16-drop0-L2D256", llama(2, 256, 8, 4, 512, 4096), "bf16", 128, 2, HF_LLAMA, 13_132_804),
]  # fmt: skip
TOLERANCE = 0.10  # the contract; every row is in fact within 0.1 %


@pytest.mark.parametrize(("m", "precision", "S", "B", "code", "measured"), [row[1:] for row in GOLDEN],
                         ids=[row[0] for row in GOLDEN])  # fmt: skip
def test_measured_bytes(m, precision, S, B, code, measured):
    tr = Training(precision=precision, activations=EAGER)
    predicted = training_memory(m, Workload(seq_len=S, batch_size=B), tr, eager=code)[0].activations
    assert abs(predicted / measured - 1) <= TOLERANCE
    if precision == "fp32" and B == 2:
        assert predicted == measured


# ------------------------------------------------------------------ seed and default unchanged
s, b, h, a, t = 2048, 2, 1024, 16, 8
KORTHIKANTI = ModelConfig.model_validate({"L": 4, "D": h, "A": a, "V": 50304, "positional": "rotary", "dropout": 0.1})


@pytest.mark.parametrize("profile", ["seed", "default"])
@pytest.mark.parametrize("eager", [None, HF_GPT2, HF_LLAMA])
def test_seed_and_default_ignore_eager_and_keep_table2(profile, eager):
    tr = Training(activations=profile, dropout=True)
    w = Workload(seq_len=s, batch_size=b)
    assert layer_activations(KORTHIKANTI, w, tr, eager=eager).total == s * b * h * 34 + 5 * a * s * s * b
    tp = layer_activations(KORTHIKANTI, w, tr, Parallelism(tensor=t), eager=eager).total
    assert tp == 10 * s * b * h + 24 * s * b * h // t + 5 * a * s * s * b // t
    assert training_memory(KORTHIKANTI, w, tr, eager=eager) == training_memory(KORTHIKANTI, w, tr)


# ------------------------------------------------------------------ properties
@settings(max_examples=60, deadline=None)
@given(m=model_configs(), S=st.integers(1, 512), B=st.integers(1, 8))
def test_affine_in_batch_and_recompute_bounds(m, S, B):
    """Bytes are affine in B (position ids and RoPE tables are per sequence, not per batch);
    full recompute keeps p·B·S·D per layer; selective keeps no S² term."""
    tr = Training(activations=EAGER, precision="bf16")
    act = [training_memory(m, Workload(seq_len=S, batch_size=k), tr)[0].activations for k in (B, B + 1, B + 2)]
    assert act[2] - act[1] == act[1] - act[0] > 0
    full = Training(activations=EAGER, precision="bf16", recompute="full")
    assert layer_activations(m, Workload(seq_len=S, batch_size=B), full).total == 2 * B * S * m.d_model
    sel = Training(activations=EAGER, precision="bf16", recompute="selective")
    one, two = (layer_activations(m, Workload(seq_len=n * S, batch_size=B), sel).total for n in (1, 2))
    assert two == 2 * one  # linear in S: nothing S x S is kept


@settings(max_examples=40, deadline=None)
@given(m=model_configs())
def test_T1_equals_unsharded(m):
    w, tr = Workload(seq_len=32, batch_size=2), Training(activations=EAGER)
    assert layer_activations(m, w, tr, Parallelism(tensor=1, sequence_parallel=True)) == layer_activations(m, w, tr)
