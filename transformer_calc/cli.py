"""The `tcalc` command line: request -> result -> render. The error boundary.

Each command's options are declared once, in its request model (requests/): this module builds the
command's typer parameters from the model's fields (`command_parameters`): the flags, help lines,
panels and parsers are the fields' `Opt`s, so a CLI flag, an API keyword and a job-file key are one
field. The command body validates the request, runs it (`requests.<family>.run_<command>`, which
the Python API calls too) and renders the typed result. Bad input prints one `Error: ...` line on
stderr and exits 2; nothing is printed on stdout and no traceback is shown. Heavy modules are
imported inside the commands, and only the invoked command is built (`_app_for`).
"""

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Annotated, Any, Optional, cast

import typer

from transformer_calc import __version__
from transformer_calc.render.common import OutputFormat


app = typer.Typer(
    name="tcalc",
    help="Analytic cost calculator for decoder-only transformers: parameters, memory, FLOPs, "
    "KV cache and latency, from cited formulas.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

OUTPUT = "Output"
FormatOpt = Annotated[
    OutputFormat, typer.Option("--format", "-f", help="Output format.", rich_help_panel=OUTPUT, case_sensitive=False)
]


def _short(value: Any) -> str:
    from transformer_calc.sources.files import clip

    return clip(value)


# ---------------------------------------------------------------------------- commands from requests
# command -> (its requests module, request class, its results module, body, its render module, table
# function): the whole of what differs between commands here. The request module declares the
# options; the results module's body (`run_<command>`, which the Python API calls too) prices them.
COMMANDS: dict[str, tuple[str, str, str, str, str, str]] = {
    "params": ("flops", "ParamsRequest", "params", "run_params", "params", "params_table"),
    "memory": ("training", "MemoryRequest", "memory", "run_memory", "memory", "memory_table"),
    "flops": ("flops", "FlopsRequest", "flops", "run_flops", "flops", "flops_table"),
    "mfu": ("flops", "MfuRequest", "flops", "run_mfu", "flops", "mfu_table"),
    "inference": ("inference", "InferenceRequest", "inference", "run_inference", "inference", "inference_table"),
    "serve": ("inference", "ServeRequest", "serve", "run_serve", "serve", "serve_table"),
    "train": ("train", "TrainRequest", "train", "run_train", "train", "train_table"),
    "plan": ("train", "PlanRequest", "train", "run_plan", "train", "plan_table"),
    "rl": ("rl", "RlRequest", "rl", "run_rl", "rl", "rl_table"),
    "sweep": ("sweep", "SweepRequest", "sweep", "run_sweep", "sweep", "sweep_table"),
    "check": ("catalog", "CheckRequest", "check", "run_check", "check", "check_lines"),
    "calibrate": ("calibrate", "CalibrateRequest", "calibrate", "run_calibrate", "calibrate", "calibrate_table"),
    "presets": ("catalog", "PresetsRequest", "catalog", "run_presets", "catalog", "presets_table"),
    "hardware": ("catalog", "HardwareRequest", "catalog", "run_hardware", "catalog", "hardware_table"),
    "schema": ("catalog", "SchemaRequest", "catalog", "run_schema", "common", "schema_json"),
    # the other doors: their bodies serve the API (web/, mcp_server.py); no result of their own
    "web": ("doors", "WebRequest", "", "", "", ""),
    "mcp": ("doors", "McpRequest", "", "", "", ""),
}
# The one-line summary and example of each command (its --help).
HELP = {
    "params": """Exact parameter count, per component, beside the seed's approximations.

    Example: tcalc params --preset llama-2-7b --format json
    """,
    "memory": """Training memory per GPU: weights, gradients, optimizer states, activations; fit finding.

    Example: tcalc memory --preset gpt3 --T 8 --sp --recompute selective --gpu a100-80gb
    """,
    "flops": """Model and hardware FLOPs per step, rules of thumb, training time, compute-optimal sizing.

    Example: tcalc flops --preset gpt3 --tokens 300e9 --gpus 1024 --gpu a100-80gb --mfu 0.45
    """,
    "mfu": """MFU and HFU from a measured step time (with the global batch) or throughput.

    Example: tcalc mfu --preset gpt3 --V 51200 --global-batch 64 --step-time 13.75 --gpus 64 --gpu a100-80gb
    """,
    "inference": """KV cache, inference memory per GPU, prefill and decode latency: the roofline bound and the
    expected time (achievable rates, kernel launches, collectives, sampling); the paged KV cache's
    serving capacity (KV blocks, concurrent sequences, the context x concurrency budget matrix).

    Example: tcalc inference --preset falcon-40b --T 4 --B 8 --S 2048 --new-tokens 256
    """,
    "serve": """Size a deployment against latency targets: layouts (T within a node, replicas, concurrency)
    under continuous batching, with TTFT, TPOT and throughput; the best first, rejections with reasons.

    Example: tcalc serve --preset llama-3.1-70b --gpu h100 --gpus 8 --prompt-len 2000 --output-len 500 --ttft 1 --tpot 0.05
    """,
    "train": """Training step time of a parallel layout: compute, communication, pipeline bubble; MFU.

    Settings come from the flags, then the job file's training: section (--config), then the defaults.
    Example: tcalc train --preset gpt3 --gpus 64 --gpu a100-80gb --T 8 --P 8 --sp --recompute selective --global-batch 64 --micro-batch 1 --S 2048
    """,
    "plan": """The fastest layouts that fit: T within a node, P, virtual stages, CP, EP, dp, micro-batch, recompute.

    Settings come from the flags, then the job file's training: section (--config), then the
    defaults; the layout (T, P, dp, CP, EP, ZeRO, micro-batch, recompute) is what plan chooses.
    Example: tcalc plan --preset llama-3-70b --gpus 1024 --gpu h100 --global-batch-tokens 4M --S 8192
    """,
    "rl": """RL post-training (GRPO, PPO): one step's generation, log-prob passes, updates and weight sync; memory per GPU per phase.

    Colocated (the engine asleep while the trainer works) or split pools; the long tail of response lengths.
    Example: tcalc rl --preset qwen2.5-7b --gpus 8 --gpu h100 --prompts-per-step 1024 --group-size 5 --max-response-len 1024
    """,
    "sweep": """A grid over models, B, S, T, P, dp, ZeRO, EP, CP, recompute, flash, GPUs and dtypes: one row per point.

    Every point is priced as `tcalc memory`, `tcalc flops` and `tcalc inference` price it, with the
    same flags and job-file sections. Without --sort, rows are streamed as they are computed.
    Example: tcalc sweep --preset llama-2-7b --B 1,2,4..64 --T 1,2,4,8 --gpu a100-80gb --fits-only --sort peak_bytes
    """,
    "check": """Validate job files and check them against limits: a CI gate.

    One line per file: PASS, FAIL (a check failed) or ERROR (invalid file). Exit code 0 when all
    pass, 1 when a check failed, 2 when a file or flag is invalid.
    Example: tcalc check configs/*.yaml --gpu a100-80gb --max-memory 70GiB
    """,
    "calibrate": """Fit the time profile's free constants to your measured runs; write a profile for --profile.

    Runs files (YAML or CSV) give each run's model, GPU and layout with its measured step time or
    tokens/s, TTFT/TPOT/throughput, or a Megatron / torchtitan / vllm bench serve / trtllm-bench log.
    Example: tcalc calibrate docs/examples/calibrate/runs.yaml --output my-cluster.yaml
    """,
    "presets": "List the model presets with their key numbers and sources.",
    "hardware": "List the accelerators: memory, bandwidth, dense peaks per dtype, λ_math, interconnect.",
    "schema": "Print the JSON Schema of a command's result: what its `--format json` writes (always JSON).",
    "web": """A local web page on the Python API: a page per command, its options in the URL, charts and every number.

    Needs the web extra: pip install 'transformer-calc\\[web]'. Binds 127.0.0.1 unless --host says otherwise.
    Example: tcalc web --port 8000, then open http://127.0.0.1:8000/memory?model=llama-3-8b&S=4096
    """,
    "mcp": """An MCP server on stdio: each command a tool (input: its request's JSON Schema; output: its -f json).

    Needs the mcp extra: pip install 'transformer-calc\\[mcp]'. For an MCP client's config: command tcalc, args ["mcp"].
    """,
}


def request_class(command: str) -> Any:
    module, cls, _, _, _, _ = COMMANDS[command]
    return getattr(importlib.import_module(f"transformer_calc.requests.{module}"), cls)


def _cli_parser(parse: Any) -> Any:
    """An Opt's parser for typer: its ValueError is typer's usage error (the flag named)."""

    def parser(text: Any) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None

    return parser


MORE_PANEL = "More options"  # an option in no panel that is not a common one


def command_parameters(cls: Any) -> list[inspect.Parameter]:
    """The typer parameters of a request model: one per field the command line has, from its Opt;
    the command's common options first, in their own panel (`Request.common_options`)."""
    params = []
    common = cls.common_options()
    options = cls.options()
    ordered = [*(n for n in common if n in options), *(n for n in options if n not in common)]
    for name in ordered:
        o = options[name]
        if not o.cli:
            continue
        field = cls.model_fields[name]
        required = field.is_required()
        default = ... if required else field.default
        if o.positional:
            tp: Any = list[str] if o.repeat else str
            info: Any = typer.Argument(metavar=o.metavar, help=o.help, show_default=False)
        else:
            extra: dict[str, Any] = {}
            if field.annotation is bool or field.annotation == Optional[bool]:
                tp = bool
            elif o.repeat:
                tp = list[str]
            elif field.annotation == Optional[Path]:
                tp = Path
            else:
                tp = str
                if o.parse is not None:
                    extra["parser"] = _cli_parser(o.parse)
                    # typer would show <str> (what it reads); show what the field holds
                    kinds = {t for t in (int, float) if t in getattr(field.annotation, "__args__", (field.annotation,))}
                    if kinds:
                        extra["metavar"] = "<float>" if float in kinds else "<int>"
            if "[default:" in o.help:  # the help line says the default (typer would say it again)
                extra["show_default"] = False
            # the common options form typer's first panel, "Options", beside --help (issue 38: memory
            # --help listed 66 options); the others keep their panels, those without one go after
            panel = None if name in common else o.panel or MORE_PANEL
            info = typer.Option(*o.flags, help=o.help, rich_help_panel=panel, **extra)
        if default is None:
            tp = Optional[tp]
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=Annotated[tp, info]))
    return params


