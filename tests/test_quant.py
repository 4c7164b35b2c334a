"""Quantized weight formats (transformer_calc/estimators/inference/quant.py): block sizes from their definitions, a tiny
model worked by hand, published checkpoint sizes, llama.cpp's Q4_K_M layer rule, and inference."""

from __future__ import annotations

import pytest

from transformer_calc.model.config import ModelConfig
from transformer_calc.estimators.inference.roofline import InferenceSpec, estimate_inference, inference_memory
from transformer_calc.sources.presets import gpu, preset_model
from transformer_calc.estimators.inference.quant import (
    FORMATS,
    MXFP4,
    NVFP4,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_0,
    quantized_weights,
    resolve_format,
    use_more_bits,
)

GIB = 2**30

# L=2, D=256, A=2 (h_d 128), SwiGLU d_ff=512, V=10, untied, no biases, RMSNorm.
TINY = ModelConfig.model_validate({"L": 2, "D": 256, "A": 2, "V": 10, "K": 6, "mlp": "swiglu", "d_ff": 512,
                                   "bias": False, "norm": "rmsnorm", "tied_embeddings": False,
                                   "positional": "rotary"})


def test_block_sizes_are_the_format_definitions():
    # ggml-common.h: block_q8_0 = fp16 d + 32 int8; block_q4_K = 2 fp16 + 12 B scales + 128 B codes;
    # block_q5_K adds 32 B of high bits; block_q6_K = 128 + 64 + 16 + 2 B.
    assert (Q8_0.block, Q8_0.block_bytes) == (32, 2 + 32)
    assert (Q4_K.block, Q4_K.block_bytes) == (256, 2 * 2 + 12 + 128)
    assert (Q5_K.block, Q5_K.block_bytes) == (256, 2 * 2 + 12 + 32 + 128)
    assert (Q6_K.block, Q6_K.block_bytes) == (256, 128 + 64 + 16 + 2)
    # OCP MX v1.0: MXFP4 = 32 E2M1 (4 bits) + one E8M0 (8 bits): 4.25 bits/weight.
    assert MXFP4.block_bytes * 8 / MXFP4.block == 4.25
    # NVFP4: 16 E2M1 + one E4M3 scale: 4.5 bits/weight.
    assert NVFP4.block_bytes * 8 / NVFP4.block == 4.5


def test_tiny_model_by_hand():
    # Block linears: 2 layers x (Q, K, V, O: 4 x 256x256 + gate, up, down: 3 x 256x512) = 1,310,720.
    # Left over: 5 RMSNorms of 256 (1,280) + embedding 10x256 + head 10x256 = 6,400 at fp16.
    awq = quantized_weights(TINY, "awq-int4")
    assert (awq.quantized_params, awq.other_params) == (1_310_720, 6_400)
    # AWQ: 64 B codes + 2 B fp16 scale + 0.5 B packed zero per 128 weights.
    assert awq.quantized_bytes == 1_310_720 * 66.5 / 128 == 680_960
    assert awq.total_bytes == 680_960 + 12_800
    # GPTQ adds g_idx, 4 B per input of each matrix: per layer 6 x 256 + 512 (down) = 2,048 inputs.
    assert quantized_weights(TINY, "gptq-int4").quantized_bytes == 680_960 + 2 * 2_048 * 4
    # NVFP4: 9 B per 16 weights + 8 B (two fp32 scales) per each of the 14 matrices.
    assert quantized_weights(TINY, "nvfp4").quantized_bytes == 1_310_720 * 9 // 16 + 8 * 14
    # MXFP4 on a dense model: every block linear at 17 B per 32.
    assert quantized_weights(TINY, "mxfp4").quantized_bytes == 1_310_720 * 17 // 32
    # GGUF Q8_0: every 2-D weight (head and embedding too) at 34 B per 32; norms in f32.
    q8 = quantized_weights(TINY, "q8_0")
    assert q8.quantized_bytes == (1_310_720 + 2 * 2_560) * 34 // 32 and q8.other_bytes == 1_280 * 4


def test_tiny_q4_k_m_follows_llama_cpp():
    # 2 layers: use_more_bits(i, 2) is true for both (i >= 7*2//8 = 1, or i < 2//8 = 0 ... i=0: (0-0)%3
    # != 2 and 0 >= 1 false -> False; i=1: 1 >= 1 -> True). attn_v and ffn_down of layer 1 at Q6_K.
    assert [use_more_bits(i, 2) for i in range(2)] == [False, True]
    q = quantized_weights(TINY, "q4_k_m")
    v, down, rest = 256 * 256, 512 * 256, 0
    q4 = 2 * (4 * 65_536 + 3 * 131_072) - v - down + 2_560  # + the untied embedding, Q4_K
    q6 = v + down + 2_560  # layer 1's attn_v and ffn_down, and the head (Q6_K)
    assert q.quantized_bytes == q4 * 144 // 256 + q6 * 210 // 256 + rest


