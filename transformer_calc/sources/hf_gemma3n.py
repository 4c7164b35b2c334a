"""The towers of Gemma 3n (`gemma3n`): its MobileNetV5 vision encoder, its USM audio encoder and the
two multimodal embedders, from a Hugging Face config.json.

The ground truth is transformers 5.23's models/gemma3n/ (configuration_gemma3n.py,
modeling_gemma3n.py `Gemma3nModel`) and, for the vision tower, timm 1.0.31: transformers builds
`vision_config` through `AutoModel.from_config`, a `TimmWrapperModel` around
`timm.create_model(vision_config.architecture)`, and Gemma 3n's architecture is timm's
`mobilenetv5_300m_enc` (timm/models/mobilenetv5.py `_gen_mobilenet_v5`, `MobileNetV5Encoder`).
MobileNetV5 is a convolutional network whose shape is fixed by that name (no config field sizes
it), so its count is derived here from timm's own block definitions (`MOBILENETV5_300M_ENC`, the
strings of `_gen_mobilenet_v5` verbatim) by the parameter and FLOP formulas of each block kind
(timm/models/_efficientnet_blocks.py `EdgeResidual`, `UniversalInvertedResidual`,
`MobileAttention`; timm/layers/attention2d.py `MultiQueryAttention2d`), not taken as one number.
Another `architecture`, or `model_args` that reshape it, are refused by name.

Checked (tools/crosscheck/gemma3n_timm.py, run where timm imports; its results are the fixture
tests/fixtures/gemma3n_timm.json, checked in CI by tests/test_gemma3n.py): the encoder's 294,126,912
parameters block by block against timm's modules, its forward FLOPs at 768 x 768 (871,482,949,632)
against FlopCounterMode, and whole Gemma3nForConditionalGeneration models against transformers
built on the meta device. The audio encoder and the embedders need no timm: CI builds them
(tools/crosscheck/hf_towers.py).

Conventions (docs/formulas.md "Towers"): `vision` is the MobileNetV5 encoder, `audio` the USM
conformer, `projector` the two `Gemma3nMultimodalEmbedder` (each with its hard-token embedding
table); an image is `vision_soft_tokens_per_image` language-model tokens (256), encoded at the
image processor's 768 x 768; its encoder FLOPs are the convolutions' and attention's, counted by
layer (`image_flops`), not 2·N·patches as for a vision transformer.
"""

from __future__ import annotations

from typing import Any

from transformer_calc.errors import TcalcError
from transformer_calc.sources.hf_base import Family, Reader

# ============================================================================ MobileNetV5 (timm)
ARCHITECTURE = "mobilenetv5_300m_enc"  # configuration_gemma3n.py Gemma3nVisionConfig.architecture default
IMAGE_PX = 768  # timm default_cfgs['mobilenetv5_300m_enc'] input_size (3, 768, 768); Gemma3nImageProcessor's size
STEM_CHANNELS = 64  # _gen_mobilenet_v5: stem_size=64 (ConvNormAct 3 -> 64, 3x3, stride 2, with bias)
RGB = 3
MSFA_OUT = 2048  # MobileNetV5Encoder: num_features = 2048 (the multi-scale fusion adapter's output channels)
MSFA_EXPANSION = 2  # MobileNetV5MultiScaleFusionAdapter expansion_ratio default
MSFA_STAGES = 2  # MobileNetV5Encoder msfa_indices=(-2, -1): the last two stages' outputs are fused

# timm 1.0.31 timm/models/mobilenetv5.py _gen_mobilenet_v5, the non-"base" arch_def, verbatim (block
# kind _ repeats _ options: k kernel, a start depthwise kernel, s stride, e expansion, c out channels,
# h heads, v key/value stride, d key/value dim).
_MQA_640 = ("mqa_r1_k3_h12_v2_s1_d64_c640", "uir_r1_a0_k0_s1_e2_c640")
_MQA_1280 = ("mqa_r1_k3_h16_s1_d96_c1280", "uir_r1_a0_k0_s1_e2_c1280")
MOBILENETV5_300M_ENC: tuple[tuple[str, ...], ...] = (
    ("er_r1_k3_s2_e4_c128", "er_r1_k3_s1_e4_c128", "er_r1_k3_s1_e4_c128"),
    ("uir_r1_a3_k5_s2_e6_c256", "uir_r1_a5_k0_s1_e4_c256", "uir_r1_a3_k0_s1_e4_c256", "uir_r1_a5_k0_s1_e4_c256",
     "uir_r1_a3_k0_s1_e4_c256"),
    ("uir_r1_a5_k5_s2_e6_c640", *("uir_r1_a5_k0_s1_e4_c640",) * 7, "uir_r1_a0_k0_s1_e1_c640", *_MQA_640 * 14),
    ("uir_r1_a5_k5_s2_e6_c1280", *_MQA_1280 * 19),
)  # fmt: skip