def _request(cls: Any, values: dict[str, Any]) -> Any:
    """The request from typer's values: the parsers typer did not run (positionals, repeated
    flags) run here, each error naming its option."""
    from transformer_calc.errors import TcalcError

    options = cls.options()
    for name, o in options.items():
        if values.get(name) is not None and o.parse is not None and (o.positional or o.repeat):
            try:
                values[name] = o.parse(values[name])
            except ValueError as exc:
                flag = o.spellings()[0] if o.flags else (o.metavar or name.upper())
                raise TcalcError(f"{flag} {_short(values[name])}: {exc}") from None
    return cls.from_cli(values)


def _register(target: typer.Typer, command: str) -> None:
    """Add one command to `target`: its parameters are its request model's fields (+ --format)."""
    cls = request_class(command)

    def callback(**values: Any) -> None:
        fmt = values.pop("fmt", OutputFormat.table)
        req = _request(cls, values)
        BODIES.get(command, _default_body)(command, req, fmt)

    params = command_parameters(cls)
    if command not in ("schema", "web", "mcp"):  # schema writes JSON; web and mcp serve
        params.append(inspect.Parameter("fmt", inspect.Parameter.KEYWORD_ONLY, default=OutputFormat.table,
                                        annotation=FormatOpt))
    callback.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]  # typer reads it
    callback.__annotations__ = {p.name: p.annotation for p in params}
    callback.__name__ = command
    callback.__doc__ = HELP[command]
    target.command(name=command)(callback)


