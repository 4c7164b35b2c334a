"""One vocabulary (issue 12, docs/notation.md): a concept has one flag name and one JSON key in
every command that has it."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
import typer.main

from transformer_calc.cli import app, run

COMMANDS = typer.main.get_command(app).commands
# Python parameter names that are the same concept under a longer name.
SAME_CONCEPT = {"micro_batch": "B", "prompt_len": "S", "output_len": "new_tokens"}
# Grid axes take comma lists: sweep's --flash is "true,false", not a switch.
GRID_AXES = {("sweep", "flash")}


def _options():
    for command, c in COMMANDS.items():
        for p in c.params:
            if p.opts and p.opts[0].startswith("-"):
                yield command, SAME_CONCEPT.get(p.name, p.name), set(p.opts + p.secondary_opts)


def test_a_flag_means_one_concept_in_every_command():
    meaning = defaultdict(set)
    for command, concept, flags in _options():
        for flag in flags:
            meaning[flag].add(concept)
    assert {f: c for f, c in meaning.items() if len(c) > 1} == {}


def test_a_concept_has_the_same_flags_in_every_command():
    spellings = defaultdict(dict)
    for command, concept, flags in _options():
        if (command, concept) not in GRID_AXES:
            # command-specific extra names: inference's S is the prompt, train's B the micro-batch
            spellings[concept][command] = frozenset(flags - {"--prompt-len", "--micro-batch"})
    differing = {c: s for c, s in spellings.items() if len(set(s.values())) > 1}
    assert differing == {}


def _flat(data, prefix=""):
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _flat(v, f"{prefix}{k}.")
    else:
        yield prefix[:-1], data


def _json(argv):
    import io
    import contextlib

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run([*argv, "-f", "json"]) == 0
    return dict(_flat(json.loads(out.getvalue())))


# concept: (the value given, the JSON key that reports it in every command that takes the flag)
GLOSSARY_JSON = {
    "--S": ("1000", {"seq_len", "prompt_len"}),  # inference reports S as the prompt length
    "--T": ("2", {"tensor", "tensor_parallel"}),
    "--gpu": ("h100", {"gpu", "gpu.name"}),
    "--dtype": ("fp32", {"dtype", "weights.dtype", "compute_dtype", "precision"}),
}
RUNS = {
    "params": ["params", "--preset", "gpt2"],
    "memory": ["memory", "--preset", "gpt2"],
    "flops": ["flops", "--preset", "gpt2", "--tokens", "1e9", "--gpus", "8", "--gpu", "h100"],
    "mfu": ["mfu", "--preset", "gpt2", "--tokens-per-s", "1e5", "--gpus", "8", "--gpu", "h100"],
    "inference": ["inference", "--preset", "gpt2"],
    "train": ["train", "--preset", "gpt2", "--gpus", "8", "--global-batch", "64"],
}
EXPECTED = {"h100": "H100-SXM5-80GB", "1000": 1000, "2": 2, "fp32": "fp32"}


@pytest.mark.parametrize("flag", sorted(GLOSSARY_JSON))
def test_a_concept_has_one_json_key_holding_its_value(flag):
    value, keys = GLOSSARY_JSON[flag]
    for command, argv in RUNS.items():
        flags = {f for p in COMMANDS[command].params for f in p.opts}
        if flag not in flags:
            continue
        found = {k for k, v in _json([*argv, flag, value]).items() if k.split(".")[-1] in {x.split(".")[-1] for x in keys}
                 and v == EXPECTED[value]}
        assert found, f"{command} {flag} {value}: no JSON key of {sorted(keys)} holds {EXPECTED[value]!r}"


def test_p_and_dtype_are_one_concept_everywhere():
    """`--p` is bytes per value of the compute dtype on every command that has it (2 bf16, 4 fp32,
    1 fp8), the same as `--dtype`; disagreeing values are an error naming both."""
    for command, argv in RUNS.items():
        flags = {f for p in COMMANDS[command].params for f in p.opts}
        assert {"--p", "--dtype"} <= flags, command
        if command in ("flops", "mfu", "inference"):
            argv = [*argv, "--gpu", "h100"]
        assert _json([*argv, "--p", "4"]) == _json([*argv, "--dtype", "fp32"]), command
        assert run([*argv, "--p", "2", "--dtype", "fp32"]) == 2


# ---------------------------------------------------------------------------- API == CLI == job file (issue 21)
def _names(name: str) -> str:
    """One concept, one name: the seed's letters are the descriptive names (config.SECTION_ALIASES);
    --dtype is --p's concept (the compute dtype and its bytes); the CLI's `set_` is `set`."""
    from transformer_calc.model.config import SECTION_ALIASES

    name = {"set_": "set", "dtype": "p", "prompt_len": "seq_len", "output_len": "new_tokens",
            "micro_batch": "batch_size"}.get(name, name)
    return SECTION_ALIASES.get(name, name)


# What one door has and the other cannot: output files and formats (the CLI writes them; the API
# returns the object), the CLI's positional job files (the API's *files), the API's list of models.
CLI_ONLY = {"fmt", "plot", "x", "y", "series", "files"}
API_ONLY = {"models"}


def _cli_options() -> dict[str, set[str]]:
    import inspect

    from transformer_calc.cli import app

    return {(c.name or c.callback.__name__): {_names(p) for p in inspect.signature(c.callback).parameters} - CLI_ONLY
            for c in app.registered_commands}


@pytest.mark.parametrize("command", ["params", "memory", "flops", "mfu", "inference", "serve", "train", "plan", "sweep",
                                     "check", "presets", "hardware"])
def test_every_cli_option_is_an_api_keyword_and_back(command):
    """By introspection of both doors, not by examples: the command's typer parameters and the API
    function's accepted keywords are the same concepts."""
    import transformer_calc.api as api

    cli = _cli_options()[command]
    keywords = {_names(k) for k in api.__dict__[command].keywords} - API_ONLY
    assert cli - keywords == set(), f"`tcalc {command}` options the API lacks: {sorted(cli - keywords)}"
    assert keywords - cli == set(), f"tc.{command}() keywords the CLI lacks: {sorted(keywords - cli)}"


