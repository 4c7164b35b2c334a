"""`tcalc web`: a local web page on the Python API (Starlette, Jinja2, uvicorn: the `[web]` extra).

Each page is one command: `/memory?model=llama-3-8b&S=4096` calls `transformer_calc.api.memory`
with those keywords and shows its typed result: the charts (charts.py, inline SVG), every number
of the result in tables (each cell carries its JSON key and exact value), and the `tcalc` command
that prints the same result. Nothing is priced here: the page is the API's result, drawn. The
pages render on the server, so they work with JavaScript off; the one vendored script submits
the form when a switch changes and leaves empty fields out of the URL. `/<command>.json` is the
result as `tcalc <command> -f json` writes it.

Three pages price no model: presets and hardware (the API's tables, each row a link), and check
(job files against their limits: paths in FILES, or a job file's YAML in the page's own `job=`
key, where an upload lands, checked from an anonymous in-memory file). The sweep page prices at
most SWEEP_MAX_POINTS points (the CLI streams any grid).

An error is the API's TcalcError, shown beside the field it names (forms.error_field), never a
traceback. Nothing is written to disk: an uploaded config.json is read in memory, and its fields
become the page's `--set` options (the URL holds the whole model). No request leaves the machine
but those the API makes itself (a Hugging Face repo id as MODEL, as the CLI).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request as HttpRequest
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import transformer_calc.api as tc
from transformer_calc import __version__
from transformer_calc.errors import TcalcError
from transformer_calc.render.common import fmt_bytes, fmt_flops, fmt_rate, fmt_s
from transformer_calc.requests.model import ModelRequest
from transformer_calc.web import charts, forms, summary

HERE = Path(__file__).parent
# The pages, in the navigation's order: each a command of the API that prices a model (sweep: several) ...
MODEL_PAGES = ("memory", "inference", "serve", "train", "plan", "rl", "params", "flops", "mfu", "sweep")
# ... and the commands that price none: the tables of presets and accelerators, and the CI gate on job files.
CATALOG_PAGES = ("presets", "hardware", "check")
PAGES = MODEL_PAGES + CATALOG_PAGES
SWEEP_MAX_POINTS = 4096  # a page prices at most this many grid points (the CLI streams up to requests.sweep_grid.MAX_POINTS)
JOB_MAX_CHARS = 4000  # an uploaded job file travels in the URL (`job=`): a few hundred characters each (tests/data/check_jobs)
JOB_MAX_URL_BYTES = 12_000  # its URL, encoded: under h11's 16 KiB request head (uvicorn's default parser limit)
JOB_LABEL = "job.yaml"  # the uploaded job file's name on the page and in its command line
UPLOAD_MAX_BYTES = 1 << 20  # a config.json is a few kB (sources.files.MAX_FILE_BYTES, the CLI's limit)
MAX_LIST_ROWS = 64  # a table of a result's list shows at most this many rows (the JSON has them all)
TEMPLATES = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]),
                        trim_blocks=True, lstrip_blocks=True)


# ---------------------------------------------------------------------------- a result as tables
@dataclass
class Cell:
    key: str  # the JSON path (memory.peak_bytes, layouts.0.tpot_s)
    value: str  # the exact JSON value (json.dumps)
    text: str  # as shown


@dataclass
class Table:
    title: str
    rows: list[tuple[str, Cell]] = field(default_factory=list)  # a section: (name, cell)
    columns: list[str] = field(default_factory=list)  # a list of records: its columns
    records: list[list[Cell]] = field(default_factory=list)
    more: int = 0  # records not shown
    folded: bool = False  # shown closed (the model's fields)


def shown(key: str, value: Any) -> str:
    """A JSON value as a person reads it: counts with separators, bytes beside GiB, seconds in
    ms/µs, FLOPs with a prefix; the exact value is the cell's data-value."""
    name = key.rsplit(".", 1)[-1]
    if value is None:
        return "–"
    if isinstance(value, bool) or isinstance(value, str):
        return str(value).lower() if isinstance(value, bool) else value
    if isinstance(value, int):
        if name.endswith("bytes_s"):  # a bandwidth (the hardware table's)
            return fmt_rate(value, "B/s")
        if name.endswith("_bytes") or name == "bytes_moved":
            return f"{value:,} ({fmt_bytes(value)})"
        if "flops" in name:
            return f"{value:,} ({fmt_flops(value)})"
        return f"{value:,}"
    if isinstance(value, float):
        if name.endswith("bytes_s"):  # a bandwidth
            return fmt_rate(value, "B/s")
        if name.endswith("per_s"):  # a rate: tokens_per_s, requests_per_s
            return f"{value:,.1f}/s" if abs(value) >= 10 else f"{value:.4g}/s"
        if name.endswith("_s"):
            return fmt_s(value)
        if name.endswith("_bytes"):
            return fmt_bytes(value)
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    return json.dumps(value)