def _body(command: str) -> Any:
    _, _, module, run, _, _ = COMMANDS[command]
    return getattr(importlib.import_module(f"transformer_calc.results.{module}"), run)


def _table(command: str) -> Any:
    _, _, _, _, module, table = COMMANDS[command]
    return getattr(importlib.import_module(f"transformer_calc.render.{module}"), table)


def _note(text: str) -> None:
    from transformer_calc.errors import printable

    sys.stderr.write(f"note: {printable(text)}\n")


def _default_body(command: str, req: Any, fmt: OutputFormat) -> None:
    emit(_body(command)(req), fmt, _table(command))


def _with_notes(command: str, req: Any, fmt: OutputFormat) -> None:
    """train, plan, mfu: how a token count was read is said on stderr, once the estimate has
    succeeded (a note never precedes an `Error:` line)."""
    notes: list[str] = []
    report = _body(command)(req, notes.append)
    for text in notes:
        _note(text)
    emit(report, fmt, _table(command))


def _workload_body(command: str, req: Any, fmt: OutputFormat) -> None:
    """memory, flops: a long default S (or one beyond the context) is said on stderr."""
    report = _body(command)(req)
    job = _job(req)
    _note_seq_len(report_model(req), report.workload.seq_len, req.seq_len is not None or bool(job and "seq_len" in job.training))
    emit(report, fmt, _table(command))