# Options that set how a command runs or what it prices once, not how a job is trained or served, so a
# job file's section does not hold them: the model source and overrides (the job file's model:),
# the step's size and budget (global batch, GPU count, token budget, price), the network model and
# the achievable matmul rate of `train`, speculative decoding's draft.
RUN_OPTIONS = {"model", "revision", "preset", "config", "hf_config", "L", "D", "A", "kv_heads", "head_dim", "E", "d_ff",
               "V", "K", "set", "global_batch", "global_batch_tokens", "gpus", "tokens", "price_per_gpu_hour",
               "node_size", "inter_node_gb_s", "matmul_efficiency", "draft", "mtp", "speculative_tokens",
               "acceptance_rate"}


def test_every_job_file_key_is_an_option_and_back():
    """A job file's training:, inference: and checks: keys are the options of the commands that read
    them, under the same names; the options that are not job-file keys are the RUN_OPTIONS above."""
    from transformer_calc.model.config import CHECK_KEYS, INFERENCE_KEYS, TRAINING_KEYS

    opts = _cli_options()
    training, inference, checks = ({_names(k) for k in keys} for keys in (TRAINING_KEYS, INFERENCE_KEYS, CHECK_KEYS))
    assert training - opts["memory"] == set(), "training: keys tcalc memory has no option for"
    # train derives data parallelism from --gpus and the micro-batches from the global batch
    assert training - opts["train"] == {"data", "micro_batches"}, training - opts["train"]
    assert inference - (opts["inference"] | opts["serve"]) == set()
    assert checks - opts["check"] == set()
    for command, section in (("memory", training), ("train", training), ("inference", inference),
                             ("serve", inference), ("check", checks)):
        extra = opts[command] - section - RUN_OPTIONS
        assert extra == set(), f"`tcalc {command}` options that are neither job-file keys nor run options: {sorted(extra)}"