def check_text(check: str, value: Any) -> str:
    """A check's value or limit (results/check.py) as shown: memory in bytes, throughput in
    tokens/s, latency in seconds, by the check's name (a limit given as a whole number stays an int
    in the JSON, and is shown in its unit all the same)."""
    if value is None or "memory" in check or "fits" in check:
        return shown("value_bytes", value)
    return shown("tokens_per_s" if check.endswith("tokens_per_s") else "time_s", float(value))


def _cell(key: str, value: Any) -> Cell:
    return Cell(key, json.dumps(value), shown(key, value))


def _flat(data: Any, prefix: str) -> list[tuple[str, Any]]:
    if isinstance(data, dict) and data:
        return [kv for k, v in data.items() for kv in _flat(v, f"{prefix}.{k}")]
    return [(prefix, data)]


def tables(data: dict[str, Any] | list[Any]) -> list[Table]:
    """The result's JSON as tables: one per top-level section (its leaves as rows), one per list of
    records (a row each), the scalars of the top level in one table of their own."""
    top = Table("Result")
    out: list[Table] = []
    pending: list[Table] = []

    def section(title: str, key: str, value: Any, folded: bool = False) -> None:
        t = Table(title, folded=folded)
        for path, leaf in _flat(value, key):
            if isinstance(leaf, list) and leaf and all(isinstance(x, dict) for x in leaf):
                pending.append(records(path, leaf))
            elif isinstance(leaf, list) and leaf and all(isinstance(x, list) for x in leaf):
                t.rows.append((path.removeprefix(key + "."), Cell(path, json.dumps(leaf), "; ".join(
                    ", ".join(shown(path, y) for y in x) for x in leaf))))
            else:
                t.rows.append((path.removeprefix(key + ".") if path != key else key, _cell(path, leaf)))
        out.append(t)

    def records(path: str, items: list[dict[str, Any]]) -> Table:
        columns: list[str] = []
        flat = [dict(_flat(item, "")) for item in items[:MAX_LIST_ROWS]]
        for row in flat:
            columns += [c for c in row if c not in columns]
        t = Table(path or "rows", columns=[c.lstrip(".") for c in columns], more=max(len(items) - MAX_LIST_ROWS, 0))
        t.records = [[_cell(f"{path}.{i}{c}".lstrip("."), row.get(c)) for c in columns] for i, row in enumerate(flat)]
        return t

    if isinstance(data, list):  # a result that is a list (presets, hardware): its rows, keyed 0.name, ...
        return [records("", data)] if data and all(isinstance(x, dict) for x in data) else []

    for key, value in data.items():
        if isinstance(value, dict) and value:
            section(key, key, value, folded=key == "model")
        elif isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
            pending.append(records(key, value))
        else:
            top.rows.append((key, _cell(key, value)))
    return ([top] if top.rows else []) + out + pending


def capacity_matrix(result: Any) -> dict[str, Any] | None:
    """inference's budget matrix (contexts x concurrency: the KV budget's fraction each takes)."""
    serving = getattr(result, "serving", None)
    matrix = getattr(serving, "budget_matrix", None) if serving is not None else None
    if matrix is None:
        return None
    return {"contexts": matrix.contexts, "concurrency": matrix.concurrency, "fraction": matrix.kv_fraction,
            "max": matrix.max_concurrent_sequences}


TEMPLATES.globals.update(shown_value=shown, cell_value=json.dumps, check_text=check_text,
                        words=lambda path: " · ".join(summary.words(p) for p in path.split(".")))