def _inference_body(command: str, req: Any, fmt: OutputFormat) -> None:
    report = _body(command)(req)
    job = _job(req)
    _note_seq_len(report_model(req), report.inference.prompt_len,
                  req.seq_len is not None or bool(job and "seq_len" in job.inference), "--S (the prompt)")
    emit(report, fmt, _table(command))


def _serve_body(command: str, req: Any, fmt: OutputFormat) -> None:
    report = _body(command)(req)
    _note_seq_len(report_model(req), report.serve.prompt_len, True, "--prompt-len")
    emit(report, fmt, _table(command))


def _job(req: Any) -> Any:
    return req.source().job


def report_model(req: Any) -> Any:
    return req.source().model


def _check_body(command: str, req: Any, fmt: OutputFormat) -> None:
    from transformer_calc.errors import printable
    from transformer_calc.render.check import check_lines

    report = _body(command)(req)
    try:  # a reader that leaves early (`| head`) must not change check's verdict
        if fmt is OutputFormat.table:
            write(printable(check_lines(report), keep_newlines=True))  # human lines: a file's name escaped
        else:
            emit(report, fmt, None)
        _flush_stdout()
    except (PipeClosed, BrokenPipeError):
        _broken_pipe()
    if report.invalid:
        raise typer.Exit(2)
    if report.failed:
        raise typer.Exit(1)


def _hardware_body(command: str, req: Any, fmt: OutputFormat) -> None:
    from transformer_calc.render.catalog import gpu_detail, hardware_table

    emit(_body(command)(req), fmt, hardware_table if req.name is None else gpu_detail)


def _schema_body(command: str, req: Any, fmt: OutputFormat) -> None:
    from transformer_calc.render.common import schema_json

    write(schema_json(_body(command)(req)))


def _sweep_body(command: str, req: Any, fmt: OutputFormat) -> None:
    from transformer_calc.results.sweep import prepare_sweep

    sweep_run = prepare_sweep(req)
    plotting = _sweep_plot_args(sweep_run, req.plot, req.x, req.y, req.series) if req.plot is not None else None
    lengths = sweep_run.spec.axes.get("seq_len")
    training = sweep_run.spec.training_point
    for m in sweep_run.models.values():  # the default S a point takes (estimators.sweep: the command's)
        _note_seq_len(m, max(lengths) if lengths else m.training_seq_len if training else m.max_seq_len,
                      lengths is not None)
    from transformer_calc.render.sweep import SweepProgress

    with SweepProgress(sweep_run.spec.size) as progress:
        if plotting is None and fmt in (OutputFormat.csv, OutputFormat.json):
            from transformer_calc.render.sweep import sweep_csv, sweep_json

            rows = sweep_run.rows(progress)  # streamed: each row written as it is priced
            if fmt is OutputFormat.csv:
                pieces = sweep_csv(sweep_run.columns, rows)
            else:
                pieces = sweep_json(sweep_run.head(), rows, sweep_run.tail)
            for piece in pieces:
                write(piece)
            return
        from transformer_calc.render.sweep import TABLE_MAX_ROWS
        from transformer_calc.results.sweep import sweep_report

        keep = TABLE_MAX_ROWS if fmt is OutputFormat.table and plotting is None else None
        report = sweep_report(sweep_run, progress, keep=keep)
    if plotting is not None:
        from transformer_calc.render.sweep import plot_sweep

        plot_sweep(report, *plotting)
    if fmt is OutputFormat.csv:
        from transformer_calc.render.sweep import sweep_csv

        for piece in sweep_csv(sweep_run.columns, report.points):
            write(piece)
    else:
        from transformer_calc.render.sweep import sweep_table

        emit(report, fmt, sweep_table)


