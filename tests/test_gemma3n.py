"""Gemma 3n's multimodal wrapper (`gemma3n`): the MobileNetV5 vision tower (timm), the USM audio
encoder and the two embedders (sources/hf_gemma3n.py; docs/formulas.md "Towers").

The golden numbers are what timm 1.0.31 and transformers 5.23 build on the meta device, measured by
tools/crosscheck/gemma3n_timm.py (tests/data/gemma3n_timm.json; timm needs torchvision, which CI's
torch build has none of, so the measurement is a fixture). The audio encoder and the embedders are
also built live in CI by tools/crosscheck/hf_towers.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from transformer_calc.errors import TcalcError
from transformer_calc.estimators.inference.roofline import InferenceSpec, prefill_step, with_images
from transformer_calc.estimators.params import tower_params
from transformer_calc.model.config import ModelConfig
from transformer_calc.sources import hf_gemma3n as G3N
from transformer_calc.sources.hf import from_hf_config
from transformer_calc.sources.presets import gpu

FIXTURE = json.loads((Path(__file__).parent / "data" / "gemma3n_timm.json").read_text())


def model(cfg: dict, text_only: bool = False) -> ModelConfig:
    return ModelConfig.model_validate(from_hf_config(cfg, text_only=text_only))


# ---------------------------------------------------------------- MobileNetV5 against timm
def test_mobilenetv5_equals_timm_block_by_block():
    """timm 1.0.31 mobilenetv5_300m_enc on the meta device: 294,126,912 parameters in 84 blocks and the
    fusion adapter; FlopCounterMode on one 768 x 768 image: 871,482,949,632 FLOPs (convolutions
    775,676,657,664, attention bmm 95,806,291,968)."""
    measured = FIXTURE["mobilenetv5_300m_enc"]
    params, flops, per_block = G3N.mobilenetv5()
    assert per_block == measured["params_per_block"]
    assert (params, flops) == (measured["params"], measured["flops_768"]) == (294_126_912, 871_482_949_632)
    assert sum(measured["flops_by_op"].values()) == flops


def test_mobilenetv5_arch_is_timms():
    """The transcription of _gen_mobilenet_v5: 3 + 5 + 37 + 39 blocks, widths 128/256/640/1280."""
    stages = G3N.MOBILENETV5_300M_ENC
    assert [len(s) for s in stages] == [3, 5, 37, 39]
    assert [G3N.decode_block(s[-1])["c"] for s in stages] == [128, 256, 640, 1280]
    assert G3N.decode_block("mqa_r1_k3_h12_v2_s1_d64_c640") == {"kind": "mqa", "r": 1, "k": 3, "h": 12, "v": 2, "s": 1,
                                                                 "d": 64, "c": 640, "a": 0}


def test_make_divisible_is_timms():
    assert [G3N.make_divisible(v) for v in (256, 3840, 7, 20, 100.0)] == [256, 3840, 8, 24, 104]


def test_mobilenetv5_flops_scale_with_the_image():
    """Halving the side quarters the convolutions; attention (n²·(n/v)²) falls by 16."""
    _, f768, _ = G3N.mobilenetv5()
    _, f384, _ = G3N.mobilenetv5(image_px=384)
    attention = FIXTURE["mobilenetv5_300m_enc"]["flops_by_op"]["aten.bmm"]
    assert f384 == (f768 - attention) // 4 + attention // 16


# ---------------------------------------------------------------- whole models against transformers + timm
@pytest.mark.parametrize("case", FIXTURE["models"], ids=[c["label"] for c in FIXTURE["models"]])
def test_whole_models_equal_transformers(case: dict):
    m = model(case["config"])
    tp = tower_params(m)
    assert tp is not None
    got = {"total": tp.language_model + tp.towers, "vision": tp.vision, "audio": tp.audio, "projector": tp.projector}
    assert got == case["expected"]


def test_e4b_defaults_by_part():
    """Gemma3nConfig() (the E4B shape): transformers 5.23 + timm build 7,818,517,072 parameters:
    language model 6,835,235,568 (head tied), MobileNetV5 294,126,912, audio 681,348,640, the two
    embedders 4,460,544 + 3,345,408. The Hugging Face blog "Gemma 3n fully available in the open-source
    ecosystem" (2025-06-26): E2B and E4B "actual parameter counts are 5B and 8B"."""
    m = model({"model_type": "gemma3n"})
    tp = tower_params(m)
    assert tp is not None
    assert (tp.language_model, tp.vision, tp.audio, tp.projector) == (6_835_235_568, 294_126_912, 681_348_640,
                                                                      4_460_544 + 3_345_408)
    assert m.towers is not None and (m.towers.image_tokens, m.towers.image_patches) == (256, 0)
    assert m.towers.vision_flops == 871_482_949_632
    assert G3N.gemma3n_audio(None) == (681_348_640, 1536)
    assert G3N.embedder(2048, 128, 2048) == 4_460_544  # embed_vision: 128 x 2048 + 2 norms + 2048 x 2048


