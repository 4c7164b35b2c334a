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
