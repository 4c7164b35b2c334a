"""A page's form, its URL and its `tcalc` command, all read from the command's request model.

The URL is the state: the path names the command and the query holds its options, under the
API's keywords (`/memory?model=llama-3-8b&S=4096`: `S` is `--S`, `seq_len=` in the API). The form
shows one input per request field (`Opt`: the primary flag, the help line, the panel), and the
page prints the command line that gives the same result. Nothing here prices anything: the query
becomes the keywords of the `transformer_calc.api` function of the command.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from transformer_calc.errors import clip, did_you_mean
from transformer_calc.requests.base import Opt, Request, keyword_of

TRUE_WORDS = ("true", "on", "yes", "1")
FALSE_WORDS = ("false", "off", "no", "0")
GENERAL = "Options"  # the panel of a field that names none
COMMON_PANEL = "Common options"  # the command's common options (Request.common), first
MODEL_PANEL = "Model source"
MAX_QUERY_VALUES = 400  # a query with more values than any form has is refused, not iterated


@dataclass(frozen=True)
class FormField:
    """One input: a request field as the page shows it."""

    name: str  # the request field
    key: str  # the query key: the primary flag as a keyword (S, T, dp), the field name for MODEL
    flag: str  # as typed on the command line: --S, or MODEL
    help: str
    panel: str
    kind: str  # "switch" (unset, on, off), "lines" (a repeated flag: one KEY=VALUE per line), "text", "yaml" (a job file)
    value: str  # as the query gives it ("": not given)
    error: str | None = None


def field_key(name: str, o: Opt) -> str:
    return keyword_of(o.spellings()[0]) if o.flags else name


def _kind(o: Opt) -> str:
    if o.repeat:
        return "lines"
    if o.flags and "/" in o.flags[0]:
        return "switch"
    return "text"


def _help(o: Opt) -> str:
    return o.help.replace("\\[", "[")


def page_fields(cls: type[Request]) -> dict[str, Opt]:
    """The fields a page shows: every option the Python API takes."""
    return {name: o for name, o in cls.options().items() if o.api}


class QueryError(Exception):
    """A query the page cannot read as keywords (an unknown key, one option under two names)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


def read_query(cls: type[Request], items: list[tuple[str, str]]) -> tuple[dict[str, Any], dict[str, str]]:
    """The query's (key, value) pairs -> (API keywords, the text of each field as given). Empty
    values are not given; a switch reads true/false (on/off, yes/no, 1/0); a repeated flag reads
    one value per line. An unknown key is a QueryError with did-you-mean."""
    if len(items) > MAX_QUERY_VALUES:
        raise QueryError(f"{len(items)} values in the query; a form has at most {MAX_QUERY_VALUES}")
    names = {k: f for k, f in cls.keywords().items() if f in page_fields(cls)}
    options = cls.options()
    keywords: dict[str, Any] = {}
    texts: dict[str, str] = {}
    for key, raw in items:
        value = raw.strip()
        if not value:
            continue
        if key not in names:
            hint = did_you_mean(key, list(names))
            raise QueryError(f"{clip(key, 40)}={clip(value, 40)}: {cls.command} has no option {clip(key, 40)}"
                             + (f"; {hint}" if hint else ""))
        field = names[key]
        o = options[field]
        if o.repeat:
            lines = [line.strip() for line in value.splitlines() if line.strip()]
            keywords.setdefault(key, []).extend(lines)
            texts[field] = "\n".join(filter(None, [texts.get(field, ""), *lines]))
            continue
        if key in keywords or field in texts:
            raise QueryError(f"{field} is given twice in the query; give it once", field)
        if _kind(o) == "switch" and value.lower() in TRUE_WORDS + FALSE_WORDS:
            keywords[key] = value.lower() in TRUE_WORDS
        else:
            keywords[key] = value
        texts[field] = value
    return keywords, texts


def form(cls: type[Request], texts: dict[str, str], errors: dict[str, str]) -> list[FormField]:
    """The page's inputs in declaration order, with the values given and the errors by field."""
    from transformer_calc.requests.model import ModelRequest

    model = issubclass(cls, ModelRequest)  # a positional field is the model's source (else check's FILES, NAME)
    common = cls.common_options()  # the first panel (issue 38), as --help's first panel
    out = []
    fields = page_fields(cls)
    for name in [*(n for n in common if n in fields), *(n for n in fields if n not in common)]:
        o = fields[name]
        panel = COMMON_PANEL if name in common else (MODEL_PANEL if model else GENERAL) if not o.flags else (o.panel or GENERAL)
        out.append(FormField(name=name, key=field_key(name, o), flag=o.spellings()[0] if o.flags else (o.metavar or name),
                             help=_help(o), panel=panel,
                             kind=_kind(o), value=texts.get(name, ""), error=errors.get(name)))
    return out