# ---------------------------------------------------------------------------- pages
def _model_texts(texts: dict[str, str]) -> dict[str, str]:
    """The model's source and overrides: what the navigation carries from page to page."""
    return {k: v for k, v in texts.items() if k in ModelRequest.model_fields}


def _link(command: str, texts: dict[str, str]) -> str:
    cls = tc.__dict__[command].request
    query = forms.query_string(cls, _model_texts(texts))
    return f"/{command}" + (f"?{urlencode(query)}" if query else "")


def _choices() -> dict[str, list[str]]:
    """Suggestions for the inputs that name a preset or a GPU (the API's own tables)."""
    presets = [p.name for p in tc.presets().root]
    gpus = [g.name for g in tc.hardware().root]
    return {"model": presets, "preset": presets, "gpu": gpus}


_CHOICES: dict[str, list[str]] = {}


def choices() -> dict[str, list[str]]:
    if not _CHOICES:
        _CHOICES.update(_choices())
    return _CHOICES


def _html(template: str, status: int = 200, **values: Any) -> HTMLResponse:
    return HTMLResponse(TEMPLATES.get_template(template).render(version=__version__, pages=PAGES,
                                                                model_pages=MODEL_PAGES, **values),
                        status_code=status)


def _has_model(texts: dict[str, str]) -> bool:
    return any(texts.get(k) for k in ModelRequest.model_fields)


def _ready(command: str, texts: dict[str, str]) -> bool:
    """Whether the page has what its command needs: a model, a job file for check, nothing else for
    the catalogs."""
    if command == "check":
        return bool(texts.get("files") or texts.get("job"))
    return command in CATALOG_PAGES or _has_model(texts)


def _with_job_file(command: str, texts: dict[str, str]) -> dict[str, str]:
    """The texts as the command line reads them: check's job file (the page's `job=`) is the first
    of its FILES, saved as JOB_LABEL."""
    if command != "check" or not texts.get("job"):
        return texts
    return {**texts, "files": "\n".join(filter(None, [JOB_LABEL, texts.get("files", "")]))}


def run_sweep_page(keywords: dict[str, Any]) -> Any:
    """`tc.sweep(**keywords)` (results.sweep.run_sweep: prepare, then price) with the page's limit
    checked between the two: a grid over SWEEP_MAX_POINTS is refused before any point is priced."""
    from transformer_calc.results.sweep import prepare_sweep, sweep_report

    request = tc.sweep.request.from_keywords(keywords, where="sweep()")
    try:
        run = prepare_sweep(request)
        if run.spec.size > SWEEP_MAX_POINTS:
            raise TcalcError(f"the grid has {run.spec.size:,} points; this page prices at most {SWEEP_MAX_POINTS:,}: "
                             "narrow an axis, or run the command line below (it streams any grid)")
        return sweep_report(run)
    except TcalcError:
        raise
    except (ValueError, OverflowError) as exc:  # as api._command: an estimator's refusal is a TcalcError
        raise TcalcError(" ".join(str(exc).split())) from None


def run_check_page(keywords: dict[str, Any], job: str | None) -> Any:
    """`tc.check(...)` on FILES and on the job file the page holds (`job=`, its YAML text). The text
    is checked from memory, never written: an anonymous in-memory file (Linux memfd_create(2))
    stands for it, and the result names it JOB_LABEL, as the page's command line does."""
    import os

    from transformer_calc.results.check import CheckResult

    if job is None:
        return tc.check(**keywords)
    if len(job) > JOB_MAX_CHARS:
        raise TcalcError(f"job: {len(job):,} characters; the page's URL holds a job file of at most "
                         f"{JOB_MAX_CHARS:,}: give its path in FILES instead")
    if not hasattr(os, "memfd_create"):
        raise TcalcError("job: checking a job file from memory needs Linux (memfd_create); give its path in FILES")
    fd = os.memfd_create("tcalc-job", 0)
    try:
        os.write(fd, job.encode("utf-8"))
        path = f"/proc/self/fd/{fd}"
        result = tc.check(**{**keywords, "files": [path, *keywords.get("files", [])]})
    finally:
        os.close(fd)
    text = json.dumps(result.model_dump(mode="json")).replace(json.dumps(path)[1:-1], JOB_LABEL)
    return CheckResult.model_validate_json(text)