@pytest.mark.parametrize("n, expected", [
    # llama.cpp use_more_bits: i < n/8 or i >= 7n/8 or (i - n/8) % 3 == 2. 32 layers: 4 + 4 + 24/3;
    # 80: 10 + 10 + 60/3; 40: 5 + 5 + 30/3 (half the layers, as the k-quant notes say).
    (32, 16), (80, 40), (40, 20),
])
def test_use_more_bits_counts(n, expected):
    assert sum(use_more_bits(i, n) for i in range(n)) == expected


@pytest.mark.parametrize("name, fmt, published_bytes, tolerance", [
    # OpenAI gpt-oss model card (arXiv:2508.10925), Table 1: checkpoint size 60.8 GiB and 12.8 GiB.
    ("gpt-oss-120b", "mxfp4", 60.8 * GIB, 0.001),
    ("gpt-oss-20b", "mxfp4", 12.8 * GIB, 0.002),
    # TheBloke/Llama-2-7B-GGUF README, "Provided files": 4.08, 4.78, 7.16 GB (file = tensors + a few MB
    # of metadata and vocabulary).
    ("llama-2-7b", "q4_k_m", 4.08e9, 0.002),
    ("llama-2-7b", "q5_k_m", 4.78e9, 0.002),
    ("llama-2-7b", "q8_0", 7.16e9, 0.002),
    # localmodels/Llama-2-13B-ggml README: llama-2-13b.ggmlv3.q4_K_M.bin 7.87 GB.
    ("llama-2-13b", "q4_k_m", 7.87e9, 0.002),
])
def test_published_checkpoint_sizes(name, fmt, published_bytes, tolerance):
    got = quantized_weights(preset_model(name), fmt).total_bytes
    assert got == pytest.approx(published_bytes, rel=tolerance)


def test_gpt_oss_120b_inference_counts_mxfp4_experts_at_their_size():
    """The issue's acceptance: the preset's weight_format (mxfp4) is the default weight dtype."""
    m, h100 = preset_model("gpt-oss-120b"), gpu("h100")
    assert m.weight_format == "mxfp4"
    spec = InferenceSpec(batch_size=1, prompt_len=1024, new_tokens=2, weight_dtype=m.weight_format)
    mem = inference_memory(m, h100, spec)
    assert mem.weights_bytes == 65_248_815_744  # 60.77 GiB: model card 60.8 GiB, -0.05 %
    assert mem.fits
    # One decode step reads the dense part and 4 experts per layer, not all 128.
    e = estimate_inference(m, h100, spec)
    q = quantized_weights(m, "mxfp4")
    idle = 36 * (128 - 4) * q.expert_bytes
    assert e.decode.first.weight_bytes == q.total_bytes - q.gathered_bytes - idle


def test_format_names_and_errors():
    assert resolve_format("GPTQ") == "gptq-int4" and resolve_format("Q4_K_M") == "q4_k_m"
    assert resolve_format("bf16") is None
    assert set(FORMATS) == {"gptq-int4", "awq-int4", "nvfp4", "mxfp4", "q8_0", "q4_k_m", "q5_k_m"}
    with pytest.raises(ValueError, match="GGUF"):
        quantized_weights(TINY, "q4_k_m", T=2)
    with pytest.raises(ValueError, match="weight_dtype"):
        InferenceSpec(batch_size=1, prompt_len=1, weight_dtype="q3_k_xl")
    # A shard the block does not divide is padded to whole blocks: gpt-oss's expert down projection
    # over T = 8 has 2880 / 8 = 360 inputs per GPU: ceil(360 / 32) = 12 MXFP4 blocks per row.
    from transformer_calc.estimators.inference.quant import Matrix, _blocks

    assert _blocks(Matrix("ffn_down_exps", 360, 2880 * 360, 0, True), MXFP4) == 2880 * 12
    assert _blocks(Matrix("ffn_down", 64, 256 * 64, 0), FORMATS["awq-int4"][0]) == 256 * 1


def test_quantized_read_never_exceeds_resident():
    for name, fmt in (("mixtral-8x7b", "awq-int4"), ("llama-3.1-8b", "q4_k_m"), ("gpt-oss-20b", "mxfp4")):
        m = preset_model(name)
        spec = InferenceSpec(batch_size=2, prompt_len=64, new_tokens=3, weight_dtype=fmt)
        e = estimate_inference(m, gpu("h100"), spec)
        assert 0 < e.decode.first.weight_bytes <= e.memory.weights_bytes


