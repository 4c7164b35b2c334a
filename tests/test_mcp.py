"""`tcalc mcp` through the official SDK's client over stdio (issue 27): the tools are the commands,
their input schemas the request models' JSON Schemas, their results `tcalc <command> -f json`;
a bad value is a tool error holding the CLI's one line."""

from __future__ import annotations

import contextlib
import io
import json
import re
import os
import sys

import pytest

from conftest import REPO

pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")

from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

import transformer_calc.api as tc  # noqa: E402
from transformer_calc.cli import run  # noqa: E402
from transformer_calc.mcp_server.server import (  # noqa: E402
    OPTIONS_TOOL, TOOLS, full_input_schema, input_schema, output_schema, server)

# (tool, arguments, the same as a command line)
CALLS = [
    ("memory", {"model": "llama-3-8b", "seq_len": 4096, "gpu": "h100", "recompute": "selective"},
     ["memory", "llama-3-8b", "--S", "4096", "--gpu", "h100", "--recompute", "selective"]),
    ("inference", {"model": "llama-3-8b", "seq_len": 2048, "batch_size": 4, "gpu": "h100"},
     ["inference", "llama-3-8b", "--S", "2048", "--B", "4", "--gpu", "h100"]),
    ("serve", {"model": "llama-3-8b", "gpu": "h100", "gpus": 8, "prompt_len": 2000, "output_len": 500,
               "ttft_s": 1, "tpot_s": 0.05},
     ["serve", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--prompt-len", "2000", "--output-len", "500", "--ttft", "1",
      "--tpot", "0.05"]),
    ("train", {"model": "gpt2", "gpus": 8, "global_batch": 64, "seq_len": 1024},
     ["train", "gpt2", "--gpus", "8", "--global-batch", "64", "--S", "1024"]),
    ("plan", {"model": "gpt2", "gpus": 8, "global_batch": 64, "seq_len": 1024},
     ["plan", "gpt2", "--gpus", "8", "--global-batch", "64", "--S", "1024"]),
    ("params", {"model": "gpt2"}, ["params", "gpt2"]),
    ("flops", {"model": "gpt2", "seq_len": 1024, "tokens": "1e9", "gpus": 8, "gpu": "h100", "mfu": 0.4},
     ["flops", "gpt2", "--S", "1024", "--tokens", "1e9", "--gpus", "8", "--gpu", "h100", "--mfu", "0.4"]),
    ("mfu", {"model": "gpt2", "seq_len": 1024, "gpus": 8, "gpu": "h100", "global_batch": 64, "step_time": 0.5},
     ["mfu", "gpt2", "--S", "1024", "--gpus", "8", "--gpu", "h100", "--global-batch", "64", "--step-time", "0.5"]),
    ("sweep", {"model": "gpt2", "batch_size": "1,2", "seq_len": 1024, "gpu": "h100"},
     ["sweep", "gpt2", "--B", "1,2", "--S", "1024", "--gpu", "h100"]),
    ("presets", {}, ["presets"]),
    ("hardware", {"name": "h100"}, ["hardware", "h100"]),
]


def cli_json(argv: list[str]) -> object:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run([*argv, "-f", "json"]) == 0, argv
    return json.loads(out.getvalue())


def session_run(body):
    """Start `python -m transformer_calc mcp` and run `body(session)` against it."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "transformer_calc", "mcp"], cwd=str(REPO),
                                   env={"PYTHONPATH": str(REPO), **({"HOME": os.environ["HOME"]} if "HOME" in os.environ else {})})
    out = {}

    async def main():
        async with stdio_client(params, errlog=sys.stderr) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                out["value"] = await body(session)

    anyio.run(main)
    return out["value"]


@pytest.fixture(scope="module")
def answers():
    """One server for the module: the tool list and every call's result."""

    async def body(session):
        listed = await session.list_tools()
        results = [await session.call_tool(name, arguments) for name, arguments, _ in CALLS]
        errors = [await session.call_tool("memory", {"model": "llama-3-8b", "seq_len": "1e400"}),
                  await session.call_tool("memory", {"model": "no-such-preset"}),
                  await session.call_tool("memory", {"model": "gpt2", "nonsense": 1}),
                  await session.call_tool("schema", {"name": "memory"}),
                  await session.call_tool("serve", {"model": "gpt2", "gpu": "h100", "gpus": 1, "output_len": 16}),
                  await session.call_tool("memory", {"model": "gpt2", "options": {"zero": 1, "framework": "torchtitan"}}),
                  await session.call_tool(OPTIONS_TOOL, {"command": "train"})]
        return listed, results, errors

    return session_run(body)


