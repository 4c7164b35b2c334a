"""Gemma 4 in quantized weight formats (estimators/inference/gemma_layers.py `gemma4_matrices`, docs/formulas.md
"Quantized weights"): every layer's own matrices (full layers' head width and K/V heads, k = v, kv-shared
layers without W_K/W_V and with the double-wide MLP, the per-layer inputs, the MoE experts beside the dense
MLP), so that the matrices plus the parameters no format quantizes (norms, q/k norms, biases, the router and
its scales) are the exact count (params.count_params, equal to transformers: tools/crosscheck/hf_params.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import event, given, settings

from test_gemma4 import TINY, _model
from test_gemma4_tp import tp_configs
from transformer_calc.cli import run
from transformer_calc.errors import TcalcError
from transformer_calc.estimators.inference.quant import FORMATS, block_matrices, quantized_weights
from transformer_calc.estimators.gemma_layers import varied_attention
from transformer_calc.estimators.params import count_params, norm_params, tensor_parallel_params
from transformer_calc.model.config import ModelConfig
from transformer_calc.sources.presets import preset_model


def _not_matrices(m: ModelConfig, T: int) -> int:
    """What no listed matrix holds, one rank's (replicated): every layer's norms (and activation parameters),
    its q/k norms and biases, the router and its scales in the MoE layers, the final and embedding norms, and
    the per-layer inputs' norms (P-wide projection norm, each layer's D-wide norm)."""
    p = count_params(m)
    L, D, P, pattern = m.n_layers, m.d_model, m.per_layer_input_dim, m.attention_pattern
    attention = sum(varied_attention(m, pattern[i % len(pattern)], i >= m.first_kv_shared_layer, T)[key]
                    for i in range(L) for key in ("qk_norm", "attn_bias"))
    side = norm_params(m, P) + L * norm_params(m, D) if P else 0
    return (L * (p.layer.norms + p.layer.activation) + p.n_moe_layers * p.layer.router + attention
            + p.final_norm + p.embedding_norm + side)


@pytest.mark.parametrize("preset", ["gemma-4-31b", "gemma-4-26b-a4b"])
@pytest.mark.parametrize("T", [1, 2])
def test_matrices_and_the_rest_are_the_exact_count(preset, T):
    m = preset_model(preset)
    listed = sum(x.elements for x in block_matrices(m, T))
    assert listed + _not_matrices(m, T) == tensor_parallel_params(m, T)
    if T == 1:
        assert listed + _not_matrices(m, 1) == count_params(m).total


@settings(max_examples=60, deadline=None)
@given(tp_configs())
def test_matrices_cover_tiny_configs(case):
    """Tiny Gemma 4 configs (sliding/full layers, k = v, kv-shared layers, double-wide MLPs, per-layer inputs,
    MoE): at T = 1 and, where the heads allow it, T = 2, the matrices plus the rest are the rank's count, and
    every format's bytes are its quantized and unquantized parts."""
    cfg, _ = case
    m = _model(cfg)
    assert sum(x.elements for x in block_matrices(m, 1)) + _not_matrices(m, 1) == count_params(m).total
    try:
        listed = sum(x.elements for x in block_matrices(m, 2))
    except ValueError:
        event("T = 2 cannot lay this config out")
    else:
        assert listed + _not_matrices(m, 2) == tensor_parallel_params(m, 2)
    for fmt in FORMATS:
        q = quantized_weights(m, fmt)
        if FORMATS[fmt][1] == "gguf":  # a row no block divides falls back to f16: in neither part
            assert q.quantized_params + q.other_params <= count_params(m).total
        else:
            assert q.quantized_params + q.other_params == count_params(m).total
        assert q.total_bytes == q.quantized_bytes + q.other_bytes


