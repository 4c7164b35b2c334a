"""One vocabulary (issue 12, docs/notation.md): a concept has one flag name and one JSON key in
every command that has it."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
import typer.main

from transformer_calc.cli import full_app, run

COMMANDS = typer.main.get_command(full_app()).commands
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
# One request model per command (requests/) declares its options; the CLI's parameters and the API's
# keywords are built from it. These tests read what was built (typer's command, the API function),
# not the declaration, so a door that drops or adds an option fails here.
from transformer_calc.cli import COMMANDS as TABLE, request_class  # noqa: E402

# What one door has and the other cannot: the CLI's output format and plot file (the API returns
# the object), the API's list of models (the CLI takes several MODEL arguments).
CLI_ONLY = {"fmt", "plot", "x", "y", "series", "output"}  # output: calibrate writes its profile (the API returns it)
API_ONLY = {"models"}


@pytest.mark.parametrize("command", sorted(TABLE))
def test_every_cli_option_is_an_api_keyword_and_back(command):
    """By introspection of both doors: the typer command's parameters are the request's fields, each
    flag's spelling is an API keyword for the same field, and the API takes no other keyword."""
    import transformer_calc.api as api

    cls = request_class(command)
    typer_command = COMMANDS[command]
    cli_fields = {p.name for p in typer_command.params} - {"fmt"}
    assert cli_fields == set(cls.model_fields) - API_ONLY, command
    if command in ("schema", "web", "mcp"):  # no API function: schema is tc.schema(name); web, mcp serve the API
        return
    keywords = api.__dict__[command].keywords
    for p in typer_command.params:
        if p.name in CLI_ONLY:
            continue
        for flag in p.opts:  # --S, --seq-len: S=, seq_len= (switch negatives --no-x are not keywords)
            if flag.startswith("--"):
                assert cls.keywords()[flag[2:].replace("-", "_")] == p.name, (command, flag)
                assert flag[2:].replace("-", "_") in keywords, (command, flag)
        assert p.name in keywords, (command, p.name)
    fields = {cls.keywords()[k] for k in keywords}
    assert fields == set(cls.model_fields) - CLI_ONLY, command


def test_an_api_keyword_is_the_cli_flag_in_effect():
    """S= and --S land in the same field of the same request, with the same parser."""
    from transformer_calc.requests.training import MemoryRequest

    api = MemoryRequest.from_keywords({"model": "gpt2", "S": "8k", "dp": 4, "head": False})
    assert (api.seq_len, api.data, api.head_activations) == (8192, 4, False)
    assert MemoryRequest.from_keywords({"model": "gpt2", "seq_len": 8192, "data_parallel": 4,
                                        "head_activations": False}) == api


# Options that set how a command runs or what it prices once, not how a job is trained or served, so a
# job file's section does not hold them: the model source and overrides (the job file's model:),
# the step's size and budget (global batch, GPU count, token budget, price), the network model and
# the achievable matmul rate and TP overlap of `train`, speculative decoding's draft.
RUN_OPTIONS = {"model", "revision", "hub_timeout", "preset", "config", "hf_config", "n_layers", "d_model", "n_heads", "n_kv_heads",
               "head_dim", "expansion", "d_ff", "vocab_size", "max_seq_len", "set", "text_only", "global_batch",
               "global_batch_tokens", "gpus", "tokens", "price_per_gpu_hour", "node_size", "inter_node_gb_s",
               "matmul_efficiency", "tp_comm_overlap", "moe_load_imbalance", "moe_a2a_overlap", "draft", "mtp", "speculative_tokens", "acceptance_rate", "files",
               "static_batch", "concurrency", "disaggregate",
               # what a run costs (requests/cost.py): run options, not job-file keys
               "price_kind", "prices", "pue", "node_overhead", "grid_intensity_g_per_kwh", "interruptions_per_gpu_day",
               "storage_gb_s", "checkpoint_mode", "checkpoint_interval_s", "restart_s",
               "profile",  # a calibrated time profile (tcalc calibrate), a run option
               "dispatch_dtype", "moe_max_nodes",  # train: how the MoE all-to-all's tokens travel (inference: a job key)
               "dtype"}  # training's --dtype names p's value (a job file's training: gives p)


def test_every_job_file_key_is_an_option_and_back():
    """A job file's training:, inference: and checks: keys are the fields of the commands that read
    them, under the same names; a field that is not a job-file key is one of the RUN_OPTIONS."""
    from transformer_calc.model.config import CHECK_KEYS, INFERENCE_KEYS, TRAINING_KEYS

    job = {c: request_class(c).job_keys() for c in ("memory", "train", "inference", "serve", "check")}
    assert job["memory"] == set(TRAINING_KEYS)
    # train derives data parallelism from --gpus and the micro-batches from the global batch
    assert set(TRAINING_KEYS) - job["train"] == {"data", "micro_batches"}
    assert job["train"] <= set(TRAINING_KEYS)
    assert job["inference"] | job["serve"] == INFERENCE_KEYS
    assert job["check"] == CHECK_KEYS
    for command in job:
        fields = set(request_class(command).model_fields)
        assert fields - job[command] <= RUN_OPTIONS, (command, sorted(fields - job[command] - RUN_OPTIONS))


# ---------------------------------------------------------------------------- docs/cli.md == the request models
def _section(text: str, command: str) -> str:
    start = text.index(f"## `tcalc {command}`")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else None]


def _table_flags(section: str) -> set[str]:
    """The flags a section's option tables name (a table row's first cell)."""
    import re

    flags = set()
    for line in section.splitlines():
        if line.startswith("| `-"):
            cell = line.split("|")[1]
            for flag in re.findall(r"`(--?[A-Za-z][\w-]*)(?:/--?[\w-]+)?(?: [A-Z]+)?`", cell):
                flags.add(flag)
            for flag in re.findall(r"(--[A-Za-z][\w-]*)", cell):
                flags.add(flag)
    return flags


@pytest.mark.parametrize("command", sorted(TABLE))
def test_docs_cli_md_lists_every_flag_of_every_command(command):
    """docs/cli.md's section of a command names every flag its request model declares (the model
    source and override flags once, in "Model source and overrides"), and names no flag the command
    lacks: the reference cannot drift from the one declaration."""
    from conftest import REPO

    from transformer_calc.requests.model import ModelRequest

    text = (REPO / "docs" / "cli.md").read_text()
    cls = request_class(command)
    shared = set(ModelRequest.model_fields) if issubclass(cls, ModelRequest) else set()
    declared = {f for name, o in cls.options().items() if name not in shared or command == "sweep" and name in
                ("model", "preset", "config") for f in o.spellings()}
    section = _section(text, command)
    named = _table_flags(section)
    missing = {f for f in declared if f"`{f}" not in section and f not in named}
    assert not missing, f"docs/cli.md's `tcalc {command}` does not name {sorted(missing)}"
    every = {f for o in cls.options().values() for f in o.spellings()} | {"--format", "-f", "--no-" + "x"}
    negatives = {f.split("/")[1] for o in cls.options().values() for f in o.flags if "/" in f}
    extra = named - every - negatives
    assert not extra, f"docs/cli.md's `tcalc {command}` table names flags it lacks: {sorted(extra)}"
