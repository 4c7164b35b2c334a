"""`tcalc schema COMMAND` (issue 21): the JSON Schema of each command's typed result, its copy in
docs/schemas/, and every command's real `--format json` output checked against it."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from conftest import REPO
import transformer_calc.api as tc
from transformer_calc.cli import full_app, run
from transformer_calc.errors import UnknownNameError
from transformer_calc.render.common import schema_json
from transformer_calc.results import RESULT_TYPES, result_schema, result_type

SCHEMAS = REPO / "docs" / "schemas"
CHECKPOINT = str(REPO / "tests" / "data" / "checkpoints" / "tiny-llama-fp8")  # config.json + safetensors headers


def _out(argv: list[str], codes: tuple[int, ...] = (0,)) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = run(argv)
    assert code in codes, f"tcalc {' '.join(argv)} exited {code}"
    return out.getvalue()


def test_every_command_with_a_result_has_a_schema():
    commands = {c.name or c.callback.__name__ for c in full_app().registered_commands}
    assert set(RESULT_TYPES) == commands - {"schema", "web", "mcp"}  # web, mcp: doors onto the API, no result


@pytest.mark.parametrize("command", sorted(RESULT_TYPES))
def test_schema_prints_the_result_models_json_schema(command):
    text = _out(["schema", command])
    expected = result_type(command).model_json_schema(mode="serialization")
    assert json.loads(text) == expected == tc.schema(command)
    assert text == schema_json(expected)  # keys sorted, indent 2, a trailing newline


def test_an_unknown_command_is_one_error_line(capsys):
    assert run(["schema", "memroy"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == "Error: unknown command 'memroy'; did you mean 'memory'?"
    with pytest.raises(UnknownNameError, match="did you mean 'hardware'"):
        tc.schema("hardwre")


@pytest.mark.parametrize("command", sorted(RESULT_TYPES))
def test_docs_schema_file_is_up_to_date(command):
    path = SCHEMAS / f"{command}.json"
    assert path.exists(), f"{path.relative_to(REPO)} is missing: run `python tools/schemas.py`"
    assert path.read_text(encoding="utf-8") == schema_json(result_schema(command)), (
        f"{path.relative_to(REPO)} differs from `tcalc schema {command}`: run `python tools/schemas.py`")


def test_no_stale_schema_files():
    stale = sorted(p.name for p in SCHEMAS.glob("*.json") if p.stem not in RESULT_TYPES)
    assert not stale, f"docs/schemas/ has files of no command {stale}: run `python tools/schemas.py`"


# ------------------------------------------------------------------ real output against the schema
_TYPES = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def problems(value, schema: dict, defs: dict, path: str = "$") -> list[str]:
    """Where `value` breaks `schema`: keys (every key a property unless more are allowed, every
    required property present), types, enums, through $ref, anyOf, items and nested objects. The
    part of JSON Schema that pydantic's schemas use; enough to catch a key or a type that drifted."""
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[1]]
    if "anyOf" in schema:
        found = [problems(value, alt, defs, path) for alt in schema["anyOf"]]
        return [] if any(not p for p in found) else min(found, key=len)
    if "type" in schema and not _TYPES[schema["type"]](value):
        return [f"{path}: {type(value).__name__} {str(value)[:40]!r} is not {schema['type']}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path}: {value!r} is not one of {schema['enum']}"]
    if "const" in schema and value != schema["const"]:
        return [f"{path}: {value!r} is not {schema['const']!r}"]
    out: list[str] = []
    if isinstance(value, dict):
        props, more = schema.get("properties", {}), schema.get("additionalProperties", True)
        out += [f"{path}: required key {k!r} is missing" for k in schema.get("required", []) if k not in value]
        for k, v in value.items():
            if k in props:
                out += problems(v, props[k], defs, f"{path}.{k}")
            elif more is False:
                out.append(f"{path}: key {k!r} is not a property")
            elif isinstance(more, dict):
                out += problems(v, more, defs, f"{path}.{k}")
    elif isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            out += problems(v, schema["items"], defs, f"{path}[{i}]")
    return out