def _calibrate_body(command: str, req: Any, fmt: OutputFormat) -> None:
    """calibrate: the fit, then the profile written to --output (the result names the file)."""
    report = _body(command)(req)
    if req.output is not None:
        from transformer_calc.render.calibrate import profile_yaml
        from transformer_calc.errors import TcalcError

        try:
            req.output.write_text(profile_yaml(report.profile), encoding="utf-8")
        except OSError as exc:
            raise TcalcError(f"--output {_short(str(req.output))}: cannot write: {exc.strerror}") from None
        report = report.model_copy(update={"profile_file": str(req.output)})
    emit(report, fmt, _table(command))


def _door_body(command: str, req: Any, fmt: OutputFormat) -> None:
    """web, mcp: their dependencies (an optional extra) are imported here, by these commands only."""
    from transformer_calc.errors import TcalcError

    extra = {"web": ("starlette", "uvicorn", "jinja2", "multipart"), "mcp": ("mcp",)}[command]
    missing = [name for name in extra if importlib.util.find_spec(name) is None]
    if missing:
        raise TcalcError(f"tcalc {command} needs the {command} extra ({', '.join(missing)} missing); "
                         f"install it: pip install 'transformer-calc[{command}]'")
    if command == "web":
        from transformer_calc.web.app import serve

        serve(req.host, req.port)
    else:
        from transformer_calc.mcp_server.server import serve_stdio

        serve_stdio()


BODIES = {
    "web": _door_body, "mcp": _door_body,
    "memory": _workload_body, "flops": _workload_body, "inference": _inference_body, "serve": _serve_body,
    "train": _with_notes, "plan": _with_notes, "mfu": _with_notes, "check": _check_body,
    "hardware": _hardware_body, "schema": _schema_body, "sweep": _sweep_body, "calibrate": _calibrate_body,
}


MIN_TABLE_WIDTH = 80


def emit(data: Any, fmt: OutputFormat, table: Any) -> None:
    """Write a command's typed result (results/): text formats are its JSON form
    (`model_dump(mode="json")`) as-is; tables through rich. A result that holds NaN or an infinity
    is an error, never output (JSON has no such numbers)."""
    from transformer_calc.sources.files import finite_or_error

    plain = data.model_dump(mode="json")
    finite_or_error(plain)
    if fmt is OutputFormat.table:
        from transformer_calc.render.common import checkpoint_table, console as safe_console

        # a file in all but name: the rest is sys.stdout's. At least MIN_TABLE_WIDTH columns: a
        # narrower terminal (or COLUMNS=0, COLUMNS=5) would wrap numbers digit by digit, or print nothing
        console = safe_console(cast(IO[str], _Stdout()))
        if console.width < MIN_TABLE_WIDTH:
            console = safe_console(cast(IO[str], _Stdout()), width=MIN_TABLE_WIDTH)
        console.print(table(data))
        if getattr(data, "checkpoint", None) is not None:
            console.print(checkpoint_table(data.checkpoint))
    else:
        from transformer_calc.render.common import to_text

        write(to_text(plain, fmt))


class PipeClosed(Exception):
    """The reader of stdout went away. Not an OSError: click turns EPIPE into exit 1."""


class _Stdout:
    """sys.stdout for rich: a broken pipe becomes PipeClosed; everything else is delegated."""

    def write(self, text: str) -> int:
        return write(text)

    def flush(self) -> None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            raise PipeClosed() from None

    def __getattr__(self, name: str) -> Any:
        return getattr(sys.stdout, name)


