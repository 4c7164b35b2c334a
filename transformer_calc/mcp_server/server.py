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
from transformer_calc.errors import TcalcError, clip

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

    # null is "not given" in the tool's input schema (each optional field is `anyOf [..., null]`,
    # default null); the Python API refuses an explicit None, so a null argument is left out here
    arguments = {k: v for k, v in arguments.items() if v is not None}
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
            return _error(f"unknown tool {clip(name, 40)}; the tools are {', '.join(TOOLS)}")
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


MAX_LINE_CHARS = 4 << 20  # one JSON-RPC message; a tool call is a few hundred bytes
MAX_DEPTH = 32  # nesting levels of one message (a tools/call with its arguments needs 4)
PARSE_ERROR, INVALID_REQUEST = -32700, -32600  # JSON-RPC 2.0, section 5.1


def gate(line: str) -> dict[str, Any] | None:
    """None when `line` is one JSON-RPC 2.0 message MCP can carry (passed on to the SDK), else the
    error answer (id null unless the message's own id was readable): -32700 for text that is not
    JSON, -32600 for JSON that is not one request (a batch, jsonrpc other than "2.0", no method, a
    float, boolean or null id, params that are not an object, nesting deeper than MAX_DEPTH). Blank
    lines are skipped by the caller."""
    from transformer_calc.sources.files import json_depth

    def error(code: int, message: str, id_: Any = None) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}

    if len(line) > MAX_LINE_CHARS:
        return error(INVALID_REQUEST, f"Invalid Request: a message of {len(line):,} characters; at most {MAX_LINE_CHARS:,}")
    if json_depth(line) > MAX_DEPTH:
        return error(INVALID_REQUEST, f"Invalid Request: nested deeper than {MAX_DEPTH} levels")
    try:
        message = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return error(PARSE_ERROR, f"Parse error: {clip(str(exc), 60)}")
    if isinstance(message, list):
        return error(INVALID_REQUEST, "Invalid Request: batches are not supported (MCP sends one message per line)")
    if not isinstance(message, dict):
        return error(INVALID_REQUEST, f"Invalid Request: expected a JSON object, not {type(message).__name__}")
    id_ = message.get("id")
    ok_id = ("id" not in message or isinstance(id_, str) or (isinstance(id_, int) and not isinstance(id_, bool))
             or (id_ is None and "method" not in message and "error" in message))  # an error answer about no id
    answer_id = id_ if ok_id else None
    if message.get("jsonrpc") != "2.0":
        return error(INVALID_REQUEST, f"Invalid Request: jsonrpc must be \"2.0\", not {clip(message.get('jsonrpc'), 20)}",
                     answer_id)
    if not ok_id:
        return error(INVALID_REQUEST, f"Invalid Request: id must be a string or an integer, not {clip(id_, 20)}")
    if "method" not in message:
        if "id" in message and ("result" in message or "error" in message):
            return None  # a response to the server's own request
        return error(INVALID_REQUEST, "Invalid Request: no method", answer_id)
    if not isinstance(message["method"], str):
        return error(INVALID_REQUEST, f"Invalid Request: method must be a string, not {clip(message['method'], 20)}", answer_id)
    if "params" in message and not isinstance(message["params"], dict):
        return error(INVALID_REQUEST, f"Invalid Request: params must be an object, not {clip(message['params'], 20)}",
                     answer_id)
    return None


class _GatedLines:
    """Standard input as the SDK reads it (an async iterator of lines), with every line that is
    not a JSON-RPC message answered here (`gate`) and not passed on: the SDK answers a bad line
    with nothing at all."""

    def __init__(self, stdin: Any, stdout: Any, lock: Any) -> None:
        self.stdin, self.stdout, self.lock = stdin, stdout, lock

    def __aiter__(self) -> Any:
        return self._lines()

    async def _lines(self) -> Any:
        async for line in self.stdin:
            if not line.strip():
                continue
            answer = gate(line)
            if answer is None:
                yield line
                continue
            async with self.lock:
                await self.stdout.write(json.dumps(answer) + "\n")
                await self.stdout.flush()


class _LockedOut:
    """Standard output for the SDK's writer, sharing the gate's lock: one message per line."""

    def __init__(self, stdout: Any, lock: Any) -> None:
        self.stdout, self.lock = stdout, lock
        self._pending = ""

    async def write(self, text: str) -> None:
        self._pending += text

    async def flush(self) -> None:
        async with self.lock:
            text, self._pending = self._pending, ""
            await self.stdout.write(text)
            await self.stdout.flush()


def serve_stdio() -> None:
    """Serve on standard input and output until the client closes them. The wire is a private
    copy of each descriptor; fd 0 then reads /dev/null and fd 1 writes to stderr, so that nothing
    stray reaches the client (as the SDK's own stdio_server does)."""
    import io
    import os

    import anyio
    from mcp.server.stdio import stdio_server

    srv = server()
    wire_in, wire_out = os.dup(0), os.dup(1)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)

    async def main() -> None:
        lock = anyio.Lock()
        stdin = anyio.wrap_file(io.TextIOWrapper(os.fdopen(wire_in, "rb"), encoding="utf-8", errors="replace"))
        stdout = anyio.wrap_file(io.TextIOWrapper(os.fdopen(wire_out, "wb"), encoding="utf-8"))
        async with stdio_server(_GatedLines(stdin, stdout, lock), _LockedOut(stdout, lock)) as (read, write):  # type: ignore[arg-type]
            await srv.run(read, write, srv.create_initialization_options())

    anyio.run(main)
