"""Checkpoint folders: safetensors headers -> stored bytes per dtype and component, beside the
config's count; the stored bytes as inference's weights; hostile headers refused in one line.

The files are written here in the layouts the producing libraries use (transformers' BF16
checkpoints; DeepSeek-V3's FP8 e4m3 weights with an F32 `weight_scale_inv` per 128x128 block;
AutoGPTQ's QuantLinear: qweight I32 [in/8, out], qzeros I32 [in/g, out/8], scales F16 [in/g, out],
g_idx I32 [in]; AutoAWQ's WQLinear_GEMM: qweight I32 [in, out/8], qzeros I32 [in/g, out/8],
scales F16 [in/g, out]), zero-filled (only headers are read).
"""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys
import time

import pytest

from hubfake import parse_safetensors_header, safetensors_bytes, safetensors_index
from transformer_calc.cli import run
from transformer_calc.estimators.inference.quant import quantized_weights
from transformer_calc.sources.resolve import load_source

D, F, V, KV_HEADS, HEADS, LAYERS = 256, 512, 1024, 2, 4, 2
HEAD_DIM = D // HEADS

LLAMA = {
    "model_type": "llama", "hidden_size": D, "intermediate_size": F, "num_hidden_layers": LAYERS,
    "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "vocab_size": V,
    "max_position_embeddings": 2048, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


def linears() -> dict[str, tuple[int, int]]:
    """name -> (out, in) of every decoder Linear of the tiny llama."""
    out = {}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        out |= {
            p + "self_attn.q_proj": (D, D), p + "self_attn.k_proj": (KV_HEADS * HEAD_DIM, D),
            p + "self_attn.v_proj": (KV_HEADS * HEAD_DIM, D), p + "self_attn.o_proj": (D, D),
            p + "mlp.gate_proj": (F, D), p + "mlp.up_proj": (F, D), p + "mlp.down_proj": (D, F),
        }
    return out


def others(dtype: str = "BF16") -> dict[str, tuple[str, tuple[int, ...]]]:
    t = {"model.embed_tokens.weight": (dtype, (V, D)), "lm_head.weight": (dtype, (V, D)), "model.norm.weight": (dtype, (D,))}
    for i in range(LAYERS):
        t[f"model.layers.{i}.input_layernorm.weight"] = (dtype, (D,))
        t[f"model.layers.{i}.post_attention_layernorm.weight"] = (dtype, (D,))
    return t


def bf16_tensors() -> dict[str, tuple[str, tuple[int, ...]]]:
    return others() | {f"{name}.weight": ("BF16", shape) for name, shape in linears().items()}


def fp8_tensors() -> dict[str, tuple[str, tuple[int, ...]]]:
    t = others()
    for name, (o, i) in linears().items():
        t[f"{name}.weight"] = ("F8_E4M3", (o, i))
        t[f"{name}.weight_scale_inv"] = ("F32", (math.ceil(o / 128), math.ceil(i / 128)))
    return t


def gptq_tensors(awq: bool = False, group: int = 128) -> dict[str, tuple[str, tuple[int, ...]]]:
    t = others("F16")
    for name, (o, i) in linears().items():
        if awq:
            t[f"{name}.qweight"] = ("I32", (i, o // 8))
        else:
            t[f"{name}.qweight"] = ("I32", (i // 8, o))
            t[f"{name}.g_idx"] = ("I32", (i,))
        t[f"{name}.qzeros"] = ("I32", (i // group, o // 8))
        t[f"{name}.scales"] = ("F16", (i // group, o))
    return t


def write_folder(path, tensors, config=None, shards: int = 1) -> int:
    """A checkpoint folder; returns the bytes of tensor data it holds (file sizes less headers)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config or LLAMA))
    names = list(tensors)
    files = {}
    for k in range(shards):
        part = {n: tensors[n] for n in names[k::shards]}
        fname = "model.safetensors" if shards == 1 else f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        files[fname] = safetensors_bytes(part)
        (path / fname).write_bytes(files[fname])
    if shards > 1:
        (path / "model.safetensors.index.json").write_bytes(safetensors_index(files))
    data = 0
    for raw in files.values():
        (n,) = struct.unpack("<Q", raw[:8])
        data += len(raw) - 8 - n
    return data


def call_json(capsys, *argv: str) -> dict:
    code = run([*argv, "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_bf16_folder_counts_and_bytes(tmp_path, capsys):
    data_bytes = write_folder(tmp_path / "m", bf16_tensors(), shards=3)
    r = call_json(capsys, "params", str(tmp_path / "m"))
    ck = r["checkpoint"]
    assert ck["available"] and ck["format"] == "safetensors" and ck["files"] == 3
    assert ck["stored_bytes"] == data_bytes  # the files' own bytes
    assert ck["params"] == r["params"]["total"] == ck["expected_params"]
    assert ck["unaccounted_params"] == 0 and ck["unaccounted"] == {}
    assert ck["by_dtype"] == {"BF16": {"tensors": len(bf16_tensors()), "elements": r["params"]["total"], "bytes": data_bytes}}
    assert ck["by_component"]["embedding"]["params"] == V * D
    assert ck["by_component"]["head"]["params"] == V * D
    assert ck["compute_dtype"] == "bf16"
    assert r["model"]["name"] == "m"  # the folder's name when config.json has no _name_or_path


def test_fp8_block_scaled_folder(tmp_path, capsys):
    """DeepSeek-V3's layout: e4m3 weights + an F32 scale per 128x128 block; FP8 GEMMs."""
    cfg = LLAMA | {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128], "fmt": "e4m3"}}
    data_bytes = write_folder(tmp_path / "m", fp8_tensors(), cfg)
    r = call_json(capsys, "params", str(tmp_path / "m"))
    ck = r["checkpoint"]
    scales = sum(4 * math.ceil(o / 128) * math.ceil(i / 128) for o, i in linears().values())
    assert ck["stored_bytes"] == data_bytes and ck["scale_bytes"] == scales
    assert ck["params"] == r["params"]["total"] and ck["unaccounted_params"] == 0
    assert ck["quantization"] == "fp8" and ck["compute_dtype"] == "fp8"
    assert set(ck["by_dtype"]) == {"F8_E4M3", "F32", "BF16"}
    inf = call_json(capsys, "inference", str(tmp_path / "m"), "--S", "128", "--gpu", "h100")
    assert inf["inference"]["weight_dtype"] == "checkpoint" and inf["inference"]["compute_dtype"] == "fp8"
    assert inf["memory"]["per_gpu"]["weights_bytes"] == data_bytes


@pytest.mark.parametrize("awq", [False, True])
def test_gptq_awq_packs_equal_the_format_model(tmp_path, capsys, awq):
    """The int4 packs as AutoGPTQ / AutoAWQ store them hold exactly what quant.py's gptq-int4 /
    awq-int4 formulas count (codes, fp16 scales, packed zeros, GPTQ's g_idx; the rest fp16)."""
    method = "awq" if awq else "gptq"
    cfg = LLAMA | {"torch_dtype": "float16",
                   "quantization_config": {"quant_method": method, "bits": 4, "group_size": 128}}
    data_bytes = write_folder(tmp_path / "m", gptq_tensors(awq), cfg)
    r = call_json(capsys, "params", str(tmp_path / "m"))
    ck = r["checkpoint"]
    assert ck["params"] == r["params"]["total"] and ck["unaccounted_params"] == 0
    model = load_source(str(tmp_path / "m")).model
    assert model.weight_format == f"{method}-int4"
    assert quantized_weights(model, f"{method}-int4").total_bytes == data_bytes == ck["stored_bytes"]
    inf = call_json(capsys, "inference", str(tmp_path / "m"), "--S", "64")
    assert inf["memory"]["per_gpu"]["weights_bytes"] == data_bytes
    forced = call_json(capsys, "inference", str(tmp_path / "m"), "--S", "64", "--weight-dtype", "bf16")
    assert forced["inference"]["weight_dtype"] == "bf16"  # the user's weight dtype wins over the checkpoint
    assert forced["memory"]["per_gpu"]["weights_bytes"] == 2 * r["params"]["total"]


def test_tensor_parallel_shares(tmp_path, capsys):
    data_bytes = write_folder(tmp_path / "m", bf16_tensors())
    one = call_json(capsys, "inference", str(tmp_path / "m"), "--S", "64")["memory"]["per_gpu"]["weights_bytes"]
    two = call_json(capsys, "inference", str(tmp_path / "m"), "--S", "64", "--T", "2")["memory"]["per_gpu"]["weights_bytes"]
    plain = call_json(capsys, "inference", "--hf-config", str(tmp_path / "m" / "config.json"), "--S", "64", "--T", "2")
    assert one == data_bytes
    assert two == plain["memory"]["per_gpu"]["weights_bytes"]  # a bf16 checkpoint splits as bf16 weights do


def test_towers_and_mtp_are_reported_not_dropped(tmp_path, capsys):
    t = bf16_tensors() | {
        "model.vision_tower.blocks.0.attn.qkv.weight": ("BF16", (3 * 64, 64)),
        "model.multi_modal_projector.linear.weight": ("BF16", (D, 64)),
        f"model.layers.{LAYERS}.self_attn.q_proj.weight": ("BF16", (D, D)),  # a DeepSeek-style MTP layer
    }
    data_bytes = write_folder(tmp_path / "m", t)
    r = call_json(capsys, "params", str(tmp_path / "m"))
    ck = r["checkpoint"]
    towers = 3 * 64 * 64 + D * 64
    assert ck["unaccounted"]["towers"]["params"] == towers
    assert ck["unaccounted"]["mtp"]["params"] == D * D
    assert ck["unaccounted_params"] == towers + D * D
    assert ck["resident_bytes"] == data_bytes - 2 * D * D  # towers loaded, MTP not
    assert any("vision_tower" in name for name in ck["unaccounted"]["towers"]["examples"])


def test_overrides_drop_the_stored_bytes(tmp_path, capsys):
    write_folder(tmp_path / "m", bf16_tensors())
    r = call_json(capsys, "params", str(tmp_path / "m"), "--L", "4")
    assert r["checkpoint"] == {"available": False, "note": r["checkpoint"]["note"]}
    assert "overridden" in r["checkpoint"]["note"]
    inf = call_json(capsys, "inference", str(tmp_path / "m"), "--L", "4", "--S", "64")
    assert inf["inference"]["weight_dtype"] == "bf16"


def test_api_equals_cli(tmp_path, capsys):
    import transformer_calc as tc

    write_folder(tmp_path / "m", fp8_tensors(), LLAMA | {"quantization_config": {"quant_method": "fp8"}})
    assert tc.params(str(tmp_path / "m")).model_dump(mode="json") == call_json(capsys, "params", str(tmp_path / "m"))
    api = tc.inference(str(tmp_path / "m"), S=64, gpu="h100").model_dump(mode="json")
    assert api == call_json(capsys, "inference", str(tmp_path / "m"), "--S", "64", "--gpu", "h100")
    serve_api = tc.serve(str(tmp_path / "m"), prompt_len=64, output_len=16, gpu="h100", gpus=2).model_dump(mode="json")
    assert serve_api["checkpoint"]["available"]


def test_preset_json_unchanged(capsys):
    """A preset has no checkpoint: the JSON has no checkpoint key (byte-identical to before)."""
    assert "checkpoint" not in call_json(capsys, "params", "gpt2")
    assert "checkpoint" not in call_json(capsys, "inference", "gpt2", "--S", "64")


# ---------------------------------------------------------------------------- hostile headers
def _file(tmp_path, raw: bytes):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    (folder / "model.safetensors").write_bytes(raw)
    return folder


def _header(obj: object, data: bytes = b"") -> bytes:
    raw = json.dumps(obj).encode()
    return struct.pack("<Q", len(raw)) + raw + data


HOSTILE = {
    "length 2^63": struct.pack("<Q", 2**63) + b"{}",
    "length past the file": struct.pack("<Q", 4096) + b'{"a": 1}',
    "short file": b"\x01\x02",
    "truncated JSON": _header({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})[:-5],
    "not JSON": struct.pack("<Q", 4) + b"\xff\xfe\xfd\xfc",
    "overlapping": _header({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12)),
    "past the end": _header({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, bytes(8)),
    "wrong span": _header({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}, bytes(8)),
    "unknown dtype": _header({"a": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 1]}}, bytes(1)),
    "bool shape": _header({"a": {"dtype": "U8", "shape": [True], "data_offsets": [0, 1]}}, bytes(1)),
    "negative offset": _header({"a": {"dtype": "U8", "shape": [1], "data_offsets": [-1, 0]}}, bytes(1)),
    "deep nesting": struct.pack("<Q", 4000) + b"[" * 2000 + b"]" * 2000,
    "NaN literal": _header({"a": 1}).replace(b"1", b"NaN")[:0] + struct.pack("<Q", 10) + b'{"a": NaN}',
    "duplicate names": struct.pack("<Q", 120) + (b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                                                  b'"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}').ljust(120) + bytes(2),
    "10^6 tensors": None,  # built in the test (a large header)
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_headers_one_line(tmp_path, case):
    raw = HOSTILE[case]
    if raw is None:
        body = b"{" + b",".join(b'"t%d":{"dtype":"U8","shape":[1],"data_offsets":[%d,%d]}' % (k, k, k + 1)
                                for k in range(1_000_000)) + b"}"
        raw = struct.pack("<Q", len(body)) + body + bytes(1_000_000)
    folder = _file(tmp_path, raw)
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "transformer_calc", "params", str(folder), "-f", "json"],
                         capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - start
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in out.stderr, out.stderr
    assert len(lines[0]) < 400
    assert elapsed < 5, elapsed


def test_fifo_shard_is_refused(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    os.mkfifo(folder / "model.safetensors")
    out = subprocess.run([sys.executable, "-m", "transformer_calc", "params", str(folder)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "not a regular file" in out.stderr


def test_index_naming_files_outside_the_folder(tmp_path, capsys):
    folder = tmp_path / "m"
    write_folder(folder, bf16_tensors(), shards=2)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": "../../etc/passwd"}}))
    assert run(["params", str(folder)]) == 2
    assert "must be a .safetensors file name" in capsys.readouterr().err


def test_shard_header_helper_roundtrip():
    raw = safetensors_bytes({"w": ("BF16", (3, 4))})
    assert parse_safetensors_header(raw)["w"]["data_offsets"] == [0, 24]


def test_lora_over_a_quantized_checkpoint_keeps_its_bytes(tmp_path, capsys):
    """LoRA over an FP8 checkpoint: the frozen weights as stored (transformers keeps them FP8), not
    at p = 2 bytes; full training and QLoRA keep their own weight bytes."""
    cfg = LLAMA | {"quantization_config": {"quant_method": "fp8"}}
    data_bytes = write_folder(tmp_path / "m", fp8_tensors(), cfg)
    args = ["memory", str(tmp_path / "m"), "--S", "128", "--finetune", "lora"]
    lora = call_json(capsys, *args)
    plain = call_json(capsys, "memory", "--hf-config", str(tmp_path / "m" / "config.json"), "--S", "128", "--finetune", "lora")
    total = lora["params"]["total"]
    assert lora["finetune"]["frozen_weight_format"].startswith("checkpoint (")
    assert lora["memory"]["weights_detail"]["frozen_bytes"] == data_bytes  # every parameter frozen, T = 1
    assert plain["memory"]["weights_detail"]["frozen_bytes"] == 2 * total
    assert lora["memory"]["peak_bytes"] < plain["memory"]["peak_bytes"]
    full = call_json(capsys, "memory", str(tmp_path / "m"), "--S", "128")
    full_plain = call_json(capsys, "memory", "--hf-config", str(tmp_path / "m" / "config.json"), "--S", "128")
    assert full["memory"]["per_gpu"] == full_plain["memory"]["per_gpu"]
