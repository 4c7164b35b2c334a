"""docs/cli.md states each command's JSON keys; the typed results (transformer_calc.api) and the
real output must agree with it, both ways (issue 12: the JSON contract is checked, not prose)."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

from conftest import REPO
from transformer_calc import api
from transformer_calc.cli import run

DOC = (REPO / "docs" / "cli.md").read_text()

# Representative runs whose outputs together contain every optional section.
CHECKPOINT = str(REPO / "tests" / "data" / "checkpoints" / "tiny-llama-fp8")  # config.json + safetensors headers
MULTIMODAL = ["--hf-config", str(REPO / "tests" / "data" / "towers" / "tiny-gemma3.json")]  # a model with towers
PROFILE = str(REPO / "tests" / "data" / "calibrate" / "h100-torchtitan.yaml")  # tcalc calibrate's, on docs/examples
SERVE_PROFILE = str(REPO / "tests" / "data" / "calibrate" / "h100-serving.yaml")
RUNS = {
    "params": [["params", "--preset", "mixtral-8x7b", "--T", "2"], ["params", CHECKPOINT]],
    "memory": [["memory", "--preset", "gpt2", "--gpu", "a100-80gb", "--P", "2"], ["memory", CHECKPOINT, "--S", "64"],
               ["memory", "--preset", "gpt2", "--finetune", "lora", "--offload", "optimizer", "--zero", "2", "--dp", "2"]],
    "flops": [["flops", "--preset", "gpt2", "--tokens", "1e9", "--gpus", "8", "--gpu", "h100", "--budget", "1e21",
               "--recompute", "selective"], ["flops", "--preset", "qwen3-next-80b-a3b", "--S", "4k"]],  # a hybrid: mixers
    "mfu": [["mfu", "--preset", "gpt2", "--global-batch", "64", "--step-time", "1", "--gpus", "8", "--gpu", "h100"]],
    "inference": [["inference", "--preset", "gpt2", "--new-tokens", "8", "--static-batch"], ["inference", CHECKPOINT, "--S", "64", "--gpu", "h100"],
                  ["inference", "--preset", "qwen3-next-80b-a3b", "--S", "4k", "--gpu", "h200"],  # a hybrid: decode_state
                  ["inference", "--preset", "deepseek-v4-flash", "--S", "4k", "--gpu", "h100", "--ep", "8"],  # deepseek_v4_state
                  ["inference", "--preset", "gpt2", "--S", "64", "--profile", SERVE_PROFILE]],  # calibration
    "train": [["train", "--preset", "gpt2", "--gpus", "8", "--global-batch", "64", "--tokens", "1e9",
               "--price-per-gpu-hour", "2"],
              ["train", "--preset", "gpt2", "--gpus", "8", "--global-batch", "64", "--offload", "optimizer", "--zero", "2"],
              ["train", "--preset", "gpt2", "--gpus", "8", "--global-batch", "64", "--S", "1024", "--cp", "2",
               "--cp-comm-type", "all_gather", "--P", "2", "--virtual-stages", "2", "--micro-batch", "1",
               "--microbatch-group", "4"],  # assumptions.cp_comm_type (CP > 1), layout.microbatch_group
              ["train", "--preset", "qwen3-30b-a3b", "--L", "2", "--gpus", "8", "--ep", "8", "--global-batch", "8",
               "--dispatch-dtype", "fp8", "--moe-max-nodes", "4"],  # assumptions.dispatch_dtype, moe_max_nodes
              ["train", "--preset", "gpt2", "--gpus", "8", "--global-batch", "64", "--profile", PROFILE]],  # calibration
    "plan": [["plan", "--preset", "gpt2", "--gpus", "8", "--global-batch", "64"],
             ["plan", "--preset", "gpt2", "--gpus", "8", "--global-batch", "64", "--profile", PROFILE]],
    "calibrate": [["calibrate", str(REPO / "docs" / "examples" / "calibrate" / "runs.yaml")]],
}
for _command, _extra in (("params", []), ("memory", ["--S", "64"]), ("flops", ["--S", "64"]), ("inference", ["--S", "64"]),
                         ("train", ["--S", "64", "--gpus", "2", "--global-batch", "8"]),
                         ("plan", ["--S", "64", "--gpus", "2", "--global-batch", "8"])):
    RUNS[_command].append([_command, *MULTIMODAL, *_extra])
RESULTS = {"params": api.ParamsResult, "memory": api.MemoryResult, "flops": api.FlopsResult, "mfu": api.MfuResult,
           "inference": api.InferenceResult, "train": api.TrainResult, "plan": api.PlanResult,
           "calibrate": api.CalibrateResult}


def _section(command: str) -> str:
    start = DOC.index(f"## `tcalc {command}`")
    end = DOC.find("\n## ", start + 1)
    return DOC[start:end if end > 0 else None]


def _expand(text: str) -> set[str]:
    """Key paths of a listing: dotted (`a.b.c`, `a.b[]`) and braced (`a {b, c {d}}` -> a.b, a.c.d);
    `...`, `[, x]` optional markers and parenthesised prose are skipped."""
    text = re.sub(r"\([^()]*\)", " ", text).replace("[,", ",").replace("]", " ").replace("[", " ")
    paths, stack, last = set(), [], None
    for tok in re.findall(r"[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*|[{},]|\S", text):
        if tok == "{":
            stack.append(last or "")
        elif tok == "}":
            if stack:
                stack.pop()
            last = None
        elif re.fullmatch(r"[a-z][a-z0-9_.]*", tok):
            last = f"{stack[-1]}.{tok}" if stack and stack[-1] else tok
            paths.add(last)
        else:
            last = None if tok == "," else last
    return paths


def _documented_paths(command: str) -> set[str]:
    """Key paths of the section's JSON listing: the code block after "JSON keys:" (its key column:
    each line up to a run of three spaces) or the backticked spans of a "JSON:" paragraph."""
    text = _section(command)
    text = text[text.index("JSON"):]
    if text.startswith("JSON keys:\n\n```"):
        block = text.split("```")[1]
        listing = "\n".join(re.split(r"\s{3,}", line.strip())[0] for line in block.splitlines())
    else:
        listing = " ".join(re.findall(r"`([^`]*)`", text.split("\n\n")[0]))
    paths = {p for p in _expand(listing) if "." in p or p in RESULTS[command].model_fields}
    return {p for p in paths if not p.endswith((".md", ".py", ".yaml", ".json"))}  # file names in prose


def _flat(data, prefix=""):
    if isinstance(data, dict):
        for k, v in data.items():
            yield f"{prefix}{k}"
            yield from _flat(v, f"{prefix}{k}.")
    elif isinstance(data, list):
        for item in data[:3]:
            yield from _flat(item, prefix)


def _keys(command: str) -> set[str]:
    keys: set[str] = set()
    for argv in RUNS[command]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert run([*argv, "-f", "json"]) == 0
        keys |= set(_flat(json.loads(out.getvalue())))
    return keys


@pytest.mark.parametrize("command", sorted(RUNS))
def test_every_documented_key_is_in_the_output(command):
    keys = _keys(command)
    missing = {p for p in _documented_paths(command) if p not in keys}
    assert not missing, f"docs/cli.md documents keys `tcalc {command}` does not write: {sorted(missing)}"


@pytest.mark.parametrize("command", sorted(RUNS))
def test_every_top_level_key_is_documented_and_typed(command):
    text = _section(command)
    text = text[text.index("JSON"):]
    fields = set(RESULTS[command].model_fields)
    top = {k for k in _keys(command) if "." not in k}
    assert top <= fields, f"{command}: keys without a typed field: {sorted(top - fields)}"
    undocumented = {f for f in fields if not re.search(rf"(?<![\w.]){f}\b", text)}
    assert not undocumented, f"docs/cli.md does not name `tcalc {command}`'s keys {sorted(undocumented)}"


def test_the_key_listings_are_generated_from_the_result_models():
    """docs/cli.md's `<!-- keys:COMMAND -->` blocks are what tools/doc_keys.py writes from each
    command's result model (issue 21): a key added to or removed from a model without rerunning
    it fails here."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("doc_keys", REPO / "tools" / "doc_keys.py")
    doc_keys = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(doc_keys)
    text = (REPO / "docs" / "cli.md").read_text()
    assert doc_keys.render(text) == text, "docs/cli.md's key listings are stale: run python tools/doc_keys.py"
    for command in doc_keys.RESULT_TYPES:
        assert f"<!-- keys:{command} -->" in text