def test_nvfp4_tiny_by_hand():
    """test_gemma4.py's TINY (D 32; sliding, full, kv-shared sliding, kv-shared full; h_d 8 and 16; P 4) in
    NVFP4 (blocks of 16 weights in 9 bytes, 8 bytes per tensor; the rest bf16). Elements: attention layer 0
    q 1,024 + k 512 + v 512 + o 1,024; layer 1 (full, one K/V head of 16, k = v: no W_V) 2,048 + 512 + 2,048;
    layers 2, 3 (kv-shared) q + o only 2,048 and 4,096: 13,824. MLPs 3·32·48 twice and the double-wide 3·32·96
    twice: 27,648. Each layer's inp_gate 32·4 and proj 4·32: 1,024. In all 42,496 in 31 tensors (9 + 8 + 7 + 7).
    Blocks: proj's rows hold 4 inputs, one padded block each (4 x 32 rows); the rest (41,984) 2,624 whole blocks:
    2,752 x 9 + 31 x 8 = 25,016 bytes. The other 54,956 - 42,496 = 12,460 parameters (the tied table 300·32,
    the per-layer table 100·16, its projection 32·16, the norms) in bf16: 24,920 bytes."""
    q = quantized_weights(_model(TINY), "nvfp4")
    assert q.quantized_params == 3072 + 4608 + 2048 + 4096 + 2 * 4608 + 2 * 9216 + 4 * 256 == 42496
    assert q.quantized_bytes == (41984 // 16 + 4 * 32) * 9 + 31 * 8 == 25016
    assert q.other_params == 54956 - 42496 == 12460
    assert q.other_bytes == 2 * 12460
    assert q.total_bytes == 25016 + 24920 == 49936
    assert q.gathered_bytes == 2 * 100 * 16  # the per-layer table's rows are gathered (the token table is tied)


def test_gemma_4_31b_gptq_by_hand():
    """gemma-4-31b in GPTQ int4 (groups of 128: 66.5 bytes each, and an int32 g_idx per input of every matrix).
    A sliding layer: q 5,376·8,192, k and v 5,376·4,096, o 8,192·5,376, gate, up and down 5,376·21,504; a full
    layer (h_d 512, 4 K/V heads, k = v): q 5,376·16,384, k 5,376·2,048, o 16,384·5,376 and the same MLP. Inputs
    per layer: sliding 5·5,376 + 8,192 + 21,504 = 56,576, full 4·5,376 + 16,384 + 21,504 = 59,392. The rest
    fp16: the tied table 262,144·5,376 and the norms 1,331,456 (test_gemma4_tp.py)."""
    q = quantized_weights(preset_model("gemma-4-31b"), "gptq-int4")
    mlp = 3 * 5376 * 21504
    sliding = 2 * 5376 * 8192 + 2 * 5376 * 4096 + mlp
    full = 2 * 5376 * 16384 + 5376 * 2048 + mlp
    assert q.quantized_params == 50 * sliding + 10 * full == 29286727680
    assert q.quantized_bytes == 29286727680 // 128 * 133 // 2 + 4 * (50 * 56576 + 10 * 59392) == 15229061120
    assert q.other_params == 262144 * 5376 + 1331456
    assert q.total_bytes == 15229061120 + 2 * (262144 * 5376 + 1331456) == 18050296320


def test_cli_json_gemma_4_31b_gptq_on_one_gpu(capsys):
    """What people run: Gemma 4 31B in GPTQ int4 on one 24 GB GPU (RTX 4090), 8k context."""
    assert run(["inference", "gemma-4-31b", "--S", "8192", "--B", "1", "--gpu", "rtx-4090", "--text-only",
                "--weight-dtype", "gptq-int4", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["inference"]["weight_dtype"] == "gptq-int4"
    assert data["memory"]["per_gpu"]["weights_bytes"] == 18050296320  # test_gemma_4_31b_gptq_by_hand
    assert data["memory"]["fits"] is True


def test_mimo_v2_flash_still_refused():
    from test_mimo import _model as mimo

    with pytest.raises(TcalcError, match="a quantized weight format is not priced for .*MiMo-V2-Flash"):
        block_matrices(mimo())


def test_published_gguf_sizes_of_gemma_4_31b():
    """Published GGUF files of Gemma 4 31B (text model), within their rounding: Q4_K_M 18.7e9 bytes
    (huggingface.co/steampunque/gemma-4-31B-it-MP-GGUF); Q4_K_M 17.4 and Q8_0 30.4 GiB
    (huggingface.co/pidtom/Gemma-4-31B-it-TQPlus, sizes in GiB labelled GB)."""
    m = preset_model("gemma-4-31b")
    assert abs(quantized_weights(m, "q4_k_m").total_bytes - 18.7e9) <= 0.05e9
    assert round(quantized_weights(m, "q4_k_m").total_bytes / 2**30, 1) == 17.4
    assert round(quantized_weights(m, "q8_0").total_bytes / 2**30, 1) == 30.4
