"""`tcalc mcp`: an MCP server (the official `mcp` SDK, the stdio transport; the `[mcp]` extra).

Each command of the Python API is a tool of the same name: its input schema is the command's
request model's JSON Schema (the fields the API takes as keywords, each described by its flag's
help line), its output the result model's JSON, `model_dump(mode="json")`, which is what
`tcalc <command> -f json` writes (the text content is that JSON; the structured content is the
same object where the result is one, with the result model's JSON Schema as the tool's output
schema). A TcalcError is a tool error (`is_error`) holding its one line, as the CLI's `Error:`.

Nothing leaves the machine but what the API itself fetches (a Hugging Face repo id as MODEL):
the SDK's OpenTelemetry middleware is removed, and the server writes nothing to disk. The stdio
transport has no port: only the client that started the process talks to it.
"""

from __future__ import annotations

import json
from typing import Any

import transformer_calc.api as tc
from transformer_calc import __version__
from transformer_calc.errors import TcalcError

# The tools: every command with an API function (web and mcp are doors, not calculations).
TOOLS = ("params", "memory", "flops", "mfu", "inference", "serve", "train", "plan", "rl", "sweep", "check", "presets",
         "hardware", "schema")


def _request(command: str) -> Any:
    if command == "schema":
        from transformer_calc.requests.catalog import SchemaRequest

        return SchemaRequest
    return tc.__dict__[command].request


def input_schema(command: str) -> dict[str, Any]:
    """The request model's JSON Schema, its properties the API's keywords (a field the CLI alone
    has, such as sweep's --plot, is left out), each described by its option's help line."""
    cls = _request(command)
    options = cls.options()
    schema = cls.model_json_schema()
    properties = schema.get("properties", {})
    for name in list(properties):
        o = options[name]
        if not o.api:
            del properties[name]
            continue
        flags = ", ".join(o.spellings()) if o.flags else "the positional argument"
        properties[name]["description"] = f"{o.help.replace(chr(92) + '[', '[')} (CLI: {flags})"
    if "required" in schema:
        schema["required"] = [n for n in schema["required"] if n in properties]
    schema.setdefault("type", "object")
    return schema


def output_schema(command: str) -> dict[str, Any] | None:
    """The result model's JSON Schema (`tcalc schema COMMAND`), where the result is a JSON object."""
    if command == "schema":
        return None
    schema = tc.schema(command)
    return schema if schema.get("type") == "object" else None


def description(command: str) -> str:
    if command == "schema":
        return "`tcalc schema COMMAND`: the JSON Schema of a command's result (what its --format json writes)."
    return " ".join((tc.__dict__[command].__doc__ or "").split())


def call(command: str, arguments: dict[str, Any]) -> Any:
    """The tool's JSON: the API's result as `-f json` writes it (schema: the schema itself)."""
    from transformer_calc.sources.files import finite_or_error

    if command == "schema":
        request = _request(command).from_keywords(arguments, where="schema()")
        return tc.schema(request.name)
    data = tc.__dict__[command](**arguments).model_dump(mode="json")
    finite_or_error(data)  # as the CLI: a non-finite number is an error, never output
    return data


def server() -> Any:
    """The MCP server: tools/list and tools/call over the API."""
    import anyio.to_thread
    import mcp_types as types
    from mcp.server.lowlevel import Server

    tools = [types.Tool(name=c, description=description(c), input_schema=input_schema(c), output_schema=output_schema(c))
             for c in TOOLS]
    has_object = {t.name: t.output_schema is not None for t in tools}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        name, arguments = params.name, dict(params.arguments or {})
        if name not in has_object:
            return _error(f"unknown tool {name!r}; the tools are {', '.join(TOOLS)}")
        try:
            data = await anyio.to_thread.run_sync(lambda: call(name, arguments))
        except TcalcError as exc:
            return _error(" ".join(str(exc).split()))
        except (TypeError, ValueError, OverflowError) as exc:  # a keyword the tool does not take; an estimator's refusal
            return _error(" ".join(str(exc).split()))
        text = json.dumps(data, indent=2, ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(text=text)],
                                    structured_content=data if has_object[name] else None)

    srv: Any = Server("tcalc", version=__version__, instructions="Analytic cost calculator for decoder-only "
                      "transformers: each tool is a `tcalc` command; its arguments are the command's options by their "
                      "descriptive names (seq_len, tensor, gpu); its result is the command's --format json.",
                      on_list_tools=list_tools, on_call_tool=call_tool)
    srv.middleware.clear()  # the SDK's OpenTelemetry spans: no telemetry
    return srv


def _error(message: str) -> Any:
    import mcp_types as types

    return types.CallToolResult(content=[types.TextContent(text=f"Error: {message}")], is_error=True)


def serve_stdio() -> None:
    """Serve on standard input and output until the client closes them."""
    import anyio
    from mcp.server.stdio import stdio_server

    srv = server()

    async def main() -> None:
        async with stdio_server() as (read, write):
            await srv.run(read, write, srv.create_initialization_options())

    anyio.run(main)