def write(text: str) -> int:
    """Every byte of output goes through here (see PipeClosed)."""
    if sys.stdout is None:
        from transformer_calc.errors import TcalcError

        raise TcalcError("standard output is closed; redirect it to a file or /dev/null")
    try:
        return sys.stdout.write(text)
    except BrokenPipeError:
        raise PipeClosed() from None


def _version(value: bool) -> None:
    if value:
        write(f"tcalc {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", "-V", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
) -> None:
    """tcalc: analytic cost calculator for decoder-only transformers."""



LONG_DEFAULT_CONTEXT = 8192  # a default S above this is said on stderr (issue: silent 128k defaults)


def _note_seq_len(model: Any, used: int, explicit: bool, flag: str = "--S") -> None:
    """Say on stderr when S falls back to a long context window, or exceeds the model's context."""
    if not explicit and used > LONG_DEFAULT_CONTEXT:
        what = ("the model's context window (max_seq_len)" if used == model.max_seq_len
                else "the model's pre-training length (train_seq_len)")
        sys.stderr.write(f"note: S = {used:,}, {what}; give {flag} to use another length\n")
    elif explicit and used > model.max_seq_len:
        sys.stderr.write(
            f"warning: S = {used:,} exceeds the model's context window ({model.max_seq_len:,}); "
            "the numbers assume the model can run it\n"
        )



def _sweep_plot_args(sweep_run: Any, plot: Path, x: str | None, y: str | None, series: str | None) -> tuple[Any, ...]:
    """(path, x axis, y metric, series axis, capacity) for render.plot_sweep, checked before the
    sweep runs: a bad --plot, --x, --y or --series writes nothing."""
    from transformer_calc.errors import TcalcError
    from transformer_calc.requests.sweep_grid import axis_name

    if plot.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise TcalcError(
            f"--plot {_short(str(plot))}: name the format by the suffix (.png, .svg or .pdf); "
            "tcalc writes only the file you name"
        )
    axes, wanted = sweep_run.spec.axes, sweep_run.spec.metrics
    varying = [a for a, v in axes.items() if len(v) > 1]
    x_axis = axis_name(x) if x else next((a for a in varying if a not in ("model", "gpu")), varying[0] if varying else "batch_size")
    series_axis = axis_name(series) if series else next((a for a in varying if a != x_axis), None)
    for name, value, given in (("--x", x_axis, x), ("--series", series_axis, series)):
        if value is not None and value not in axes:
            raise TcalcError(f"{name} {_short(given or value)}: not an axis; choose from {', '.join(axes)}")
    y_metric = y or next((m for m in wanted if m not in ("fits", "inference_fits", "decode_bound")), None)
    if y_metric is None:
        raise TcalcError("--plot needs a numeric metric; add one to --metrics or give --y")
    if y_metric not in wanted:
        raise TcalcError(f"--y {_short(y_metric)}: not among --metrics ({', '.join(wanted)})")
    capacity = next(iter(sweep_run.gpus.values())).memory_bytes if len(sweep_run.gpus) == 1 else None
    return str(plot), x_axis, y_metric, series_axis, capacity


# ---------------------------------------------------------------------------- error boundary
MAX_MESSAGE_CHARS = 400  # an error is one line; values in it are clipped, the whole line too


def _fail(message: str, code: int) -> int:
    from transformer_calc.errors import printable

    line = printable(" ".join(str(message).split()))
    if len(line) > MAX_MESSAGE_CHARS:
        line = line[: MAX_MESSAGE_CHARS - 3] + "..."
    try:
        if sys.stderr is not None:  # started with stderr closed (2>&-): the exit code says it
            sys.stderr.write(f"Error: {line}\n")
            sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed or full: the exit code says it
        pass
    return code