def top_level_keys(value, schema: dict, defs: dict) -> list[str]:
    """The brief's contract at the top level, stated on its own: every key of the output (of each
    row, for a list) is a property, and every required property is present."""
    rows = value if isinstance(value, list) else [value]
    out = []
    for row in rows:
        s = schema
        if "anyOf" in s:  # hardware: a list of accelerators, or one
            s = next(alt for alt in s["anyOf"] if ("items" in alt) == isinstance(value, list))
        s = s.get("items", s)
        if "$ref" in s:
            s = defs[s["$ref"].rsplit("/", 1)[1]]
        out += [f"key {k!r} is not a property" for k in row if k not in s["properties"]]
        out += [f"required key {k!r} is missing" for k in s.get("required", []) if k not in row]
    return out


def test_the_checker_finds_drift():
    schema = result_schema("hardware")
    defs = schema["$defs"]
    row = json.loads(_out(["hardware", "h100", "-f", "json"]))
    assert problems(row, schema, defs) == [] == top_level_keys(row, schema, defs)
    bad = {**row, "memory_bytes": 1.5, "extra": 1}
    del bad["vendor"]
    assert problems(bad, schema, defs)
    assert top_level_keys(bad, schema, defs) == ["key 'extra' is not a property", "required key 'vendor' is missing"]


# Representative command lines: together every optional section a command writes.
RUNS = [
    ["params", "--preset", "mixtral-8x7b", "--T", "2"],
    ["params", CHECKPOINT],
    ["memory", "--preset", "gpt2", "--gpu", "a100-80gb", "--P", "2"],
    ["memory", CHECKPOINT, "--S", "64"],
    ["memory", "--preset", "gpt2", "--finetune", "lora", "--offload", "optimizer", "--zero", "2", "--dp", "2"],
    ["flops", "--preset", "gpt2", "--tokens", "1e9", "--gpus", "8", "--gpu", "h100", "--budget", "1e21",
     "--recompute", "selective"],
    ["mfu", "--preset", "gpt2", "--global-batch", "64", "--step-time", "1", "--gpus", "8", "--gpu", "h100"],
    ["inference", "--preset", "gpt2", "--new-tokens", "8"],
    ["inference", CHECKPOINT, "--S", "64", "--gpu", "h100"],
    ["serve", "--preset", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--prompt-len", "2000", "--output-len",
     "500", "--ttft", "1", "--tpot", "0.05"],
    ["serve", CHECKPOINT, "--gpu", "h100", "--gpus", "1", "--prompt-len", "64", "--output-len", "8"],
    ["train", "--preset", "gpt2", "--gpus", "8", "--global-batch", "64", "--tokens", "1e9", "--price-per-gpu-hour", "2"],
    ["train", "--preset", "gpt2", "--gpus", "8", "--global-batch", "64", "--offload", "optimizer", "--zero", "2"],
    ["plan", "--preset", "gpt2", "--gpus", "8", "--global-batch", "64"],
    ["sweep", "--preset", "llama-2-7b", "--B", "1,2", "--T", "1,3", "--gpu", "a100-80gb"],
    ["sweep", "--preset", "llama-3-8b,mistral-7b", "--S", "2048,8192", "--gpu", "h100", "--dtype", "fp8", "--metrics",
     "kv_cache_bytes,inference_fits,tokens_per_s,decode_bound", "--weight-dtype", "fp8,bf16"],
    ["presets"],
    ["hardware"],
    ["hardware", "tpu-v4"],
]


@pytest.mark.parametrize("argv", RUNS, ids=[" ".join(a[:2]).replace(str(REPO) + "/", "") for a in RUNS])
def test_real_output_matches_its_schema(argv):
    schema = result_schema(argv[0])
    data = json.loads(_out([*argv, "-f", "json"]))
    assert top_level_keys(data, schema, schema.get("$defs", {})) == []
    assert problems(data, schema, schema.get("$defs", {})) == []


def test_check_output_matches_its_schema(tmp_path):
    ok = tmp_path / "ok.yaml"
    ok.write_text("model: {preset: gpt2}\ntraining: {S: 1024, B: 1}\ninference: {S: 512, B: 1}\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {preset: gpt2, n_layers: yes}\n")
    schema = result_schema("check")
    data = json.loads(_out(["check", str(ok), str(bad), "--gpu", "a100-80gb", "-f", "json"], codes=(2,)))
    assert top_level_keys(data, schema, schema.get("$defs", {})) == []
    assert problems(data, schema, schema.get("$defs", {})) == []