async def _call(call: Any, cls: Any, keywords: dict[str, Any], texts: dict[str, str],
                errors: dict[str, str]) -> tuple[Any, str | None]:
    """(result, problem) of the API call, off the event loop: an error goes beside its field when one is named
    (into `errors`), else it is the page's problem; a non-finite number is an error, as with `-f json`."""
    try:
        result = await run_in_threadpool(call)
        tc_json = result.model_dump(mode="json")
        from transformer_calc.sources.files import finite_or_error

        finite_or_error(tc_json)  # as `-f json`: a non-finite number is an error, never shown
        return result, None
    except TcalcError as exc:
        message = " ".join(str(exc).split())
        where = forms.error_field(cls, message, keywords, texts)
        if where is None:
            return None, message
        errors[where] = message
        return None, None
    except TypeError as exc:  # one option under two names (S= and seq_len=)
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - the page never shows a traceback
        return None, f"internal error ({type(exc).__name__}: {' '.join(str(exc).split())[:300]}); please report it"


async def evaluate(command: str, items: list[tuple[str, str]]) -> dict[str, Any]:
    """A page's query -> its form, command line, result and errors (the API called once)."""
    fn = tc.__dict__[command]
    cls = fn.request
    errors: dict[str, str] = {}
    problem: str | None = None
    result = None
    texts: dict[str, str] = {}
    page_only = forms.PAGE_KEYS.get(command, {})
    given = [(k, v.rstrip()) for k, v in items if k in page_only and v.strip()]  # the page's own keys (check's job=)
    extra = dict(given)
    try:
        if len(given) > len(extra):
            raise forms.QueryError(f"{given[0][0]} is given twice in the query; give it once", given[0][0])
        keywords, texts = forms.read_query(cls, [(k, v) for k, v in items if k not in page_only])
    except forms.QueryError as exc:
        keywords = {}
        problem = str(exc)
    texts = {**texts, **extra}

    def call() -> Any:
        if command == "sweep":
            return run_sweep_page(keywords)
        if command == "check":
            return run_check_page(keywords, extra.get("job"))
        return fn(**keywords)

    if problem is None and _ready(command, texts):
        result, problem = await _call(call, cls, keywords, texts, errors)
    if problem is not None and command in forms.PAGE_KEYS and problem.startswith("job:"):
        errors["job"], problem = problem, None  # the job file's own limits, beside its box
    fields = forms.page_form(command, cls, texts, errors)
    flagged = [f for f in fields if f.error]
    return {"flagged": flagged,
        "command": command, "fields": fields, "panels": forms.panels(fields), "texts": texts,
        "command_line": forms.command_line(cls, _with_job_file(command, texts)), "problem": problem, "errors": errors, "result": result,
        "charts": charts.charts(command, result) if result is not None else [],
        "banner": summary.banner(command, result.model_dump(mode="json")) if result is not None else None,
        "tables": tables(result.model_dump(mode="json")) if result is not None else [],
        "matrix": capacity_matrix(result) if result is not None else None,
        "links": {p: _link(p, texts) for p in PAGES}, "needs_model": not _ready(command, texts) and problem is None,
        "doc": " ".join((fn.__doc__ or "").split()), "choices": choices(),
    }


def _cleaned(request: HttpRequest) -> str | None:
    """The URL without the form's empty fields (a form submitted without JavaScript sends them)."""
    items = list(request.query_params.multi_items())
    kept = [(k, v) for k, v in items if v.strip()]
    if len(kept) == len(items):
        return None
    return request.url.path + (f"?{urlencode(kept)}" if kept else "")


async def page(request: HttpRequest) -> Response:
    command = request.url.path.strip("/")
    clean = _cleaned(request)
    if clean is not None:
        return RedirectResponse(clean, status_code=303)
    values = await evaluate(command, list(request.query_params.multi_items()))
    values["query"] = request.url.query
    status = 200 if values["problem"] is None and not values["errors"] else 400
    return _html("page.html", status, **values)


