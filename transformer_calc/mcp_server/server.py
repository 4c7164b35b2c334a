"""`tcalc mcp`: an MCP server (the official `mcp` SDK, the stdio transport; the `[mcp]` extra).

Each command of the Python API is a tool of the same name. Its input schema is compact (issue 38:
the whole listing fits an agent's context, `tools/list` under 20,000 characters): the command's
common options (`Request.common_options`) typed and described, and every other option as one
`options` object whose keys the `options` tool lists with their types and help (the request
model's full JSON Schema). Its output is the result model's JSON, `model_dump(mode="json")`, which
is what `tcalc <command> -f json` writes (the text content is that JSON; the structured content
the same object where the result is one; the `schema` tool gives its JSON Schema). A TcalcError
is a tool error (`is_error`) holding its one line, the option names in it spelled as the tool's
arguments (`seq_len`, not `--S`). docs/agents.md: which tool answers which question.

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


# When to use each tool: the first line of its description (a new command without an entry gets
# its API docstring's first sentence).
WHEN = {
    "params": "Use for: how many parameters (total, active, per component), weight bytes, per tensor-parallel rank.",
    "memory": "Use for: will TRAINING (or fine-tuning: finetune=lora/qlora) fit on a GPU - peak memory per GPU "
              "under parallelism, ZeRO and recompute.",
    "flops": "Use for: FLOPs per training step and training days for a token budget (tokens, gpus, gpu, mfu).",
    "mfu": "Use for: MFU/HFU from a measured step time or throughput.",
    "inference": "Use for: will INFERENCE fit on a GPU (weights, KV cache, quantized weight_dtype), prefill and "
                 "decode latency, concurrent sequences a paged KV cache holds.",
    "serve": "Use for: how fast will it serve / how many GPUs - deployment layouts against TTFT/TPOT targets, "
             "tokens/s, $ per million tokens.",
    "train": "Use for: how long will training take - step time, tokens/s, MFU, days and cost of one parallel "
             "layout (give tokens for days).",
    "plan": "Use for: which parallel layout (T, P, ZeRO, micro-batch, recompute) trains fastest on N GPUs.",
    "sweep": "Use for: a grid of points (comma lists, e.g. batch_size '1,2,4,8') priced as memory/flops/inference.",
    "check": "Use for: PASS/FAIL of job files against memory or latency limits.",
    "presets": "Use for: the model presets' names and key numbers (no arguments).",
    "hardware": "Use for: the accelerators (memory, bandwidth, peak FLOP/s); name one for its detail.",
    "schema": "Use for: the JSON Schema of a command's result (what its keys mean).",
    "options": "Use for: every option of a command (name, type, help) beyond the common ones, to pass in "
               "`options`.",
}
MODEL_HELP = "A preset (e.g. llama-3-8b: see presets), a Hugging Face repo id, a checkpoint folder, a .gguf or config.json."
OPTIONS_TOOL = "options"  # tcalc's own: the full input schema of a command (no CLI command)


def _help(o: Any) -> str:
    return o.help.replace(chr(92) + "[", "[")


def _short_help(o: Any) -> str:
    """An option's help line for the compact schema: a long `[default: ...]` note is left to the
    `options` tool (the default itself is what the command does without the argument)."""
    import re

    text = " ".join(_help(o).split())
    return re.sub(r"\s*\[default: ([^\]]{28,})\]", "", text)


def full_input_schema(command: str) -> dict[str, Any]:
    """The request model's JSON Schema, its properties the API's keywords (a field the CLI alone
    has, such as sweep's --plot, is left out), each described by its option's help line: what the
    `options` tool returns."""
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
        properties[name]["description"] = f"{_help(o)} (CLI: {flags})"
    if "required" in schema:
        schema["required"] = [n for n in schema["required"] if n in properties]
    schema.setdefault("type", "object")
    return schema


def _compact_type(prop: dict[str, Any]) -> dict[str, Any]:
    """A property's JSON type without pydantic's nesting ($ref, anyOf with null, titles): the
    values an agent can send (a number is also accepted as text, '8k')."""
    kinds: list[str] = []
    enum: list[Any] = []
    for branch in prop.get("anyOf", [prop]):
        if "$ref" in branch or "allOf" in branch:
            kinds.append("string")
        elif branch.get("type") == "array":
            kinds.append("array")
        elif "enum" in branch:
            enum += branch["enum"]
            kinds.append("string")
        elif branch.get("type") not in (None, "null"):
            kinds.append(branch["type"])
    kinds = sorted(set(kinds)) or ["string"]
    out: dict[str, Any] = {"type": kinds[0] if len(kinds) == 1 else kinds}
    if enum and len(kinds) == 1:
        out["enum"] = enum
    return out


def input_schema(command: str) -> dict[str, Any]:
    """The tool's compact input schema: the common options typed, each with its help line, and
    `options`, an object of any other option by name (the `options` tool lists them)."""
    if command == OPTIONS_TOOL:
        return {"type": "object", "properties": {"command": {"type": "string", "enum": list(TOOLS[:-1]),
                "description": "The tool whose options to list."}}, "required": ["command"],
                "additionalProperties": False}
    cls = _request(command)
    full = full_input_schema(command)
    options = cls.options()
    common = [n for n in cls.common_options() if n in full["properties"]]
    properties: dict[str, Any] = {}
    for name in common:
        o = options[name]
        aliases = [k for k, field in cls.keywords().items() if field == name and k != name and len(k) > 2]
        also = f" (also: {', '.join(aliases)})" if aliases else ""
        prop = _compact_type(full["properties"][name])
        prop["description"] = MODEL_HELP if name == "model" and o.positional else _short_help(o) + also
        properties[name] = prop
    rest = [n for n in full["properties"] if n not in common]
    from transformer_calc.requests.model import ModelRequest

    model_fields = set(ModelRequest.model_fields) - {"model"}
    named = [n for n in rest if n not in model_fields]
    if rest:
        properties["options"] = {
            "type": "object",
            "description": "Any other option by name: " + ", ".join(named)
            + ("; the model's sources and overrides (preset, hf_config, n_layers, d_model, ..., set)"
               if len(named) < len(rest) else "")
            + ". The `options` tool gives each one's type and help.",
        }
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    required = [n for n in full.get("required", []) if n in properties]
    if required:
        schema["required"] = required
    return schema


def output_schema(command: str) -> dict[str, Any] | None:
    """The result model's JSON Schema (`tcalc schema COMMAND`), where the result is a JSON object;
    not listed with the tool (it would be most of the listing), given by the `schema` tool."""
    if command in ("schema", OPTIONS_TOOL):
        return None
    schema = tc.schema(command)
    return schema if schema.get("type") == "object" else None


def description(command: str) -> str:
    if command == "schema":
        what = "`tcalc schema COMMAND`: the JSON Schema of a command's result (what its --format json writes)."
    elif command == OPTIONS_TOOL:
        what = "Every option of a tool: its full input schema (names, types, defaults, help)."
    else:
        doc = " ".join((tc.__dict__[command].__doc__ or "").split())
        what = doc.split(". ")[0].rstrip(".") + "." if doc else ""
    # the listing's budget: when to use it says what it gives; a command without an entry in WHEN (a
    # new one) is described by its API docstring's first sentence
    return WHEN.get(command) or f"Use for: {what}"


def tool_arguments(command: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The API's keywords from a tool call: the typed arguments and those in `options` (one
    option given in both places is an error naming it)."""
    arguments = dict(arguments)
    extra = arguments.pop("options", None) or {}
    if not isinstance(extra, dict):
        raise TcalcError(f"options must be an object of option names and values, got {type(extra).__name__}")
    both = sorted(set(extra) & set(arguments))
    if both:
        raise TcalcError(f"{both[0]} is given twice, as an argument and in options: give it once")
    return {**arguments, **extra}


def tool_words(command: str, message: str, arguments: dict[str, Any]) -> str:
    """An error's option names as the tool's arguments: `--prompt-len 2000` -> `prompt_len 2000`
    (the name the call used for that option, else the field's name), so an agent reads the names
    it can send."""
    import re

    if command in ("schema", OPTIONS_TOOL):
        return message
    cls = _request(command)
    keywords = cls.keywords()
    used = {keywords[k]: k for k in arguments if k in keywords}
    flag_field = {flag: name for name, o in cls.options().items() if o.api for flag in o.spellings()}

    def word(m: re.Match[str]) -> str:
        field = flag_field.get(m.group(0))
        return used.get(field, field) if field else m.group(0)

    return re.sub(r"--[A-Za-z][A-Za-z0-9-]*", word, message)


def call(command: str, arguments: dict[str, Any]) -> Any:
    """The tool's JSON: the API's result as `-f json` writes it (schema: the schema itself)."""
    from transformer_calc.sources.files import finite_or_error

    # null is "not given" in the tool's input schema (each optional field is `anyOf [..., null]`,
    # default null); the Python API refuses an explicit None, so a null argument is left out here
    arguments = {k: v for k, v in arguments.items() if v is not None}
    if command == OPTIONS_TOOL:
        name = arguments.get("command")
        if name not in TOOLS or name in ("schema",):
            raise TcalcError(f"command must be one of {', '.join(TOOLS[:-1])}, got {str(name)[:40]!r}")
        return full_input_schema(name)
    if command == "schema":
        request = _request(command).from_keywords(arguments, where="schema()")
        return tc.schema(request.name)
    data = tc.__dict__[command](**tool_arguments(command, arguments)).model_dump(mode="json")
    finite_or_error(data)  # as the CLI: a non-finite number is an error, never output
    return data


def server() -> Any:
    """The MCP server: tools/list and tools/call over the API."""
    import anyio.to_thread
    import mcp_types as types
    from mcp.server.lowlevel import Server

    # no output schema in the listing (issue 38: they were 250k characters); the `schema` tool gives them
    tools = [types.Tool(name=c, description=description(c), input_schema=input_schema(c)) for c in (*TOOLS, OPTIONS_TOOL)]
    has_object = {c: output_schema(c) is not None for c in (*TOOLS, OPTIONS_TOOL)}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        name, arguments = params.name, dict(params.arguments or {})
        if name not in has_object:
            return _error(f"unknown tool {clip(name, 40)}; the tools are {', '.join((*TOOLS, OPTIONS_TOOL))}")
        try:
            data = await anyio.to_thread.run_sync(lambda: call(name, arguments))
        except TcalcError as exc:
            return _error(tool_words(name, " ".join(str(exc).split()), arguments))
        except (TypeError, ValueError, OverflowError) as exc:  # a keyword the tool does not take; an estimator's refusal
            return _error(tool_words(name, " ".join(str(exc).split()), arguments))
        text = json.dumps(data, indent=2, ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(text=text)],
                                    structured_content=data if has_object[name] else None)

    srv: Any = Server("tcalc", version=__version__, instructions="Analytic cost calculator for decoder-only "
                      "transformers: each tool is a `tcalc` command; its arguments are the command's common options by "
                      "their descriptive names (seq_len, tensor, gpu), any other option in `options` (the `options` "
                      "tool lists them); its result is the command's --format json.",
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
