"""transformer_calc.sources.gguf: GGUF header -> spec + checkpoint, exact bytes, hostile files.

Real GGUF files are written with llama.cpp's own writer (gguf.GGUFWriter) for tiny configs of each
supported architecture, with the tensor names and ggml shapes llama.cpp's loader expects
(src/llama-model.cpp create_tensor: ne[0] first, i.e. numpy shapes reversed). Hostile files are
built byte by byte (ggml/docs/gguf.md layout).
"""

from __future__ import annotations

import os
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as Q, GGUFEndian, GGUFReader, GGUFValueType, GGUFWriter  # noqa: E402

from transformer_calc.model.config import build_model  # noqa: E402
from transformer_calc.errors import TcalcError  # noqa: E402
from transformer_calc.sources.gguf import (  # noqa: E402
    MAX_TENSORS,
    SUPPORTED_ARCHITECTURES,
    component_of,
    not_in_transformers,
    read_gguf,
)
from transformer_calc.sources.hf import from_hf_config  # noqa: E402
from transformer_calc.estimators.params import count_params  # noqa: E402

FAST_S = 1.0  # every hostile file is refused in well under this

# ------------------------------------------------------------------ tiny configs
D, A, KV, HD, F, V, L, CTX = 256, 4, 2, 64, 512, 320, 2, 4096


def _ne_type(name: str, ne: tuple[int, ...], i: int) -> Q:
    """A spread of ggml types: 1-D in F32 (as convert_hf_to_gguf.py writes norms and biases),
    matrices cycling through Q4_K (rows of 256), Q8_0 (rows of 32), F16, BF16, Q6_K."""
    if len(ne) == 1:
        return Q.F32
    if "_exps" in name and ne[0] % 32 == 0 and i % 2:
        return Q.MXFP4
    cycle = [Q.Q4_K, Q.Q8_0, Q.F16, Q.Q6_K, Q.BF16]
    for t in cycle[i % len(cycle):] + cycle[: i % len(cycle)]:
        if ne[0] % GGML_QUANT_SIZES[t][0] == 0:
            return t
    return Q.F16