async def page_json(request: HttpRequest) -> Response:
    """`/<command>.json?...`: the result as `tcalc <command> -f json` writes it; an error as
    {"error": the TcalcError's line} (status 400)."""
    command = request.url.path.strip("/").removesuffix(".json")
    values = await evaluate(command, [(k, v) for k, v in request.query_params.multi_items() if v.strip()])
    if values["result"] is None:
        message = values["problem"] or next(iter(values["errors"].values()), "give a model: model=<preset, repo id or path>")
        return JSONResponse({"error": message}, status_code=400)
    return JSONResponse(values["result"].model_dump(mode="json"))


async def index(request: HttpRequest) -> Response:
    presets = tc.presets().root
    return _html("index.html", presets=presets, choices=choices(), problem=None,
                 links={p: f"/{p}" for p in PAGES})


_PLAIN = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-/ ()]*$")


def set_lines(spec: dict[str, Any]) -> list[str]:
    """A config's ModelConfig fields as `--set KEY=VALUE` lines that read back to the same values
    (a string that would read as another type is written as JSON)."""
    out = []
    for key, value in spec.items():
        if key == "source":  # provenance text, not a dimension
            continue
        plain = isinstance(value, str) and _PLAIN.match(value) and value.lower() not in (
            "true", "false", "yes", "no", "on", "off", "null", "none", "nan", "inf", "infinity")
        out.append(f"{key}={value if plain else json.dumps(value)}")
    return out


async def upload(request: HttpRequest) -> Response:
    """A config.json from the picker: read in memory (never written), mapped as `--hf-config`
    maps it, and sent on as the page's --set options."""
    from transformer_calc.sources.files import parse_json
    from transformer_calc.sources.hf import from_hf_config

    page_name = "memory"
    try:
        async with request.form(max_files=1, max_fields=4, max_part_size=UPLOAD_MAX_BYTES) as formdata:
            page_name = str(formdata.get("page") or "memory")
            upload_file = formdata.get("config")
            if page_name not in MODEL_PAGES:
                raise TcalcError(f"page {page_name[:40]!r}: not a page of a model; choose one of {', '.join(MODEL_PAGES)}")
            if upload_file is None or isinstance(upload_file, str):
                raise TcalcError("config.json: no file was sent; choose a Hugging Face config.json")
            raw = await upload_file.read(UPLOAD_MAX_BYTES + 1)
        if len(raw) > UPLOAD_MAX_BYTES:
            raise TcalcError(f"config.json: over {UPLOAD_MAX_BYTES:,} bytes; a config.json is a few kB")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise TcalcError("config.json: not UTF-8 text; give a Hugging Face config.json") from None
        data = parse_json(text, "config.json", non_finite=True)
        if not isinstance(data, dict):
            raise TcalcError("config.json: expected a JSON object (a Hugging Face config.json)")
        spec = from_hf_config(data)
    except TcalcError as exc:
        return _html("index.html", 400, presets=tc.presets().root, choices=choices(),
                     problem=" ".join(str(exc).split()), links={p: f"/{p}" for p in PAGES})
    except Exception as exc:  # noqa: BLE001 - a malformed form (multipart) is the user's input too
        return _html("index.html", 400, presets=tc.presets().root, choices=choices(),
                     problem=f"config.json: the upload could not be read ({type(exc).__name__}); send one file",
                     links={p: f"/{p}" for p in PAGES})
    query = [("set", line) for line in set_lines(spec)]
    return RedirectResponse(f"/{page_name}?{urlencode(query)}", status_code=303)