def make_divisible(v: float, divisor: int = 8, round_limit: float = 0.9) -> int:
    """timm/layers/helpers.py make_divisible: v rounded to a multiple of divisor, never below 90 % of v."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < round_limit * v else new_v


def decode_block(block: str) -> dict[str, Any]:
    """timm/models/_efficientnet_builder.py _decode_block_str for the kinds MobileNetV5 uses: the
    block kind and its integer options (r, k, a, s, e, c, h, v, d)."""
    kind, *options = block.split("_")
    out: dict[str, Any] = {"kind": kind, "a": 0, "v": 1}
    for option in options:
        out[option[0]] = int(option[1:])
    return out


def _out_side(side: int, stride: int) -> int:
    """'same' padding (mobilenetv5_300m_enc pad_type='same'): ceil(side / stride)."""
    return -(-side // stride)


def mobilenetv5(arch: tuple[tuple[str, ...], ...] = MOBILENETV5_300M_ENC, image_px: int = IMAGE_PX
                ) -> tuple[int, int, list[int]]:
    """(parameters, forward FLOPs for one image_px x image_px image, parameters per block) of timm's
    MobileNetV5Encoder built from `arch`. Convolutions have no bias (create_conv2d's default) but the
    stem's; every norm is an RmsNorm2d (a weight of its width); blocks other than EdgeResidual end in
    a LayerScale2d (a gamma of the output width; layer_scale_init_value=1e-5).

    Per block, with mid = make_divisible(in·e) and an output side n (the input side s_in):
    - er (EdgeResidual): conv_exp in→mid k×k (stride s), norm, conv_pwl mid→out 1×1, norm:
      params in·mid·k² + mid + mid·out + out; MACs n²·(in·mid·k² + mid·out).
    - uir (UniversalInvertedResidual): dw_start (a > 0: depthwise a×a on in, norm; it takes the
      stride when there is no dw_mid), pw_exp in→mid 1×1 + norm, dw_mid (k > 0: depthwise k×k on
      mid, stride s, norm), pw_proj mid→out 1×1 + norm, layer scale.
    - mqa (MobileAttention, MultiQueryAttention2d): norm on in; query in→h·d 1×1; key and value each
      [v > 1: depthwise k×k stride v on in + norm] and in→d 1×1 (one K/V head); output h·d→out;
      layer scale. Attention over n² queries and (n/v)² keys: 2·h·n²·(n/v)²·d MACs (QKᵀ and AV).
    FLOPs are 2·MACs of the convolutions and the attention matmuls (FlopCounterMode's count);
    norms, activations and the fusion adapter's resizing are element-wise and not counted."""
    side = _out_side(image_px, 2)
    params = RGB * STEM_CHANNELS * 9 + STEM_CHANNELS + STEM_CHANNELS  # conv_stem (bias) + norm
    macs = side * side * STEM_CHANNELS * RGB * 9
    per_block: list[int] = []
    stage_out: list[tuple[int, int]] = []  # (channels, side) at each stage end
    c_in = STEM_CHANNELS
    for stage in arch:
        for block in stage:
            b = decode_block(block)
            n, block_macs, side = _block_cost(b, c_in, side)
            macs += block_macs
            c_out = b["c"]
            per_block.append(n)
            params += n
            c_in = c_out
        stage_out.append((c_in, side))
    # MobileNetV5MultiScaleFusionAdapter: the last two stages upsampled to the larger side and
    # concatenated, a UniversalInvertedResidual without depthwise convs nor layer scale
    # (in → make_divisible(in·2) → 2048, each 1×1 with a norm), then pooled to 16×16 and a norm.
    fused = stage_out[-MSFA_STAGES:]
    c_fused, side = sum(c for c, _ in fused), max(s for _, s in fused)
    mid = make_divisible(c_fused * MSFA_EXPANSION)
    msfa = c_fused * mid + mid + mid * MSFA_OUT + MSFA_OUT + MSFA_OUT
    params += msfa
    macs += side * side * (c_fused * mid + mid * MSFA_OUT)
    return params, 2 * macs, per_block + [msfa]


def _block_cost(b: dict[str, Any], c_in: int, side: int) -> tuple[int, int, int]:
    """(parameters, MACs, output side) of one decoded MobileNetV5 block (mobilenetv5's docstring)."""
    c_out, s = b["c"], b["s"]
    macs = 0
    if b["kind"] == "er":
        mid, k = make_divisible(c_in * b["e"]), b["k"]
        side = _out_side(side, s)
        n = c_in * mid * k * k + mid + mid * c_out + c_out
        macs += side * side * (c_in * mid * k * k + mid * c_out)
    elif b["kind"] == "uir":
        mid, a, k = make_divisible(c_in * b["e"]), b["a"], b["k"]
        n = c_in * mid + mid + mid * c_out + c_out + c_out
        if a:
            side = _out_side(side, s if not k else 1)
            n += c_in * a * a + c_in
            macs += side * side * c_in * a * a
        macs += side * side * c_in * mid
        if k:
            side = _out_side(side, s)
            n += mid * k * k + mid
            macs += side * side * mid * k * k
        macs += side * side * mid * c_out
    elif b["kind"] == "mqa":
        h, d, k, v = b["h"], b["d"], b["k"], b["v"]
        kv_side = _out_side(side, v)
        down = (c_in * k * k + c_in) if v > 1 else 0
        n = c_in + c_in * h * d + 2 * (down + c_in * d) + h * d * c_out + c_out
        macs += side * side * (c_in * h * d + h * d * c_out)
        macs += 2 * kv_side * kv_side * ((c_in * k * k if v > 1 else 0) + c_in * d)
        macs += 2 * h * side * side * kv_side * kv_side * d
    else:  # pragma: no cover - the arch above uses these three kinds only
        raise TcalcError(f"MobileNetV5 block kind {b['kind']!r} is not priced")
    return n, macs, side


# ============================================================================ the USM audio encoder
GEMMA3N_AUDIO_DEFAULTS: dict[str, Any] = {  # configuration_gemma3n.py Gemma3nAudioConfig
    "vocab_size": 128, "input_feat_size": 128, "hidden_size": 1536, "conf_num_attention_heads": 8,
    "conf_num_hidden_layers": 12, "conf_conv_kernel_size": 5, "sscp_conv_channel_size": [128, 32],
    "sscp_conv_kernel_size": [[3, 3], [3, 3]], "sscp_conv_stride_size": [[2, 2], [2, 2]],
}  # fmt: skip
GEMMA3N_VISION_DEFAULTS: dict[str, Any] = {  # configuration_gemma3n.py Gemma3nVisionConfig
    "architecture": ARCHITECTURE, "model_args": None, "hidden_size": 2048, "vocab_size": 128,
}


def _sub(key: str, cfg: Any, defaults: dict[str, Any]) -> Reader:
    """The sub-config `key` over its class's defaults; errors read "config.json (vision_config:
    gemma3n_vision): <field> (<value>) must be ..."."""
    if cfg is None:
        cfg = {}
    if not isinstance(cfg, dict):
        raise TcalcError(f"config.json (gemma3n): {key} must be a JSON object")
    kind = {"vision_config": "gemma3n_vision", "audio_config": "gemma3n_audio"}[key]
    return Reader(f"{key}: {kind}", cfg, Family(lambda c: {}, defaults, ()))



def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _two(c: Reader, name: str, depth: int) -> list[Any]:
    """Two entries (the two subsampling convolutions), each a whole number >= 1 (depth 1) or a pair
    of them (depth 2)."""
    value = c.values.get(name)
    if not isinstance(value, list):
        raise c._bad(name, "a list of two entries")
    ok = len(value) == 2 and all(
        _whole(x) if depth == 1 else isinstance(x, list) and len(x) == 2 and all(_whole(y) for y in x) for x in value)
    if not ok:
        raise c._bad(name, "two whole numbers >= 1" if depth == 1 else "two [height, width] pairs of whole numbers >= 1")
    return value


def gemma3n_audio(cfg: Any) -> tuple[int, int]:
    """(parameters, hidden size) of modeling_gemma3n.py Gemma3nAudioEncoder (a USM conformer):
    - subsample_conv_projection: two Conv2d without bias (1 → c0 → c1, kernels kh×kw, strides; each
      with a CumulativeGroupNorm of its channels), the frequency axis padded 1 + 1 and reduced to
      f_i = (f_{i-1} + 2 − kw_i) // sw_i + 1 from input_feat_size; input_proj_linear c1·f_2 → h;
    - conf_num_hidden_layers conformer blocks, h_d = h // H: two feed-forward modules (pre/post
      RMSNorm, h → 4h → h), attention (pre_attn_norm; q/k/v h → H·h_d, the relative position's
      pos_proj h → H·h_d, per_dim_scale h_d; post h → h, post_norm), a light conv (pre norm,
      linear_start h → 2h, depthwise conv1d h × K, conv_norm, linear_end h → h) and a norm."""
    return _audio(_sub("audio_config", cfg, GEMMA3N_AUDIO_DEFAULTS))


def _audio(a: Reader) -> tuple[int, int]:
    """`gemma3n_audio` of an audio_config already read."""
    a.positive("hidden_size", "conf_num_attention_heads", "conf_num_hidden_layers", "conf_conv_kernel_size",
               "input_feat_size")
    h, H, K = a.int("hidden_size"), a.int("conf_num_attention_heads"), a.int("conf_conv_kernel_size")
    c0, c1 = _two(a, "sscp_conv_channel_size", 1)
    (kh0, kw0), (kh1, kw1) = _two(a, "sscp_conv_kernel_size", 2)
    (_, sw0), (_, sw1) = _two(a, "sscp_conv_stride_size", 2)
    f0 = (a.int("input_feat_size") + 2 - kw0) // sw0 + 1
    f1 = (f0 + 2 - kw1) // sw1 + 1
    if f0 < 1 or f1 < 1:
        raise a._bad("input_feat_size", f"wide enough for the subsampling kernels (it leaves {min(f0, f1)} frequencies)")
    hd = h // H
    if hd < 1:
        raise a._bad("conf_num_attention_heads", f"at most hidden_size ({h})")
    W = H * hd
    subsample = kh0 * kw0 * c0 + c0 + c0 * c1 * kh1 * kw1 + c1 + c1 * f1 * h
    feed_forward = h + h * 4 * h + 4 * h * h + h
    attention = h + 4 * h * W + hd + h * h + h
    light_conv = h + 2 * h * h + h * K + h + h * h
    block = 2 * feed_forward + attention + light_conv + h
    return subsample + a.int("conf_num_hidden_layers") * block, h


def embedder(hidden: int, vocab: int, text_hidden: int) -> int:
    """modeling_gemma3n.py Gemma3nMultimodalEmbedder: embedding vocab x hidden (hard tokens),
    hard/soft RMSNorm(hidden), embedding_projection hidden → D (no bias), a post norm without scale."""
    return vocab * hidden + 2 * hidden + hidden * text_hidden


def gemma3n_towers(cfg: dict[str, Any], top: Reader, text_hidden: int) -> dict[str, int]:
    """modeling_gemma3n.py Gemma3nModel: vision_tower (timm), audio_tower, embed_vision and
    embed_audio, always built (a missing vision_config/audio_config is its class's defaults)."""
    v = _sub("vision_config", cfg.get("vision_config"), GEMMA3N_VISION_DEFAULTS)
    arch = v.values.get("architecture")
    if arch != ARCHITECTURE:
        raise v._bad("architecture", f"{ARCHITECTURE!r} (Gemma 3n's MobileNetV5, the one timm architecture "
                                     "tcalc counts)")
    if v.values.get("model_args") not in (None, {}):
        raise v._bad("model_args", "absent (timm keyword arguments that reshape MobileNetV5 are not read)")
    v.positive("hidden_size", "vocab_size")
    top.positive("vision_soft_tokens_per_image")
    vision, image_flops, _ = mobilenetv5()
    a = _sub("audio_config", cfg.get("audio_config"), GEMMA3N_AUDIO_DEFAULTS)
    audio, audio_hidden = _audio(a)
    a.positive("vocab_size")
    projector = (embedder(v.int("hidden_size"), v.int("vocab_size"), text_hidden)
                 + embedder(audio_hidden, a.int("vocab_size"), text_hidden))
    return {"vision": vision, "audio": audio, "projector": projector,
            "image_tokens": top.int("vision_soft_tokens_per_image"), "image_patches": 0, "image_flops": image_flops}