# A page's own keys, beside its request's: check's job file as YAML text (an upload puts it in the
# URL, so the page's state stays in its URL); (flag shown, help, panel).
PAGE_KEYS: dict[str, dict[str, tuple[str, str, str]]] = {
    "check": {"job": ("job file (YAML)", "A tcalc job file's text (model:, training:, inference:, checks:), "
                      "or upload one; checked as the first of FILES.", "Job file")},
}


def page_form(command: str, cls: type[Request], texts: dict[str, str], errors: dict[str, str]) -> list[FormField]:
    """The page's inputs: its own keys (PAGE_KEYS), then the request's."""
    own = [FormField(name=key, key=key, flag=flag, help=help_text, panel=panel, kind="yaml", value=texts.get(key, ""),
                     error=errors.get(key)) for key, (flag, help_text, panel) in PAGE_KEYS.get(command, {}).items()]
    return own + form(cls, texts, errors)


def panels(fields: list[FormField]) -> list[tuple[str, list[FormField]]]:
    """The fields grouped by panel: the page's own keys, the common options, the model's source, then
    the command's own panels in order of first use."""
    groups: dict[str, list[FormField]] = {}
    for f in fields:
        groups.setdefault(f.panel, []).append(f)
    own = {p for ps in PAGE_KEYS.values() for _, _, p in ps.values()}
    order = sorted(groups, key=lambda p: (p not in own, p != COMMON_PANEL, p != MODEL_PANEL, p != GENERAL,
                                          list(groups).index(p)))
    return [(p, groups[p]) for p in order]


def command_line(cls: type[Request], texts: dict[str, str]) -> str:
    """`tcalc <command> ...` giving the page's result: each given field under its primary flag."""
    words = ["tcalc", cls.command]
    for name, o in page_fields(cls).items():
        text = texts.get(name)
        if not text:
            continue
        kind = _kind(o)
        if not o.flags:  # positional: MODEL, NAME; one word a line where it repeats (check's FILES)
            words += [line.strip() for line in text.splitlines() if line.strip()] if kind == "lines" else [text]
        elif kind == "switch":
            on, _, off = o.flags[0].partition("/")
            words.append(on if text.lower() in TRUE_WORDS else off if text.lower() in FALSE_WORDS else f"{on}={text}")
        elif kind == "lines":
            for line in text.splitlines():
                words += [o.spellings()[0], line]
        else:
            words += [o.spellings()[0], text]
    return shlex.join(words)


def query_string(cls: type[Request], texts: dict[str, str], **changes: str) -> list[tuple[str, str]]:
    """The canonical query of `texts` (each field under its key, in declaration order), with
    `changes` (by field) applied: the links between pages and the upload's redirect."""
    merged = {**texts, **changes}
    out: list[tuple[str, str]] = []
    for name, o in page_fields(cls).items():
        text = merged.get(name)
        if not text:
            continue
        if _kind(o) == "lines":
            out += [(field_key(name, o), line) for line in text.splitlines() if line.strip()]
        else:
            out.append((field_key(name, o), text))
    return out


def error_field(cls: type[Request], message: str, keywords: dict[str, Any], texts: dict[str, str]) -> str | None:
    """The field an error message is about, so that the page shows it beside that input: the
    keyword it starts with (`S=...`, from the request), else a flag or field name the message
    names (`--gpus (7)`, `recompute ('bogus')`), else the field whose value it quotes (an unknown
    GPU or preset), else the model's source when the model could not be read. None: the form's."""
    names = cls.keywords()
    head = message.split(":", 1)[0]
    for key in keywords:
        if message.startswith(f"{key}=") and names.get(key) in texts:
            return names[key]
    for name, o in page_fields(cls).items():
        if name not in texts:
            continue
        words = [name, *o.spellings(), *(keyword_of(s) for s in o.spellings())]
        if any(re.search(rf"(^|[\s:(]){re.escape(w)}\s*[(=']", head) for w in words):
            return name
    for name, text in texts.items():
        if len(text) >= 2 and (f"'{text}'" in message or f"({text})" in message):
            return name
    if message.startswith(("MODEL", "model ", "preset", "unknown preset")):
        return next((n for n in ("model", "preset", "config", "hf_config") if n in texts), None)
    return None