def _usage_message(exc: Any, argv: list[str]) -> str:
    """The parser's message on one line, with the offending value when an option was given one."""
    message = " ".join(exc.format_message().split())
    param = getattr(exc, "param", None)
    opts = list(getattr(param, "opts", []) or [])
    if not opts or type(exc).__name__ != "BadParameter":
        return message
    values = [argv[i + 1] for i, tok in enumerate(argv[:-1]) if tok in opts]
    values += [tok.split("=", 1)[1] for tok in argv if "=" in tok and tok.split("=", 1)[0] in opts]
    if not values:
        return message
    from transformer_calc.errors import clip

    problem = message.split(": ", 1)[-1].removeprefix("Value error, ").rstrip(".")
    low = problem.lower()
    fix = next((f for key, f in _USAGE_FIXES if key in low), "see --help")
    return f"{' / '.join(opts)} ({clip(values[-1], 40)}): {problem[:1].lower() + problem[1:]}; {fix}"


_USAGE_FIXES = (
    ("valid integer", "use a whole number"),
    ("valid number", "use a number"),
    ("is not one of", "choose one of those"),
    ("greater than", "use a larger value"),
    ("less than", "use a smaller value"),
)


class _LazyCoercion:
    """An option's coercion built on its first given value (`_lazy_coercion`)."""

    def __init__(self, descriptor: Any, build: Callable[[Any], Any]) -> None:
        self.descriptor, self.build = descriptor, build
        self.real: Any = None

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:  # as typer's RuntimeParam.coerce answers None, without the adapter
            return () if param.multiple or param.nargs == -1 else None
        if self.real is None:
            self.real = self.build(self.descriptor)
        return self.real.coerce(value, param=param, ctx=ctx)


def _lazy_coercion(command: Any) -> None:
    """typer builds each option's coercion (a pydantic TypeAdapter, ~0.2 ms) when the command
    processes the option's value, given or not, though it answers None (or () for a repeated
    option) for a value not given without using it (typer._coercion.RuntimeParam.coerce). Here an
    option builds it on its first given value only (memory has 60 options: 1-3 ms of each run,
    issue 39). A typer without these internals keeps its own (same answers, slower)."""
    try:
        from typer._coercion import build_runtime_param
    except ImportError:  # pragma: no cover - another typer
        return
    for cmd in (command, *getattr(command, "commands", {}).values()):
        for param in cmd.params:
            if getattr(param, "_runtime_param", False) is None and hasattr(param, "type_descriptor"):
                param._runtime_param = _LazyCoercion(param.type_descriptor, build_runtime_param)


def _app_for(args: list[str]) -> typer.Typer:
    """The app with only the invoked command registered, when the first argument names one.

    typer builds every registered command's parameters on each run, and a command's request model
    is imported to build them; building one keeps start-up fast (issue: tcalc must feel instant).
    Help, --version and unknown commands get the full app (`full_app`).
    """
    if args and args[0] in ("--version", "-V"):
        return app  # the root's eager option: no command is built
    if not args or args[0].startswith("-") or args[0] not in COMMANDS:
        return full_app()
    single = typer.Typer(
        name=app.info.name, help=app.info.help, add_completion=False, pretty_exceptions_enable=False,
        no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]},
    )
    single.registered_callback = app.registered_callback
    _register(single, args[0])
    return single