async def upload_job(request: HttpRequest) -> Response:
    """A job file for the check page: read in memory (never written) and sent on as `/check?job=`
    (its YAML text), so the page's state is its URL; the check itself runs on that URL."""
    try:
        async with request.form(max_files=1, max_fields=2, max_part_size=UPLOAD_MAX_BYTES) as formdata:
            upload_file = formdata.get("job")
            if upload_file is None or isinstance(upload_file, str):
                raise TcalcError("job: no file was sent; choose a tcalc job file (YAML)")
            raw = await upload_file.read(JOB_MAX_CHARS * 4 + 1)  # UTF-8: at most 4 bytes a character
    except TcalcError as exc:
        return await _check_problem(request, str(exc))
    except Exception as exc:  # noqa: BLE001 - a malformed form (multipart) is the user's input too
        return await _check_problem(request, f"job: the upload could not be read ({type(exc).__name__}); send one file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return await _check_problem(request, "job: not UTF-8 text; give a tcalc job file (YAML)")
    if "\x00" in text:
        return await _check_problem(request, "job: a binary file; give a tcalc job file (YAML)")
    if len(text) > JOB_MAX_CHARS:
        return await _check_problem(request, f"job: over {JOB_MAX_CHARS:,} characters; the page's URL holds a job "
                                             "file of at most that: give its path in FILES instead")
    if not text.strip():
        return await _check_problem(request, "job: the file is empty; give a tcalc job file (YAML)")
    query = urlencode([("job", text.rstrip())])
    if len(query) > JOB_MAX_URL_BYTES:  # non-ASCII text: up to 9 bytes a character once encoded
        return await _check_problem(request, f"job: {len(query):,} bytes once in the URL, over {JOB_MAX_URL_BYTES:,}; "
                                             "give its path in FILES instead")
    return RedirectResponse(f"/check?{query}", status_code=303)


async def _check_problem(request: HttpRequest, message: str) -> Response:
    values = await evaluate("check", [])
    values.update(query="", needs_model=False)
    values["errors"]["job"] = message
    values["fields"] = forms.page_form("check", tc.check.request, {}, values["errors"])
    values["panels"] = forms.panels(values["fields"])
    values["flagged"] = [f for f in values["fields"] if f.error]
    return _html("page.html", 400, **values)


async def open_page(request: HttpRequest) -> Response:
    """The picker's form: `/open?page=inference&model=...` is `/inference?model=...`."""
    items = [(k, v) for k, v in request.query_params.multi_items() if v.strip()]
    target = next((v for k, v in items if k == "page"), "memory")
    if target not in MODEL_PAGES:
        return _html("index.html", 400, presets=tc.presets().root, choices=choices(),
                     problem=f"page {target[:40]!r}: not a page of a model; choose one of {', '.join(MODEL_PAGES)}",
                     links={p: f"/{p}" for p in PAGES})
    rest = [(k, v) for k, v in items if k != "page"]
    return RedirectResponse(f"/{target}" + (f"?{urlencode(rest)}" if rest else ""), status_code=303)


async def not_found(request: HttpRequest, exc: Exception) -> Response:
    return _html("index.html", 404, presets=tc.presets().root, choices=choices(),
                 problem=f"{request.url.path[:60]}: no such page; choose one of {', '.join(PAGES)}",
                 links={p: f"/{p}" for p in PAGES})


LOOPBACK = ("127.0.0.1", "localhost", "::1")
# The Host headers a loopback server answers: a page of another site that points a name of its own at
# 127.0.0.1 (DNS rebinding) gets 400, not the result of a MODEL path it chose. An IPv6 literal is
# bracketed in a Host header (RFC 3986 3.2.2: `Host: [::1]:8000`), and Starlette compares it so.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def create_app(hosts: tuple[str, ...] | None = LOOPBACK_HOSTS) -> Starlette:
    """The pages; `hosts`: the Host headers answered (None: any, for a server bound to the network)."""
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    routes = [Route("/", index), Route("/open", open_page), Route("/upload", upload, methods=["POST"]),
              Route("/check/upload", upload_job, methods=["POST"]),
              Mount("/static", StaticFiles(directory=HERE / "static"), name="static")]
    routes += [Route(f"/{p}", page) for p in PAGES] + [Route(f"/{p}.json", page_json) for p in PAGES]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=list(hosts))] if hosts else []
    return Starlette(routes=routes, exception_handlers={404: not_found}, middleware=middleware)


def serve(host: str, port: int) -> None:
    """Serve the pages until Ctrl-C: the socket bound here (port 0: a free one), its URL said on
    stderr; no access log."""
    import socket

    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise TcalcError(f"--host {host} --port {port}: cannot bind ({exc.strerror or exc}); "
                         "choose another port (0: a free one)") from None
    bound = sock.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    if host not in LOOPBACK:
        sys.stderr.write(f"warning: --host {host} serves these pages to the network, without authentication\n")
    sys.stderr.write(f"tcalc web: http://{shown_host}:{bound}/ (Ctrl-C stops)\n")
    sys.stderr.flush()
    app = create_app(LOOPBACK_HOSTS if host in LOOPBACK else None)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