def test_the_tools_are_the_commands_with_compact_schemas(answers):
    """Each tool's typed arguments are its command's common options; every other keyword field of
    the request model is named in `options` and described by the `options` tool (issue 38)."""
    listed, _, _ = answers
    tools = {t.name: t for t in listed.tools}
    assert list(tools) == [*TOOLS, OPTIONS_TOOL]
    for name, tool in tools.items():
        assert tool.input_schema == input_schema(name)
        assert tool.output_schema is None  # the schema tool gives it: the listing stays small
        assert tool.description.startswith("Use for:"), name
        cls = tc.__dict__[name].request if name not in ("schema", OPTIONS_TOOL) else None
        if cls is not None:
            keywords = {n for n, o in cls.options().items() if o.api}
            props = set(tool.input_schema["properties"])
            assert props - {"options"} == set(cls.common_options()) & keywords, name
            # every other keyword is listed in the full schema the options tool returns
            assert set(full_input_schema(name)["properties"]) == keywords, name
            assert tool.input_schema["additionalProperties"] is False
    assert full_input_schema("memory")["properties"]["seq_len"]["description"].endswith("(CLI: --S, --seq-len)")
    assert "prompt_len" in tools["serve"].input_schema["properties"]["seq_len"]["description"]


def test_the_listing_fits_an_agents_budget(answers):
    """tools/list, as the client receives it, is at most 20,000 characters (it was about 97,000
    in input schemas alone, 350,000 with the output schemas)."""
    listed, _, _ = answers
    size = len(listed.model_dump_json(by_alias=True, exclude_none=True))
    assert size <= 20_000, f"tools/list is {size:,} characters"


def test_an_agent_calls_each_tool_with_the_common_arguments_only():
    """The calls above use only each tool's typed (common) arguments: what an agent reading the
    listing would send."""
    for name, arguments, _ in CALLS:
        props = set(input_schema(name)["properties"]) - {"options"}
        keywords = tc.__dict__[name].request.keywords()  # a property's listed aliases ("also: prompt_len")
        assert {keywords.get(k, k) for k in arguments} <= props, (name, set(arguments) - props)


@pytest.mark.parametrize("i", range(len(CALLS)), ids=[c[0] for c in CALLS])
def test_a_tool_call_is_the_commands_json(answers, i):
    _, results, _ = answers
    name, _, argv = CALLS[i]
    result = results[i]
    assert not result.is_error, result.content
    expected = cli_json(argv)
    assert json.loads(result.content[0].text) == expected
    if output_schema(name) is not None:  # an object result (hardware's is a list or one GPU, presets' a list)
        assert result.structured_content == expected
    else:
        assert result.structured_content is None


def test_a_bad_call_is_a_tool_error_with_the_clis_line(answers):
    _, _, errors = answers
    too_big, unknown, keyword, schema, no_prompt, in_options, options = errors
    assert too_big.is_error and too_big.content[0].text.startswith("Error: seq_len='1e400': '1e400' is too large")
    assert unknown.is_error and "MODEL 'no-such-preset' is not a path, a preset" in unknown.content[0].text
    assert keyword.is_error and "unexpected keyword argument 'nonsense'" in keyword.content[0].text
    assert not schema.is_error and json.loads(schema.content[0].text) == tc.schema("memory")
    # the tool's argument names, not the CLI's flags (issue 38: it said "give --prompt-len")
    assert no_prompt.is_error and "--" not in no_prompt.content[0].text, no_prompt.content[0].text
    assert "seq_len" in no_prompt.content[0].text
    assert not in_options.is_error, in_options.content
    assert json.loads(in_options.content[0].text) == cli_json(["memory", "gpt2", "--zero", "1", "--framework",
                                                                "torchtitan"])
    assert not options.is_error and json.loads(options.content[0].text) == full_input_schema("train")


def test_no_telemetry():
    """The SDK's OpenTelemetry middleware (on by default in mcp 2.x) is removed."""
    assert server().middleware == []


def test_the_agent_guide_calls_run():
    """Each example call in docs/agents.md's table is a valid call of its tool (a Hub repo id and a
    job file on disk are left to their own tests)."""
    from transformer_calc.mcp_server.server import call

    text = (REPO / "docs" / "agents.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| [^|]+ \| `(\w+)`[^|]* \| `(\{.*?\})`", text, re.M)
    assert len(rows) >= 10
    for tool, arguments in rows:
        args = json.loads(arguments)
        if tool == "check" or "/" in str(args.get("model", "")):
            continue
        assert call(tool, args) is not None, tool