def test_text_only_drops_the_towers_and_says_so():
    full, text = model({"model_type": "gemma3n"}), model({"model_type": "gemma3n"}, text_only=True)
    tf, tt = tower_params(full), tower_params(text)
    assert tf is not None and tt is not None and tf.counted and not tt.counted
    assert tt.language_model == tf.language_model == 6_835_235_568


# ---------------------------------------------------------------- inference: images
def test_an_image_is_256_tokens_and_the_encoders_flops():
    """One image: 256 soft tokens into the prompt; the prefill adds MobileNetV5's 871.5 GFLOPs (by layer,
    not 2·N·patches) and the projector's 2·N_p per token."""
    m = model({"model_type": "gemma3n"})
    assert m.towers is not None
    spec = with_images(m, InferenceSpec(batch_size=2, prompt_len=100), 1)
    assert spec.prompt_len == 356
    plain = prefill_step(m, gpu("h100"), InferenceSpec(batch_size=2, prompt_len=356))
    with_img = prefill_step(m, gpu("h100"), spec)
    assert with_img.flops - plain.flops == 2 * (871_482_949_632 + 2 * m.towers.projector * 256)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8), st.integers(0, 3))
def test_vision_flops_default_is_two_per_weight_per_patch(patches: int, flops: int):
    """A transformer tower (image_flops 0) keeps 2·N·patches; a given image_flops wins."""
    t = ModelConfig.model_validate({"L": 1, "D": 8, "A": 2, "V": 10,
                                    "towers": {"vision": 100, "image_patches": patches, "image_tokens": 1,
                                               "image_flops": flops}}).towers
    assert t is not None
    assert t.vision_flops == (flops or 2 * 100 * patches)


# ---------------------------------------------------------------- hostile input
@pytest.mark.parametrize(
    "cfg, match",
    [
        ({"vision_config": {"architecture": "resnet50"}}, r"vision_config: gemma3n_vision\): architecture \('resnet50'\) must be 'mobilenetv5_300m_enc'"),
        ({"vision_config": {"model_args": {"depth": 3}}}, "model_args .* must be absent"),
        ({"vision_config": "mobilenet"}, "vision_config must be a JSON object"),
        ({"vision_config": {"hidden_size": True}}, "hidden_size"),
        ({"vision_soft_tokens_per_image": 0}, "vision_soft_tokens_per_image"),
        ({"vision_soft_tokens_per_image": 1.5}, "vision_soft_tokens_per_image"),
        ({"audio_config": [1]}, "audio_config must be a JSON object"),
        ({"audio_config": {"sscp_conv_channel_size": [128]}}, "sscp_conv_channel_size"),
        ({"audio_config": {"sscp_conv_kernel_size": [[3, 3], [3]]}}, "sscp_conv_kernel_size"),
        ({"audio_config": {"sscp_conv_stride_size": [[2, True], [2, 2]]}}, "sscp_conv_stride_size"),
        ({"audio_config": {"input_feat_size": 1, "sscp_conv_kernel_size": [[3, 9], [3, 9]]}}, "input_feat_size"),
        ({"audio_config": {"hidden_size": 4, "conf_num_attention_heads": 8}}, "conf_num_attention_heads"),
        ({"audio_config": {"conf_num_hidden_layers": -1}}, "conf_num_hidden_layers"),
        ({"tie_word_embeddings": "yes"}, "tie_word_embeddings"),
    ],
)
def test_bad_configs_are_one_clear_error(cfg: dict, match: str):
    with pytest.raises(TcalcError, match=match):
        from_hf_config({"model_type": "gemma3n", **cfg})


def test_cli_params_json_breaks_down_the_towers(tmp_path: Path, capsys):
    from transformer_calc.cli import run

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gemma3n"}))
    code = run(["params", "--hf-config", str(path), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    towers = json.loads(out)["towers"]
    assert (towers["total"], towers["vision"], towers["audio"], towers["image_flops"]) == (
        7_818_517_072, 294_126_912, 681_348_640, 871_482_949_632)
    path.write_text(json.dumps({"model_type": "gemma3n", "vision_config": {"architecture": "resnet50"}}))
    code = run(["params", "--hf-config", str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1 and "architecture" in err


def test_training_refusal_names_gemma_3n_and_what_prices_it(tmp_path: Path, capsys):
    """Training memory of AltUp/LAuReL is not priced: the one line says Gemma 3n (not Gemma 4) and does not
    offer `memory` as an estimate that prices it."""
    from transformer_calc.cli import run

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gemma3n"}))
    code = run(["memory", "--hf-config", str(path), "--S", "64"])
    _, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "AltUp, LAuReL (Gemma 3n) (model" in err and "memory price" not in err