def full_app() -> typer.Typer:
    """`app` with every command registered (once)."""
    if not app.registered_commands:
        for command in COMMANDS:
            _register(app, command)
    return app


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return the exit code; every failure is one `Error:` line on stderr.

    Exit codes: 0 success (and a reader that closed the pipe early: `tcalc ... | head`), 1 a
    failed check (`tcalc check`), 2 invalid input or an output that cannot be written (closed or
    full stdout), 130 interrupted (Ctrl-C).
    """
    from transformer_calc.errors import ImpossibleResult, TcalcError

    args = sys.argv[1:] if argv is None else list(argv)
    if "-h" in args or "--help" in args:
        from transformer_calc.render.common import help_names_wrap

        help_names_wrap()
    if sys.stdout is None:  # started with stdout closed (`tcalc ... >&-`)
        return _fail("standard output is closed; redirect it to a file or /dev/null", 2)
    try:
        command = typer.main.get_command(_app_for(args))
        _lazy_coercion(command)
        result = command.main(args=args, prog_name="tcalc", standalone_mode=False)
        code = result if isinstance(result, int) else 0
        if code == 130:  # typer turns Ctrl-C inside a command into an exit code of 130, silently
            return _interrupted()
        _flush_stdout()
        return code
    except KeyboardInterrupt:
        return _interrupted()
    except TcalcError as exc:
        return _fail(str(exc), exc.exit_code)
    except ImpossibleResult as exc:
        import shlex

        return _fail(f"internal error: {exc}, an impossible result (a bug in tcalc); please report it with the "
                     f"command: tcalc {shlex.join(args)}", exc.exit_code)
    except typer.Exit as exc:
        if exc.exit_code == 130:  # typer turns Ctrl-C inside a command into Exit(130), silently
            return _interrupted()
        return exc.exit_code
    except SystemExit as exc:
        # Only the help text exits from inside typer: rich (Console.on_broken_pipe) and typer exit 1
        # when the reader of stdout has gone (`tcalc memory --help | head -1`). That reader leaving
        # is not an error, as for every other output (exit 0).
        if exc.code == 1:
            return _broken_pipe()
        return exc.code if isinstance(exc.code, int) else 2
    except typer.Abort:
        return _interrupted()
    except (BrokenPipeError, PipeClosed):
        return _broken_pipe()
    except RecursionError:
        return _fail("the input is nested too deeply to process; simplify it", 2)
    except ValueError as exc:  # estimators reject impossible inputs with ValueError
        return _fail(str(exc), 2)
    except OverflowError as exc:
        return _fail(f"a value is too large to compute with: {exc}", 2)
    except OSError as exc:  # writing the output failed: a closed or full stdout
        return _fail(f"cannot write the output: {exc.strerror or exc}", 2)
    except Exception as exc:  # noqa: BLE001 - the boundary: never show a traceback
        return _other_error(exc, sys.argv[1:] if argv is None else argv)


def _other_error(exc: Exception, argv: list[str]) -> int:
    """A click usage error (or no arguments: the help), else an internal error in one line (TCALC_DEBUG
    re-raises it)."""
    if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):  # click usage errors
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
            write(ctx.get_help() + "\n")
            return 0
        return _fail(_usage_message(exc, argv), exc.exit_code)
    if os.environ.get("TCALC_DEBUG"):
        raise exc
    return _fail(f"internal error ({type(exc).__name__}: {exc}); please report it (TCALC_DEBUG=1 shows details)", 1)


def _flush_stdout() -> None:
    """Write out what is buffered now, so that a closed, broken or full stdout is seen here."""
    if sys.stdout is not None:
        sys.stdout.flush()


def _broken_pipe() -> int:
    """The reader went away (`| head`): not an error. Point stdout at /dev/null so that the
    interpreter's own flush at exit does not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 0


def _interrupted() -> int:
    try:
        sys.stderr.write("Error: interrupted\n")
    except (OSError, ValueError):
        pass
    return 130


def main() -> None:
    late: list[int] = []
    try:
        code = run()
    except KeyboardInterrupt:  # between the handler's frames
        code = _interrupted()
    try:
        # The answer is decided; a Ctrl-C from here to the end still means "interrupted" (exit 130),
        # recorded rather than raised: raised in the interpreter's shutdown, it would kill the
        # process by the signal (exit -2, no line).
        _on_sigint(lambda *_: late.append(1))
        try:
            if sys.stdout is not None:
                sys.stdout.flush()
        except BrokenPipeError:  # the reader left: quiet, and the exit code keeps its meaning
            _broken_pipe()
        except (OSError, ValueError) as exc:
            code = _fail(f"cannot write the output: {getattr(exc, 'strerror', None) or exc}", 2)
            _broken_pipe()
    except KeyboardInterrupt:
        late.append(1)
    if late and code != 130:
        code = _interrupted()
    _on_sigint(None)
    if code == 130:
        # interrupted: out now, with the code, past the interpreter's shutdown (where a KeyboardInterrupt
        # still pending under `python -m` ends the process by the signal instead, exit -2)
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(130)
    sys.exit(code)


def _on_sigint(handler: Any) -> None:
    """SIGINT -> `handler` (None: ignored, which the interpreter's shutdown leaves as it is)."""
    import signal

    try:
        signal.signal(signal.SIGINT, handler if handler is not None else signal.SIG_IGN)
    except (ValueError, OSError):  # not the main thread, or no such signal here
        pass
