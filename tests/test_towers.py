"""Towers (issue 22): a multimodal config is the whole model transformers builds (language model +
vision tower + projector), never a number that silently leaves a part out.

Golden numbers are what transformers 5.23 builds on the meta device (tools/crosscheck/hf_params.py
for whole models, tools/crosscheck/hf_towers.py for each vision model class alone, whose fixtures
are tests/data/towers/vision_*.json); this file needs neither torch nor transformers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from transformer_calc.errors import TcalcError
from transformer_calc.estimators.inference.roofline import (
    InferenceSpec,
    inference_memory,
    prefill_step,
    with_images,
)
from transformer_calc.estimators.params import count_params, total_params, tower_params
from transformer_calc.model.config import ModelConfig
from transformer_calc.sources import hf_towers
from transformer_calc.sources.hf import from_hf_config
from transformer_calc.sources.presets import gpu, preset_model

DATA = Path(__file__).resolve().parent / "data" / "towers"
TINY = json.loads((DATA / "tiny-gemma3.json").read_text())
VISION_FIXTURES = sorted(DATA.glob("vision_*.json"))


def model(cfg: dict, text_only: bool = False) -> ModelConfig:
    return ModelConfig.model_validate(from_hf_config(cfg, text_only=text_only))


# ---------------------------------------------------------------- each tower alone vs transformers
COUNT = {
    "siglip": hf_towers.siglip_vision,
    "llama4": hf_towers.llama4_vision,
    "pixtral": hf_towers.pixtral_vision,
    "qwen2_5_vl": lambda c: sum(hf_towers.qwen2_5_vl_vision(c)),
    "qwen3_vl": lambda c: sum(hf_towers.qwen3_vl_vision(c)),
    "qwen3_5": lambda c: sum(hf_towers.qwen3_5_vision(c)),  # Qwen3.5's tower, independent of its text part
    "glm4v": lambda c: sum(hf_towers.glm4v_vision(c)),
    "kimi_k25": hf_towers.kimi_k25_vision,
    "voxtral": hf_towers.voxtral_audio,  # VoxtralEncoder: an audio tower
}


@pytest.mark.parametrize("path", VISION_FIXTURES, ids=[p.stem for p in VISION_FIXTURES])
def test_vision_class_matches_transformers(path: Path):
    fixture = json.loads(path.read_text())
    assert COUNT[fixture["family"]](fixture["vision_config"]) == fixture["expected_params"], fixture["transformers_class"]


def test_every_family_has_fixtures():
    assert {json.loads(p.read_text())["family"] for p in VISION_FIXTURES} == set(COUNT)


@pytest.mark.parametrize(
    "family, expected",
    [
        # transformers 5.23, each config class's defaults, the class built alone (hf_towers.py)
        ("siglip", 92_884_224),  # SiglipVisionModel: 224/16, 12 layers, with the MAP head
        ("llama4", 415_856_640),  # Llama4VisionModel (Llama 4 Scout/Maverick's tower)
        ("qwen3_vl", 415_891_440 + 151_057_664),  # Qwen3VLVisionModel: encoder + merger + 3 DeepStack mergers
        ("qwen3_5", 415_891_440 + 37_759_232),  # Qwen3_5VisionModel: no DeepStack (modeling_qwen3_5.py)
        ("kimi_k25", 416_866_032),  # Kimi_K25VisionModel (MoonViT, Kimi K2.5's values)
    ],
)
def test_default_towers(family: str, expected: int):
    assert COUNT[family]({}) == expected


# ---------------------------------------------------------------- whole models
@pytest.mark.parametrize(
    "cfg, total, towers",
    [
        # transformers 5.23, AutoModelForImageTextToText of each config class's defaults (hf_params.py)
        ({"model_type": "gemma3"}, 2_723_312_896, 92_884_224 + 1_770_240),
        ({"model_type": "llama4"}, 108_225_039_360, 415_856_640 + 39_321_600),
        ({"model_type": "mistral3"}, 23_340_272_640, 403_305_472 + 35_652_608),
        ({"model_type": "qwen2_5_vl"}, 75_789_228_800, 2_826_102_528 + 256_922_624),
        ({"model_type": "glm4v"}, 10_292_777_472, 707_416_576 + 185_081_856),
        ({"model_type": "glm4v_moe"}, 104_372_866_880, 707_416_576 + 185_081_856),
        ({"model_type": "kimi_k25"}, 670_570_869_232, 416_866_032 + 54_277_888),
        ({"model_type": "voxtral"}, 4_676_271_104, 636_968_960 + 25_165_824),  # AutoModelForSpeechSeq2Seq
    ],
    ids=lambda v: v["model_type"] if isinstance(v, dict) else None,
)
def test_whole_model_equals_transformers(cfg: dict, total: int, towers: int):
    m = model(cfg)
    assert total_params(m) == total
    assert m.tower_params == towers
    assert count_params(m).total == total - towers  # the language model alone, as before
    assert total_params(model(cfg, text_only=True)) == total - towers


@pytest.mark.parametrize(
    "preset, total, language_model",
    [
        # published configs (tools/crosscheck/published_configs/SOURCES.md); transformers 5.23 builds these
        ("qwen3-vl-8b", 8_767_123_696, 8_190_735_360),  # the model card: "8.77B parameters"
        ("qwen3-vl-30b-a3b", 31_070_754_032, 30_532_122_624),
        ("kimi-k2.5", 1_026_879_353_328, 1_026_408_209_408),
    ],
)
def test_multimodal_presets(preset: str, total: int, language_model: int):
    m = preset_model(preset)
    assert (total_params(m), count_params(m).total) == (total, language_model)


def test_tiny_gemma3_by_hand():
    """docs/formulas.md §7: SigLIP h=32, F=40, p=4, 16 patches, one block; projector h x D + RMSNorm h."""
    t = tower_params(model(TINY))
    assert t is not None
    embed = 3 * 32 * 4 * 4 + 32 + 16 * 32
    block = 2 * 2 * 32 + 4 * (32 * 32 + 32) + (32 * 40 + 40) + (40 * 32 + 32)
    assert (t.vision, t.projector) == (embed + block + 2 * 32, 32 * 64 + 32) == (9128, 2080)
    assert (t.language_model, t.total) == (107_136, 118_344)  # transformers: 118,344


def test_lm_head_is_tied_as_the_wrapper_ties_it():
    text = {"model_type": "gemma3_text", "vocab_size": 500, "hidden_size": 64, "num_hidden_layers": 1,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
            "tie_word_embeddings": True}
    tied = model({**TINY, "text_config": text})
    untied = model({**TINY, "text_config": text, "tie_word_embeddings": False})  # the wrapper's flag wins
    assert total_params(untied) - total_params(tied) == 500 * 64  # modeling_gemma3.py: lm_head, untied
    # Qwen2.5-VL / GLM-4V: a text_config flag is forwarded to the wrapper (configuration_glm4v.py)
    glm = {"model_type": "glm4v", "text_config": {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 1,
                                                  "num_attention_heads": 2, "num_key_value_heads": 1,
                                                  "intermediate_size": 16}}
    assert total_params(model(glm)) - total_params(model({**glm, "text_config": {**glm["text_config"],
                                                                                 "tie_word_embeddings": True}})) == 100 * 32


# ---------------------------------------------------------------- text-only decoders are untouched
def test_text_only_decoder_has_no_towers():
    m = preset_model("llama-3-8b")
    assert m.towers is None and m.tower_params == 0 and tower_params(m) is None
    assert total_params(m) == count_params(m).total
    from transformer_calc.results.params import params_report

    dump = params_report(m).model_dump(mode="json")
    assert "towers" not in dump and "towers" not in dump["model"]


def test_text_only_drops_towers_and_says_so():
    from transformer_calc.results.params import params_report

    full, text = model(TINY), model(TINY, text_only=True)
    assert text.towers is not None and text.towers.text_only
    assert text == full.text_only()
    r = params_report(text)
    assert r.params.total == 107_136 and r.towers is not None and not r.towers.counted
    assert r.towers.note.startswith("text_only: the towers (vision 9,128, projector 2,080; 11,208 parameters)")
    assert params_report(full).params.total == 118_344


def test_load_source_text_only():
    from transformer_calc.sources.resolve import load_source

    src = load_source(hf_config=DATA / "tiny-gemma3.json", text_only=True)
    assert src.model.towers is not None and src.model.towers.text_only and total_params(src.model) == 107_136


def test_training_results_say_towers_are_not_included():
    from transformer_calc.results.flops import flops_request
    from transformer_calc.results.memory import memory_report
    from transformer_calc.model.config import Parallelism, Training, Workload

    m = model(TINY)
    mem = memory_report(m, Workload(seq_len=64), Training(), Parallelism(), None)
    assert mem.towers is not None and "not included" in mem.towers.note and mem.params.total == 107_136
    assert flops_request(m, {}, S=64).towers is not None


# ---------------------------------------------------------------- inference: weights and images
def test_inference_weights_include_the_towers():
    m, spec = model(TINY), InferenceSpec(batch_size=1, prompt_len=100)
    w, w_text = inference_memory(m, gpu("h100"), spec).weights_bytes, inference_memory(m.text_only(), gpu("h100"), spec).weights_bytes
    assert (w, w - w_text) == (118_344 * 2, 11_208 * 2)  # bf16, the towers whole
    tp = InferenceSpec(batch_size=1, prompt_len=100, tensor_parallel=2)  # not split by tensor parallelism
    assert inference_memory(m, gpu("h100"), tp).weights_bytes - inference_memory(m.text_only(), gpu("h100"), tp).weights_bytes == 11_208 * 2
    # a text step (no images) does not read the towers
    assert prefill_step(m, gpu("h100"), spec).weight_bytes == prefill_step(m.text_only(), gpu("h100"), spec).weight_bytes


def test_images_join_the_prompt_and_the_prefill():
    m = model(TINY)
    spec = with_images(m, InferenceSpec(batch_size=3, prompt_len=100), 2)
    assert (spec.prompt_len, spec.images) == (100 + 2 * 16, 2)
    text = InferenceSpec(batch_size=3, prompt_len=132)
    with_img, plain = prefill_step(m, gpu("h100"), spec), prefill_step(m, gpu("h100"), text)
    assert with_img.flops - plain.flops == 2 * 3 * 2 * (9128 * 16 + 2080 * 16)  # 2·B·images·(N_v·patches + N_p·tokens)
    assert with_img.weight_bytes - plain.weight_bytes == 11_208 * 2  # the tower read once
    assert with_images(m, text, 0) is text


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: with_images(preset_model("llama-3-8b"), InferenceSpec(batch_size=1, prompt_len=8), 1), "has none"),
        (lambda: with_images(model(TINY).text_only(), InferenceSpec(batch_size=1, prompt_len=8), 1), "text_only drops"),
        (lambda: with_images(model(TINY), InferenceSpec(batch_size=1, prompt_len=8), -1), "whole number >= 0"),
        (lambda: InferenceSpec(batch_size=1, prompt_len=8, images=True), "whole number >= 0"),
    ],
)
def test_images_errors(make, match: str):
    with pytest.raises(ValueError, match=match):
        make()


def test_inference_command_images_flag():
    from transformer_calc.results.inference import inference_command
    from transformer_calc.sources.resolve import load_source

    src = load_source(hf_config=DATA / "tiny-gemma3.json")
    r = inference_command(src, {"seq_len": 100, "images": 2, "gpu": "h100"}).model_dump(mode="json")
    assert (r["inference"]["prompt_len"], r["inference"]["images"]) == (132, 2)
    assert "images" not in inference_command(src, {"seq_len": 100, "gpu": "h100"}).model_dump(mode="json")["inference"]
    with pytest.raises(TcalcError, match="inference: images"):
        inference_command(load_source(preset="gpt2"), {"seq_len": 100, "images": 1})


# ---------------------------------------------------------------- hostile input
@pytest.mark.parametrize(
    "cfg, match",
    [
        ({"model_type": "gemma3", "vision_config": [1]}, "vision_config must be a JSON object"),
        ({"model_type": "gemma3", "vision_config": {"image_size": [896, 896]}}, r"\(vision_config: siglip_vision_model\): image_size \(<list of 2>\) must be a whole number"),
        ({"model_type": "gemma3", "vision_config": {"hidden_size": 0}}, "hidden_size"),
        ({"model_type": "llama4", "vision_config": {"pixel_shuffle_ratio": "half"}}, "pixel_shuffle_ratio"),
        ({"model_type": "kimi_k25", "vision_config": {"merge_kernel_size": [2]}}, "merge_kernel_size"),
        ({"model_type": "qwen3_vl", "vision_config": {"deepstack_visual_indexes": 3}}, "deepstack_visual_indexes"),
        ({"model_type": "gemma3", "tie_word_embeddings": "yes"}, "tie_word_embeddings"),
        ({"model_type": "qwen3_vl_text"}, "language model inside a qwen3_vl config"),
        ({"model_type": "gemma4", "vision_config": [1]}, "gemma4_vision must be a JSON object"),
        ({"model_type": "gemma3n", "vision_config": {"architecture": "resnet50"}}, r"architecture \(.resnet50.\) must be .mobilenetv5_300m_enc"),
    ],
)
def test_bad_configs_are_one_clear_error(cfg: dict, match: str):
    with pytest.raises(TcalcError, match=match):
        from_hf_config(cfg)


def test_towers_field_is_validated():
    with pytest.raises(ValueError, match="boolean, not a number"):
        ModelConfig.model_validate({"L": 1, "D": 8, "A": 2, "V": 10, "towers": {"vision": True}})
    with pytest.raises(ValueError):
        ModelConfig.model_validate({"L": 1, "D": 8, "A": 2, "V": 10, "towers": {"vision": -1}})


def test_qwen3_5_towers_ready_for_its_text_model():
    """Qwen3.5's towers, independent of its text part (another branch's Gated DeltaNet reader):
    transformers 5.23's Qwen3_5ForConditionalGeneration() builds model.visual with 453,650,672
    parameters (encoder 415,891,440 + merger 37,759,232; no DeepStack)."""
    from transformer_calc.sources.hf_base import Family, Reader

    top = Reader("qwen3_5", {}, Family(lambda c: {}, {"tie_word_embeddings": False}, ()))
    t = hf_towers.wrapper_towers("qwen3_5", {}, top, 4096)
    assert (t["vision"], t["projector"], t["image_tokens"]) == (415_891_440, 37_759_232, 576)
    # with its Gated DeltaNet text model read (sources.hf_hybrid), qwen3_5 is a wrapper like the others:
    # the whole model, the tower counted (tests/data/hf/qwen3_5_*.json hold transformers' totals)
    spec = from_hf_config({"model_type": "qwen3_5"})
    assert (spec["towers"]["vision"], spec["towers"]["projector"]) == (415_891_440, 37_759_232)


def test_checkpoint_weights_hold_the_towers_unless_text_only():
    """A multimodal checkpoint's stored bytes hold its towers (checkpoint.StoredWeights.towers_bytes):
    inference counts them once (not again from the config), and not at all with text_only."""
    from transformer_calc.estimators.inference.quant import stored_shard
    from transformer_calc.model.checkpoint import StoredWeights

    m = model(TINY)
    stored = StoredWeights(source="tiny", embedding_bytes=2 * 32_768, experts_bytes=0, rest_bytes=2 * 74_368,
                           towers_bytes=2 * 11_208, mtp_bytes=0, compute_dtype="bf16")
    assert stored_shard(m, stored).total_bytes == 2 * 118_344
    assert stored_shard(m.text_only(), stored).total_bytes == 2 * 107_136
    spec = InferenceSpec(batch_size=1, prompt_len=8, weight_dtype="checkpoint", stored=stored)
    assert inference_memory(m, gpu("h100"), spec).weights_bytes == 2 * 118_344  # the towers once


def test_params_per_rank_hold_the_towers_whole():
    from transformer_calc.estimators.params import tensor_parallel_params
    from transformer_calc.results.params import params_report

    m = preset_model("qwen3-vl-8b")
    w = params_report(m, T=2).weights
    assert w.params_per_rank == tensor_parallel_params(m, 2) + m.tower_params  # towers whole on every rank
    assert params_report(m).weights.bytes == 2 * 8_767_123_696


def test_gemma_3_4b_as_issue_22_reports_it():
    """Issue 22: "Gemma 3 4B: 3.88 B printed, 4.30 B built by transformers". The config of
    tests/data/hf/gemma3_gemma-3-4b-shape.json (the gemma-3-4b preset's text values and the SigLIP-So400m
    tower; hf_cases_towers.py says where each comes from): transformers 5.23 builds 4,300,079,472."""
    cfg = json.loads((Path(__file__).resolve().parent / "data" / "hf" / "gemma3_gemma-3-4b-shape.json").read_text())
    m = model(cfg["config"])
    assert total_params(m) == cfg["expected_params"] == 4_300_079_472
    assert count_params(m).total == total_params(preset_model("gemma-3-4b")) == 3_880_263_168  # the text preset
    assert (m.towers.image_tokens, m.towers.image_patches) == (256, 4096)  # mm_tokens_per_image; (896/14)^2