def test_cli_weight_dtype_format(capsys):
    import json

    from transformer_calc.cli import run

    assert run(["inference", "--preset", "gpt-oss-120b", "--gpu", "h100", "--S", "1024", "-f", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["inference"]["weight_dtype"] == "mxfp4"
    assert out["memory"]["per_gpu"]["weights_bytes"] == 65_248_815_744
    assert run(["inference", "--preset", "llama-2-7b", "--weight-dtype", "Q4_K_M", "--S", "128", "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["memory"]["per_gpu"]["weights_bytes"] == pytest.approx(4.08e9, rel=0.002)
    assert run(["inference", "--preset", "llama-2-7b", "--weight-dtype", "q3_k_xl", "--S", "128"]) == 2
    assert "weight_dtype" in capsys.readouterr().err


@pytest.mark.parametrize("q, fmt", [
    ({"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}, "mxfp4"),  # gpt-oss config.json
    ({"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}, "fp8"),  # DeepSeek-V3
    ({"quant_method": "gptq", "bits": 4, "group_size": 128}, "gptq-int4"),
    ({"quant_method": "awq", "bits": 4, "group_size": 128}, "awq-int4"),
    ({"quant_method": "gptq", "bits": 8, "group_size": 128}, None),  # not a format tcalc stores
    ({"quant_method": "awq", "bits": 4, "group_size": 64}, None),
    ("mxfp4", None), (None, None),
])
def test_hf_quantization_config_sets_the_weight_format(q, fmt):
    from transformer_calc.sources.hf import weight_format

    assert weight_format(q) == fmt


def test_hf_gpt_oss_config_imports_mxfp4():
    from conftest import REPO
    from transformer_calc.model.config import build_model
    from transformer_calc.sources.presets import hf_spec

    m = build_model(hf_spec(REPO / "tools" / "crosscheck" / "published_configs" / "gpt-oss-120b.json"))
    assert m.weight_format == "mxfp4"
    assert quantized_weights(m, "mxfp4").total_bytes == 65_248_815_744


@pytest.mark.parametrize("name", ["gpt-oss-120b", "deepseek-v3", "mixtral-8x7b", "qwen3-30b-a3b"])
@pytest.mark.parametrize("fmt", ["awq-int4", "gptq-int4", "nvfp4", "mxfp4", "q8_0", "q4_k_m", "q5_k_m"])
def test_moe_weight_reads_grow_with_tokens_up_to_the_resident_bytes(name, fmt):
    """Reads of a MoE step never go negative and never exceed what is stored, and grow with the
    experts touched; when every expert is touched they are everything but the gathered tables.
    (GGUF stores some layers' experts at more bits: the per-expert bytes are the layers' mean.)"""
    from transformer_calc.estimators.inference.roofline import rank_shard, _weights_read_bytes

    m = preset_model(name)
    spec = InferenceSpec(batch_size=1, prompt_len=8, weight_dtype=fmt)
    sh = rank_shard(m, spec)
    reads = [_weights_read_bytes(sh, spec, t) for t in (1, 2, 8, 64, 10**6)]
    assert 0 < reads[0] and reads == sorted(reads)
    q = sh.store
    assert reads[-1] == q.total_bytes - q.gathered_bytes


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from conftest import model_configs, modern_model_configs  # noqa: E402


@settings(max_examples=80, deadline=None)
@given(st.one_of(model_configs(max_layers=4), modern_model_configs(max_layers=6)),
       st.sampled_from(sorted(FORMATS)), st.integers(1, 16), st.integers(1, 300), st.integers(1, 20))
def test_any_model_in_any_format_gives_sane_numbers_or_a_named_error(m, fmt, B, S, N):
    """Whatever the shape: either a ValueError naming the problem, or positive weights, reads between
    0 and the resident bytes, and the expected time at or above the bound."""
    import math

    from transformer_calc.estimators.inference.expected import default_efficiency, estimate_expected
    from transformer_calc.estimators.inference.roofline import rank_shard, _weights_read_bytes

    h100 = gpu("h100")
    try:
        spec = InferenceSpec(batch_size=B, prompt_len=S, new_tokens=N, weight_dtype=fmt)
        e = estimate_inference(m, h100, spec)
        x = estimate_expected(m, h100, spec, default_efficiency(h100))
    except ValueError:
        return
    sh = rank_shard(m, spec)
    assert 0 < e.memory.weights_bytes
    assert 0 <= _weights_read_bytes(sh, spec, 1) <= e.memory.weights_bytes
    assert math.isfinite(x.total_s) and x.total_s >= e.total_s * (1 - 1e-12)