def write_gguf(path: Path, arch: str, meta: dict[str, Any], tensors: list[tuple[str, tuple[int, ...]]],
               *, file_type: int | None = 15, alignment: int | None = None,
               endian: GGUFEndian = GGUFEndian.LITTLE) -> Path:
    """A real GGUF file: `tensors` as (name, ggml ne) with zero data of the right size."""
    w = GGUFWriter(path, arch, endianess=endian)
    w.add_name(f"tiny {arch}")
    if file_type is not None:
        w.add_file_type(file_type)
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for key, value in meta.items():
        key = key.replace("{arch}", arch)
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, float):
            w.add_float32(key, value)
        elif isinstance(value, str):
            w.add_string(key, value)
        else:
            w.add_array(key, value)
    for i, (name, ne) in enumerate(tensors):
        t = _ne_type(name, ne, i)
        shape = tuple(reversed(ne))  # GGUFWriter takes numpy shapes; it writes ne reversed
        block, size = GGML_QUANT_SIZES[t]
        if t == Q.F32:
            w.add_tensor(name, np.zeros(shape, np.float32))
        elif t == Q.F16:
            w.add_tensor(name, np.zeros(shape, np.float16))
        else:  # raw bytes of the right size; the writer derives the logical shape
            w.add_tensor(name, np.zeros((*shape[:-1], shape[-1] // block * size), np.uint8), raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _tok(n: int = V) -> dict[str, Any]:
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": [f"t{i}" for i in range(n)]}


def _base(ff: int | None = F) -> dict[str, Any]:
    meta = {"{arch}.block_count": L, "{arch}.context_length": CTX, "{arch}.embedding_length": D,
            "{arch}.attention.head_count": A, "{arch}.attention.head_count_kv": KV,
            "{arch}.rope.freq_base": 10000.0, "{arch}.attention.layer_norm_rms_epsilon": 1e-5} | _tok()
    if ff is not None:
        meta["{arch}.feed_forward_length"] = ff
    return meta


def _ends(tied: bool) -> list[tuple[str, tuple[int, ...]]]:
    out = [("token_embd.weight", (D, V)), ("output_norm.weight", (D,))]
    return out if tied else [*out, ("output.weight", (D, V))]


def _attn(i: int, hd: int = HD, qkv_bias: bool = False, out_bias: bool = False, qk_norm: bool = False,
          sinks: bool = False) -> list[tuple[str, tuple[int, ...]]]:
    p = f"blk.{i}."
    out = [(p + "attn_q.weight", (D, A * hd)), (p + "attn_k.weight", (D, KV * hd)),
           (p + "attn_v.weight", (D, KV * hd)), (p + "attn_output.weight", (A * hd, D))]
    if qkv_bias:
        out += [(p + "attn_q.bias", (A * hd,)), (p + "attn_k.bias", (KV * hd,)), (p + "attn_v.bias", (KV * hd,))]
    if out_bias:
        out += [(p + "attn_output.bias", (D,))]
    if qk_norm:
        out += [(p + "attn_q_norm.weight", (hd,)), (p + "attn_k_norm.weight", (hd,))]
    if sinks:
        out += [(p + "attn_sinks.weight", (A,))]
    return out


def _mlp(i: int, ff: int = F) -> list[tuple[str, tuple[int, ...]]]:
    p = f"blk.{i}."
    return [(p + "ffn_gate.weight", (D, ff)), (p + "ffn_up.weight", (D, ff)), (p + "ffn_down.weight", (ff, D))]


def _moe(i: int, fe: int, e: int, bias: bool = False) -> list[tuple[str, tuple[int, ...]]]:
    p = f"blk.{i}."
    out = [(p + "ffn_gate_inp.weight", (D, e)), (p + "ffn_gate_exps.weight", (D, fe, e)),
           (p + "ffn_up_exps.weight", (D, fe, e)), (p + "ffn_down_exps.weight", (fe, D, e))]
    if bias:
        out += [(p + "ffn_gate_inp.bias", (e,)), (p + "ffn_gate_exps.bias", (fe, e)),
                (p + "ffn_up_exps.bias", (fe, e)), (p + "ffn_down_exps.bias", (D, e))]
    return out


def _norms(i: int, *names: str) -> list[tuple[str, tuple[int, ...]]]:
    return [(f"blk.{i}.{n}.weight", (D,)) for n in names]


def _layers(n: int, block: Callable[[int], list[tuple[str, tuple[int, ...]]]]) -> list[tuple[str, tuple[int, ...]]]:
    return [t for i in range(n) for t in block(i)]


HF_LLAMA = {"hidden_size": D, "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": A,
            "num_key_value_heads": KV, "vocab_size": V, "max_position_embeddings": CTX, "hidden_act": "silu"}


def _case_llama() -> tuple[str, dict, list, dict]:
    tensors = [*_ends(False), ("rope_freqs.weight", (HD // 2,)),
               *_layers(L, lambda i: [*_norms(i, "attn_norm", "ffn_norm"), *_attn(i), *_mlp(i)])]
    return "llama", _base(), tensors, {"model_type": "llama", **HF_LLAMA, "tie_word_embeddings": False}


def _case_mixtral() -> tuple[str, dict, list, dict]:
    meta = _base() | {"{arch}.expert_count": 4, "{arch}.expert_used_count": 2}
    tensors = [*_ends(False), *_layers(L, lambda i: [*_norms(i, "attn_norm", "ffn_norm"), *_attn(i), *_moe(i, F, 4)])]
    hf = {"model_type": "mixtral", **HF_LLAMA, "num_local_experts": 4, "num_experts_per_tok": 2, "sliding_window": None}
    return "llama", meta, tensors, hf


def _case_qwen2() -> tuple[str, dict, list, dict]:
    tensors = [*_ends(True), *_layers(L, lambda i: [*_norms(i, "attn_norm", "ffn_norm"), *_attn(i, qkv_bias=True), *_mlp(i)])]
    return "qwen2", _base(), tensors, {"model_type": "qwen2", **HF_LLAMA, "tie_word_embeddings": True}


def _case_qwen3() -> tuple[str, dict, list, dict]:
    hd = 128  # Qwen3 pins head_dim (0.6B: 128 with D/A = 64): key_length is written
    meta = _base() | {"{arch}.attention.key_length": hd, "{arch}.attention.value_length": hd}
    tensors = [*_ends(True), *_layers(L, lambda i: [*_norms(i, "attn_norm", "ffn_norm"), *_attn(i, hd, qk_norm=True), *_mlp(i)])]
    return "qwen3", meta, tensors, {"model_type": "qwen3", **HF_LLAMA, "head_dim": hd, "tie_word_embeddings": True}


def _case_qwen3moe() -> tuple[str, dict, list, dict]:
    fe = 256
    meta = _base() | {"{arch}.expert_count": 4, "{arch}.expert_used_count": 2, "{arch}.expert_feed_forward_length": fe,
                      "{arch}.attention.key_length": HD, "{arch}.attention.value_length": HD}
    tensors = [*_ends(False), *_layers(L, lambda i: [*_norms(i, "attn_norm", "ffn_norm"), *_attn(i, qk_norm=True), *_moe(i, fe, 4)])]
    hf = {"model_type": "qwen3_moe", **HF_LLAMA, "head_dim": HD, "num_experts": 4, "num_experts_per_tok": 2,
          "moe_intermediate_size": fe, "tie_word_embeddings": False}
    return "qwen3moe", meta, tensors, hf


def _case_qwen2moe() -> tuple[str, dict, list, dict]:
    fe, fs = 256, 512
    meta = _base() | {"{arch}.expert_count": 4, "{arch}.expert_used_count": 2, "{arch}.expert_feed_forward_length": fe,
                      "{arch}.expert_shared_feed_forward_length": fs}

    def block(i: int) -> list:
        p = f"blk.{i}."
        shared = [(p + "ffn_gate_inp_shexp.weight", (D,)), (p + "ffn_gate_shexp.weight", (D, fs)),
                  (p + "ffn_up_shexp.weight", (D, fs)), (p + "ffn_down_shexp.weight", (fs, D))]
        return [*_norms(i, "attn_norm", "ffn_norm"), *_attn(i, qkv_bias=True), *_moe(i, fe, 4), *shared]

    hf = {"model_type": "qwen2_moe", **HF_LLAMA, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": fe,
          "shared_expert_intermediate_size": fs, "tie_word_embeddings": False}
    return "qwen2moe", meta, [*_ends(False), *_layers(L, block)], hf


GEMMA_NORMS = ("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm")


def _case_gemma2() -> tuple[str, dict, list, dict]:
    meta = _base() | {"{arch}.attention.key_length": HD, "{arch}.attention.value_length": HD,
                      "{arch}.attention.sliding_window": 128, "{arch}.attn_logit_softcapping": 50.0}
    tensors = [*_ends(True), *_layers(L, lambda i: [*_norms(i, *GEMMA_NORMS), *_attn(i), *_mlp(i)])]
    hf = {"model_type": "gemma2", **HF_LLAMA, "head_dim": HD, "hidden_activation": "gelu_pytorch_tanh",
          "sliding_window": 128}
    return "gemma2", meta, tensors, hf


def _case_gemma3() -> tuple[str, dict, list, dict]:
    n = 7  # a full period of five sliding layers and one full, and one more
    meta = _base() | {"{arch}.block_count": n, "{arch}.attention.key_length": HD, "{arch}.attention.value_length": HD,
                      "{arch}.attention.sliding_window": 128}
    tensors = [*_ends(True), *_layers(n, lambda i: [*_norms(i, *GEMMA_NORMS), *_attn(i, qk_norm=True), *_mlp(i)])]
    hf = {"model_type": "gemma3_text", **HF_LLAMA, "num_hidden_layers": n, "head_dim": HD,
          "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 128}
    return "gemma3", meta, tensors, hf


def _case_phi3() -> tuple[str, dict, list, dict]:
    # convert_hf_to_gguf.py Phi3MiniModel: fused qkv, gate+up in ffn_up, LongRoPE factors; the
    # window it writes is switched off by llama.cpp, so the HF twin has none
    meta = _base() | {"{arch}.attention.sliding_window": 2047, "{arch}.rope.dimension_count": HD}

    def block(i: int) -> list:
        p = f"blk.{i}."
        return [*_norms(i, "attn_norm", "ffn_norm"), (p + "attn_qkv.weight", (D, (A + 2 * KV) * HD)),
                (p + "attn_output.weight", (A * HD, D)), (p + "ffn_up.weight", (D, 2 * F)), (p + "ffn_down.weight", (F, D))]

    tensors = [*_ends(False), ("rope_factors_long.weight", (HD // 2,)), ("rope_factors_short.weight", (HD // 2,)),
               *_layers(L, block)]
    return "phi3", meta, tensors, {"model_type": "phi3", **HF_LLAMA, "sliding_window": None}


def _case_gpt_oss() -> tuple[str, dict, list, dict]:
    fe = 256
    meta = _base(fe) | {"{arch}.expert_count": 4, "{arch}.expert_used_count": 2, "{arch}.expert_feed_forward_length": fe,
                        "{arch}.attention.key_length": HD, "{arch}.attention.value_length": HD,
                        "{arch}.attention.sliding_window": 128}
    tensors = [*_ends(False), *_layers(L, lambda i: [
        *_norms(i, "attn_norm", "post_attention_norm"), *_attn(i, qkv_bias=True, out_bias=True, sinks=True),
        *_moe(i, fe, 4, bias=True)])]
    hf = {"model_type": "gpt_oss", **HF_LLAMA, "intermediate_size": fe, "head_dim": HD, "num_local_experts": 4,
          "num_experts_per_tok": 2, "sliding_window": 128}
    return "gpt-oss", meta, tensors, hf


R_Q, R_KV, ROPE, NOPE, DV, FE_DS = 64, 32, 16, 48, 32, 256


def _deepseek(mla: bool, nextn: int = 0) -> tuple[str, dict, list, dict]:
    """convert_hf_to_gguf.py DeepseekV2Model: MLA as MQA over the latent (mla: key_length_mla and
    attn_k_b/attn_v_b) or the older layout (key_length = nope + rope, attn_kv_b)."""
    n = L + 1 + nextn  # one dense layer, L MoE layers, then the NextN layers
    meta = _base() | {"{arch}.block_count": n, "{arch}.attention.q_lora_rank": R_Q, "{arch}.attention.kv_lora_rank": R_KV,
                      "{arch}.rope.dimension_count": ROPE, "{arch}.expert_count": 4, "{arch}.expert_used_count": 2,
                      "{arch}.expert_feed_forward_length": FE_DS, "{arch}.expert_shared_count": 1,
                      "{arch}.leading_dense_block_count": 1, "{arch}.vocab_size": V}
    if mla:
        meta |= {"{arch}.attention.head_count_kv": 1, "{arch}.attention.key_length": R_KV + ROPE,
                 "{arch}.attention.value_length": R_KV, "{arch}.attention.key_length_mla": NOPE + ROPE,
                 "{arch}.attention.value_length_mla": DV}
    else:
        meta |= {"{arch}.attention.head_count_kv": A, "{arch}.attention.key_length": NOPE + ROPE,
                 "{arch}.attention.value_length": DV}
    if nextn:
        meta["{arch}.nextn_predict_layers"] = nextn

    def block(i: int) -> list:
        p = f"blk.{i}."
        out = [*_norms(i, "attn_norm", "ffn_norm"), (p + "attn_q_a.weight", (D, R_Q)), (p + "attn_q_a_norm.weight", (R_Q,)),
               (p + "attn_q_b.weight", (R_Q, A * (NOPE + ROPE))), (p + "attn_kv_a_mqa.weight", (D, R_KV + ROPE)),
               (p + "attn_kv_a_norm.weight", (R_KV,)), (p + "attn_output.weight", (A * DV, D))]
        if mla:
            out += [(p + "attn_k_b.weight", (NOPE, R_KV, A)), (p + "attn_v_b.weight", (R_KV, DV, A))]
        else:
            out += [(p + "attn_kv_b.weight", (R_KV, A * (NOPE + DV)))]
        if i == 0:
            return out + _mlp(i)
        out += [*_moe(i, FE_DS, 4), (p + "exp_probs_b.bias", (4,)), (p + "ffn_gate_shexp.weight", (D, FE_DS)),
                (p + "ffn_up_shexp.weight", (D, FE_DS)), (p + "ffn_down_shexp.weight", (FE_DS, D))]
        if i >= n - nextn:
            out += [(p + "nextn.eh_proj.weight", (2 * D, D)), (p + "nextn.enorm.weight", (D,)),
                    (p + "nextn.hnorm.weight", (D,)), (p + "nextn.shared_head_norm.weight", (D,)),
                    (p + "nextn.embed_tokens.weight", (D, V)), (p + "nextn.shared_head_head.weight", (D, V))]
        return out

    hf = {"model_type": "deepseek_v3", **HF_LLAMA, "num_hidden_layers": n - nextn, "num_key_value_heads": A,
          "q_lora_rank": R_Q, "kv_lora_rank": R_KV, "qk_rope_head_dim": ROPE, "qk_nope_head_dim": NOPE,
          "v_head_dim": DV, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": FE_DS,
          "n_shared_experts": 1, "first_k_dense_replace": 1, "num_nextn_predict_layers": nextn, "tie_word_embeddings": False}
    return "deepseek2", meta, [*_ends(False), *_layers(n, block)], hf


CASES: dict[str, Callable[[], tuple[str, dict, list, dict]]] = {
    "llama": _case_llama, "mixtral": _case_mixtral, "qwen2": _case_qwen2, "qwen3": _case_qwen3,
    "qwen3moe": _case_qwen3moe, "qwen2moe": _case_qwen2moe, "gemma2": _case_gemma2, "gemma3": _case_gemma3,
    "phi3": _case_phi3, "gpt-oss": _case_gpt_oss, "deepseek2-mla": lambda: _deepseek(True),
    "deepseek2-kv_b": lambda: _deepseek(False), "deepseek2-nextn": lambda: _deepseek(True, nextn=1),
}


def _pad(n: int, align: int) -> int:
    return -(-n // align) * align


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    root = tmp_path_factory.mktemp("gguf")
    out = {}
    for key, case in CASES.items():
        arch, meta, tensors, hf = case()
        out[key] = (write_gguf(root / f"{key}.gguf", arch, meta, tensors), hf)
    return out


# ------------------------------------------------------------------ real files
def test_every_supported_architecture_has_a_case():
    arches = {case()[0] for case in CASES.values()}
    assert arches == set(SUPPORTED_ARCHITECTURES)


@pytest.mark.parametrize("key", CASES)
def test_bytes_are_what_the_file_holds(files, key):
    path, _ = files[key]
    spec, ckpt = read_gguf(path)
    reader = GGUFReader(path)  # llama.cpp's own reader, as a second opinion
    assert ckpt.format == "gguf" and ckpt.files == 1 and ckpt.source == str(path)
    assert ckpt.file_bytes == path.stat().st_size
    assert [t.name for t in ckpt.tensors] == [t.name for t in reader.tensors]
    for mine, theirs in zip(ckpt.tensors, reader.tensors):
        assert mine.nbytes == int(theirs.n_bytes), mine.name
        assert mine.dtype == theirs.tensor_type.name
        assert mine.shape == tuple(int(d) for d in reversed(theirs.shape))
        # tensors llama.cpp adds that transformers keeps as buffers (rope_freqs, exp_probs_b) hold no parameters
        assert mine.params == (0 if not_in_transformers(mine.name) else int(theirs.n_elements)) and mine.role == "weight"
    # The data section is the tensors, each padded to the alignment (GGUFWriter.write_padding)
    align = reader.alignment
    assert path.stat().st_size - reader.data_offset == sum(_pad(t.nbytes, align) for t in ckpt.tensors)
    assert ckpt.total_bytes == sum(int(t.n_bytes) for t in reader.tensors)
    assert {t.dtype for t in ckpt.tensors} >= {"F32", "Q8_0"}


def test_the_types_spread_over_f16_f32_q8_0_q4_k(files):
    dtypes = {t.dtype for key in files for t in read_gguf(files[key][0])[1].tensors}
    assert {"F16", "F32", "Q8_0", "Q4_K", "Q6_K", "BF16", "MXFP4"} <= dtypes


@pytest.mark.parametrize("key", CASES)
def test_params_equal_the_built_model(files, key):
    path, _ = files[key]
    spec, ckpt = read_gguf(path)
    p = count_params(build_model(spec))
    counted = sum(t.params for t in ckpt.tensors if not not_in_transformers(t.name))
    assert p.total + p.mtp == counted
    assert (p.mtp > 0) == (key == "deepseek2-nextn")
    assert spec["source"] == str(path) and spec["name"] == f"tiny {CASES[key]()[0]}"


@pytest.mark.parametrize("key", CASES)
def test_the_spec_is_the_hf_spec_of_the_same_model(files, key):
    """The GGUF's model equals the one transformer_calc.sources.hf builds from the matching config.json."""
    path, hf = files[key]
    spec, _ = read_gguf(path)
    ours, theirs = build_model(spec), build_model(from_hf_config(hf))
    skip = {"name", "source"}
    a = {k: v for k, v in ours.model_dump().items() if k not in skip}
    b = {k: v for k, v in theirs.model_dump().items() if k not in skip}
    assert a == b


def test_components(files):
    _, ckpt = read_gguf(files["deepseek2-nextn"][0])
    comp = {t.name: t.component for t in ckpt.tensors}
    assert comp["token_embd.weight"] == "embedding"
    assert comp["output.weight"] == "head"
    assert comp["output_norm.weight"] == comp["blk.0.attn_norm.weight"] == comp["blk.1.ffn_norm.weight"] == "norms"
    assert comp["blk.1.attn_q_a_norm.weight"] == comp["blk.1.attn_kv_a_norm.weight"] == "attention"
    assert comp["blk.1.attn_k_b.weight"] == comp["blk.1.attn_kv_a_mqa.weight"] == "attention"
    assert comp["blk.1.ffn_gate_inp.weight"] == comp["blk.1.exp_probs_b.bias"] == "router"
    assert comp["blk.1.ffn_down_exps.weight"] == "experts"
    assert comp["blk.1.ffn_up_shexp.weight"] == comp["blk.0.ffn_gate.weight"] == "mlp"
    assert {comp[n] for n in comp if n.startswith("blk.3.")} == {"mtp"}  # block_count 4, one NextN layer
    by = ckpt.by_component()
    assert set(by) == {"embedding", "attention", "mlp", "experts", "router", "norms", "head", "mtp"}
    p = count_params(build_model(read_gguf(files["deepseek2-nextn"][0])[0]))
    assert sum(t.params for t in ckpt.tensors if t.component == "mtp" and not not_in_transformers(t.name)) == p.mtp


@pytest.mark.parametrize(("name", "component"), [
    ("position_embd.weight", "embedding"), ("rope_freqs.weight", "other"), ("blk.0.attn_q_norm.weight", "attention"),
    ("blk.0.attn_k_norm.weight", "attention"), ("blk.0.post_ffw_norm.weight", "norms"),
    ("blk.0.post_attention_norm.weight", "norms"), ("blk.0.attn_sinks.weight", "attention"),
    ("blk.0.attn_qkv.weight", "attention"), ("blk.2.attn_output.bias", "attention"),
    ("blk.0.ffn_gate_inp_shexp.weight", "mlp"), ("blk.0.ffn_gate_up_exps.weight", "experts"),
    ("blk.0.ffn_gate_exps.bias", "experts"), ("blk.5.nextn.eh_proj.weight", "mtp"), ("blk.0.attn_kv_b.weight", "attention"),
])
def test_component_names(name, component):
    assert component_of(name) == component


def test_mtp_blocks_by_index():
    assert component_of("blk.61.attn_norm.weight", mtp_from=61) == "mtp"
    assert component_of("blk.60.attn_norm.weight", mtp_from=61) == "norms"


def test_tensors_llama_cpp_adds_are_other_and_listed(files):
    for key, extra in (("llama", "rope_freqs.weight"), ("phi3", "rope_factors_long.weight")):
        _, ckpt = read_gguf(files[key][0])
        t = next(t for t in ckpt.tensors if t.name == extra)
        assert t.component == "other" and not_in_transformers(t.name)
    assert not_in_transformers("blk.7.exp_probs_b.bias") and not not_in_transformers("blk.7.ffn_gate_inp.weight")


def test_flags_from_the_tensors(files):
    assert read_gguf(files["qwen2"][0])[0]["tied_embeddings"] is True
    assert read_gguf(files["llama"][0])[0]["tied_embeddings"] is False
    q2 = read_gguf(files["qwen2"][0])[0]
    assert (q2["qkv_bias"], q2["attn_out_bias"], q2["mlp_bias"]) == (True, False, False)
    oss = read_gguf(files["gpt-oss"][0])[0]
    assert oss["bias"] is True and oss["router_bias"] is True and oss["attention_sinks"] is True


def test_windows_follow_llama_cpp(files):
    assert read_gguf(files["gemma3"][0])[0]["attention_pattern"] == ["sliding"] * 5 + ["full"]
    assert read_gguf(files["gemma2"][0])[0]["attention_pattern"] == ["sliding", "full"]
    phi = read_gguf(files["phi3"][0])[0]
    assert "attention_pattern" not in phi and "sliding_window" not in phi  # llama.cpp PR 13676


def test_quantization_name(tmp_path):
    arch, meta, tensors, _ = _case_llama()
    assert read_gguf(write_gguf(tmp_path / "a.gguf", arch, meta, tensors, file_type=15))[1].quantization == "Q4_K_M"
    assert read_gguf(write_gguf(tmp_path / "b.gguf", arch, meta, tensors, file_type=0))[1].quantization == "F32"
    assert read_gguf(write_gguf(tmp_path / "c.gguf", arch, meta, tensors, file_type=None))[1].quantization is None


def test_alignment_and_big_endian(tmp_path):
    arch, meta, tensors, _ = _case_qwen3()
    base = read_gguf(write_gguf(tmp_path / "a.gguf", arch, meta, tensors))
    wide = read_gguf(write_gguf(tmp_path / "b.gguf", arch, meta, tensors, alignment=256))
    big = read_gguf(write_gguf(tmp_path / "c.gguf", arch, meta, tensors, endian=GGUFEndian.BIG))
    strip = lambda r: ({k: v for k, v in r[0].items() if k != "source"}, [(t.name, t.nbytes) for t in r[1].tensors])  # noqa: E731
    assert strip(base) == strip(wide) == strip(big)


def test_vocab_from_the_token_list_when_no_vocab_size(files):
    spec, _ = read_gguf(files["llama"][0])
    assert spec["vocab_size"] == V


def test_a_real_sized_tokenizer_reads_fast(tmp_path):
    """Llama 3's 128k tokens and 280k merges: the header walk stays well under a second."""
    arch, meta, tensors, _ = _case_llama()
    n = 128_256
    meta = meta | {"tokenizer.ggml.tokens": [f"tok{i}" for i in range(n)],
                   "tokenizer.ggml.merges": [f"a{i} b{i}" for i in range(280_147)],
                   "tokenizer.ggml.token_type": [1] * n, "{arch}.vocab_size": V,
                   "tokenizer.chat_template": "x" * 20_000}
    path = write_gguf(tmp_path / "big.gguf", arch, meta, tensors)
    start = time.perf_counter()
    spec, _ = read_gguf(path)
    assert time.perf_counter() - start < 1.5
    assert spec["vocab_size"] == V


# ------------------------------------------------------------------ hostile files
def _s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def _kv(key: str, vtype: int, payload: bytes) -> bytes:
    return _s(key) + struct.pack("<I", vtype) + payload


def _kv_u32(key: str, value: int) -> bytes:
    return _kv(key, GGUFValueType.UINT32, struct.pack("<I", value))


def _kv_str(key: str, value: str) -> bytes:
    return _kv(key, GGUFValueType.STRING, _s(value))


def _ti(name: str, ne: tuple[int, ...], ggml_type: int, offset: int) -> bytes:
    return _s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne) + struct.pack("<IQ", ggml_type, offset)


def _raw(kvs: list[bytes], tis: list[bytes], data: bytes = b"", *, version: int = 3, n_tensors: int | None = None,
         n_kv: int | None = None, magic: bytes = b"GGUF") -> bytes:
    head = magic + struct.pack("<IQQ", version, len(tis) if n_tensors is None else n_tensors,
                               len(kvs) if n_kv is None else n_kv) + b"".join(kvs) + b"".join(tis)
    return head + b"\0" * (_pad(len(head), 32) - len(head)) + data


ARCH = [_kv_str("general.architecture", "llama")]


def _refused(path: Path, *needles: str) -> str:
    """read_gguf(path) raises one TcalcError line, fast, naming the file and each needle."""
    start = time.perf_counter()
    with pytest.raises(TcalcError) as info:
        read_gguf(path)
    elapsed = time.perf_counter() - start
    message = str(info.value)
    assert elapsed < FAST_S, f"{elapsed:.2f} s"
    assert "\n" not in message and len(message) < 400, message
    assert str(path.name) in message or "gguf package" in message, message
    for needle in needles:
        assert needle in message, message
    return message


def _put(tmp_path: Path, raw: bytes, name: str = "bad.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(raw)
    return path


@pytest.mark.parametrize(("raw", "needles"), [
    (b"GGML" + b"\0" * 60, ("not a GGUF file",)),
    (b"PK\x03\x04" + b"\0" * 60, ("not a GGUF file",)),
    (_raw([], [], version=1), ("version 1", "versions 2 and 3")),
    (_raw([], [], version=7), ("version 7",)),
    (b"GGU", ("truncated",)),
    (b"GGUF\x03\0\0\0\0\0", ("truncated",)),
    # a key and a value string declaring 2^40 bytes
    (_raw([struct.pack("<Q", 1 << 40) + b"general.name"], []), ("1,099,511,627,776 bytes", "past the end")),
    (_raw([_kv("general.name", GGUFValueType.STRING, struct.pack("<Q", 1 << 40))], []), ("past the end",)),
    # arrays of 2^40 items: numbers and strings
    (_raw([_kv("a", GGUFValueType.ARRAY, struct.pack("<IQ", GGUFValueType.UINT8, 1 << 40))], []), ("1,099,511,627,776 items",)),
    (_raw([_kv("a", GGUFValueType.ARRAY, struct.pack("<IQ", GGUFValueType.STRING, 1 << 40))], []), ("1,099,511,627,776 strings",)),
    (_raw([_kv("a", GGUFValueType.ARRAY, struct.pack("<IQ", GGUFValueType.STRING, 1000))], []), ("more than the",)),
    (_raw([_kv("a", GGUFValueType.ARRAY, struct.pack("<IQ", GGUFValueType.UINT32, 10_000))], []), ("truncated",)),
    (_raw([_kv("a", GGUFValueType.ARRAY, struct.pack("<IQ", GGUFValueType.ARRAY, 1))], []), ("arrays of arrays",)),
    (_raw([_kv("a", 99, b"")], []), ("value type 99",)),
    (_raw([_kv_u32("a", 1), _kv_u32("a", 2)], []), ("given twice",)),
    # counts far above any model
    (_raw([], [], n_tensors=10**6), ("1,000,000 tensors", f"{MAX_TENSORS:,}")),
    (_raw([], [], n_kv=10**6), ("1,000,000 metadata keys",)),
    (_raw([], [], n_tensors=2**64 - 1), ("tensors",)),
    # tensor infos
    (_raw(ARCH, [_ti("x" * 100, (32,), 0, 0)]), ("100 bytes long",)),
    (_raw(ARCH, [_ti("a", (32,) * 5, 0, 0)]), ("5 dimensions",)),
    (_raw(ARCH, [_ti("a", (32,), 0, 0), _ti("a", (32,), 0, 128)], b"\0" * 256), ("listed twice",)),
    (_raw(ARCH, [_ti("a", (32,), 4, 0)], b"\0" * 128), ("ggml type 4",)),  # Q4_2, removed in 2023
    (_raw(ARCH, [_ti("a", (32,), 1000, 0)], b"\0" * 128), ("ggml type 1000",)),
    (_raw(ARCH, [_ti("a", (1 << 62, 1 << 62), 0, 0)]), ("more than int64",)),
    (_raw(ARCH, [_ti("a", (2**64 - 1,), 0, 0)]), ("above int64",)),
    (_raw(ARCH, [_ti("a", (100, 4), Q.Q4_K, 0)], b"\0" * 4096), ("not a multiple of the Q4_K block of 256",)),
    (_raw(ARCH, [_ti("a", (32,), 0, 16)], b"\0" * 256), ("not a multiple of the alignment",)),
    (_raw(ARCH, [_ti("a", (32,), 0, 0)], b"\0" * 64), ("runs past the end",)),
    (_raw(ARCH, [_ti("a", (32,), 0, 1 << 40)], b"\0" * 256), ("runs past the end",)),
    (_raw(ARCH, [_ti("a", (64,), 0, 0), _ti("b", (32,), 0, 128)], b"\0" * 512), ("overlap",)),
    (_raw([*ARCH, _kv_u32("general.alignment", 3)], [_ti("a", (32,), 0, 0)], b"\0" * 256), ("power of two",)),
    (_raw(ARCH, []), ("holds no tensors",)),
    (_raw([_kv_str("general.architecture", "mamba")], [_ti("a", (32,), 0, 0)], b"\0" * 128),
     ("architecture 'mamba' is not supported", "llama, qwen2, qwen2moe", "gpt-oss")),
    (_raw([], [_ti("a", (32,), 0, 0)], b"\0" * 128), ("no general.architecture",)),
    (_raw([*ARCH, _kv("split.count", GGUFValueType.UINT16, struct.pack("<H", 3))], [_ti("a", (32,), 0, 0)], b"\0" * 128),
     ("split in 3 files", "llama-gguf-split --merge")),
    (_raw(ARCH, [_ti("a", (32,), 0, 0)], b"\0" * 128), ("llama.block_count is missing",)),
    (_raw([*ARCH, _kv_str("llama.block_count", "32")], [_ti("a", (32,), 0, 0)], b"\0" * 128),
     ("llama.block_count ('32') must be a whole number",)),
    (_raw(ARCH, [_s(b"\xff\xfe") + struct.pack("<IQIQ", 1, 32, 0, 0)], b"\0" * 128), ("not UTF-8",)),
    (_raw([_kv("t", GGUFValueType.ARRAY, struct.pack("<IQ", GGUFValueType.STRING, 2) + _s("ab") + struct.pack("<Q", 1 << 40))], []),
     ("a string of 't'", "past the end")),
    (_raw([_kv("a", GGUFValueType.ARRAY, struct.pack("<IQ", 77, 1))], []), ("item type 77",)),
])
def test_hostile_headers_give_one_clear_line(tmp_path, raw, needles):
    _refused(_put(tmp_path, raw), *needles)


def test_every_truncation_of_a_real_file_is_refused(tmp_path, files):
    raw = files["qwen3"][0].read_bytes()
    reader = GGUFReader(files["qwen3"][0])
    cuts = sorted({1, 4, 8, 20, 24, 30, 100, 300, reader.data_offset // 3, reader.data_offset - 1,
                   reader.data_offset + 10, len(raw) - 1})
    for cut in cuts:
        _refused(_put(tmp_path, raw[:cut], f"cut{cut}.gguf"))


def test_a_corrupt_file_never_leaks_an_exception(tmp_path, files):
    """Flipping header bytes gives a TcalcError (or, rarely, a still-valid file), never another error."""
    raw = bytearray(files["gemma2"][0].read_bytes())
    end = GGUFReader(files["gemma2"][0]).data_offset
    rng = np.random.default_rng(0)
    for k in range(60):
        bad = bytearray(raw)
        for pos in rng.integers(4, end, size=3):
            bad[int(pos)] = int(rng.integers(0, 256))
        path = _put(tmp_path, bytes(bad), f"flip{k}.gguf")
        start = time.perf_counter()
        try:
            read_gguf(path)
        except TcalcError as exc:
            assert "\n" not in str(exc)
        assert time.perf_counter() - start < FAST_S


def _rewrite(tmp_path: Path, key: str, name: str, change: Callable[[list], list], meta_change: Callable[[dict], dict] = dict) -> Path:
    arch, meta, tensors, _ = CASES[key]()
    return write_gguf(tmp_path / name, arch, meta_change(meta), change(tensors))


def test_metadata_that_cannot_reproduce_the_tensors_is_refused(tmp_path):
    drop = _rewrite(tmp_path, "llama", "drop.gguf", lambda ts: [t for t in ts if t[0] != "blk.1.ffn_up.weight"])
    _refused(drop, "'blk.1.ffn_up.weight' is missing")
    extra = _rewrite(tmp_path, "llama", "extra.gguf", lambda ts: [*ts, ("blk.0.mystery.weight", (D, D))])
    _refused(extra, "'blk.0.mystery.weight'", "not part of the model")
    shape = _rewrite(tmp_path, "llama", "shape.gguf",
                     lambda ts: [(n, (D, 2 * F) if n == "blk.0.ffn_gate.weight" else ne) for n, ne in ts])
    _refused(shape, "'blk.0.ffn_gate.weight' has ggml shape [256, 1024]", "[256, 512]")
    ff = _rewrite(tmp_path, "llama", "ff.gguf", lambda ts: ts, lambda m: m | {"{arch}.feed_forward_length": 640})
    _refused(ff, "disagree")
    more = _rewrite(tmp_path, "llama", "layers.gguf", lambda ts: ts, lambda m: m | {"{arch}.block_count": 3})
    _refused(more, "'blk.2.")
    huge = _rewrite(tmp_path, "llama", "huge.gguf", lambda ts: ts, lambda m: m | {"{arch}.block_count": 10**9})
    _refused(huge, "block_count (1,000,000,000) is more than")
    kv = _rewrite(tmp_path, "llama", "kv.gguf", lambda ts: ts, lambda m: m | {"{arch}.attention.head_count_kv": [2, 2]})
    _refused(kv, "per-layer array")
    odd = _rewrite(tmp_path, "llama", "odd.gguf", lambda ts: ts, lambda m: m | {"{arch}.attention.key_length": 64,
                                                                                   "{arch}.attention.value_length": 32})
    _refused(odd, "key_length (64) differs from value_length (32)")


def test_not_a_regular_file(tmp_path):
    _refused(tmp_path / "missing.gguf", "does not exist")
    (tmp_path / "dir.gguf").mkdir()
    _refused(tmp_path / "dir.gguf", "is a directory")
    _refused(_put(tmp_path, b"", "empty.gguf"), "is empty")
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "pipe.gguf"
        os.mkfifo(fifo)
        _refused(fifo, "is a FIFO, not a regular file")
    if Path("/dev/null").exists():
        with pytest.raises(TcalcError, match="device or socket"):
            read_gguf(Path("/dev/null"))


def test_without_the_gguf_package(tmp_path, files, monkeypatch):
    monkeypatch.setitem(sys.modules, "gguf", None)  # `import gguf` raises ImportError
    message = _refused(files["llama"][0])
    assert message == "reading a .gguf file needs the gguf package: pip install 'transformer-calc[gguf]'"


# The reader and the modules it was split into (issue 35): the header reader and the families.
GGUF_PARTS = ("gguf", "gguf_reader", "gguf_families")


@pytest.mark.parametrize("part", GGUF_PARTS)
def test_the_module_is_a_pure_reader(part):
    import ast
    import importlib

    source = Path(importlib.import_module(f"transformer_calc.sources.{part}").__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    ours = {m for m in imported if m.startswith("transformer_calc")}
    # sources.files: the one rule for user files (regular files only)
    siblings = {f"transformer_calc.sources.{p}" for p in GGUF_PARTS}
    assert ours <= {"transformer_calc.errors", "transformer_calc.model.checkpoint", "transformer_calc.sources.files"} | siblings
    assert not imported & {"typer", "rich", "yaml", "pydantic", "numpy"}
    assert "print(" not in source


# ------------------------------------------------------------------ through the CLI and the API
def _cli_json(*argv: str) -> dict:
    import contextlib
    import io
    import json

    from transformer_calc.cli import run

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run([*argv, "--format", "json"])
    assert code == 0
    return json.loads(out.getvalue())


@pytest.mark.parametrize("key", ["llama", "qwen3moe", "gpt-oss", "deepseek2-mla"])
def test_inference_uses_the_files_bytes(files, key):
    """The issue's acceptance: `tcalc inference model.gguf --gpu rtx-4090 --S 8k` prices the
    weights as the file stores them, tensor by tensor."""
    path, _ = files[key]
    _, ckpt = read_gguf(path)
    data = _cli_json("inference", str(path), "--gpu", "rtx-4090", "--S", "8k", "--kv-dtype", "q8_0")
    assert data["inference"]["weight_dtype"] == "checkpoint"
    assert data["memory"]["per_gpu"]["weights_bytes"] == ckpt.total_bytes  # T = 1: every stored byte
    assert data["checkpoint"]["format"] == "gguf" and data["checkpoint"]["stored_bytes"] == ckpt.total_bytes
    assert data["checkpoint"]["unaccounted_params"] == 0
    bf16 = _cli_json("inference", str(path), "--gpu", "rtx-4090", "--S", "8k", "--kv-dtype", "bf16")
    # llama.cpp's q8_0 cache: 34 bytes per 32 values against bf16's 64
    assert data["kv_cache"]["total_bytes"] * 64 == bf16["kv_cache"]["total_bytes"] * 34


def test_params_and_api_on_a_gguf(files):
    import transformer_calc as tc

    path, _ = files["qwen3"]
    cli = _cli_json("params", str(path))
    assert cli["checkpoint"]["params"] == cli["params"]["total"]
    assert tc.params(str(path)).model_dump(mode="json") == cli
