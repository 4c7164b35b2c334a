"""Every file a user gives tcalc is read here, and treated as hostile.

One reader (`read_user_file`) and two parsers (`parse_yaml`, `parse_json`) with fixed budgets:

- only regular files are opened (a FIFO would block, a device never ends, a directory is no
  file): the path is stat()ed first; the size is capped at MAX_FILE_BYTES and at most that many
  bytes are ever read;
- YAML is parsed by PyYAML's pure-Python event parser (no C loader: a document nested 100,000
  levels deep segfaults it) and composed here with limits: nesting at most MAX_DEPTH levels,
  at most MAX_NODES values (aliases count what they expand to, so an alias bomb is refused before
  it grows), duplicate keys refused, tags other than the plain YAML types refused, one document;
- JSON: nesting is measured by a linear scan before `json.loads` (which recurses), duplicate
  keys are refused, and so are the non-standard NaN/Infinity literals, except in a Hugging Face
  config.json (`non_finite=True`): Python's json module, which transformers reads them with, takes
  them (Nemotron 3 Super publishes `time_step_limit: [0.0, Infinity]`), and the config reader
  refuses a non-finite value where it reads a size or a probability;
- non-finite numbers (.nan, .inf) are refused where they are read; booleans are never numbers
  (the config models check that);
- every message quotes at most QUOTE_CHARS characters of a user's value (`clip`).
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path
from typing import Any

from transformer_calc.errors import TcalcError, clip  # noqa: F401 (clip re-exported)

MAX_FILE_BYTES = 1 << 20  # 1 MiB: a job file or a config.json is a few kB
MAX_DEPTH = 32  # nesting levels (a job file needs 3, a config.json 4)
MAX_NODES = 100_000  # values in one document, aliases expanded


def regular_file(path: Path | str, where: str, give: str = "a file") -> os.stat_result:
    """stat() of a user's path that must be a regular file (a FIFO would block, a device never
    ends, a directory is no file): every reader of user files checks here first. `where` names the
    file in messages, `give` what to give instead of a directory."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise TcalcError(f"{where} does not exist; check the path") from None
    except OSError as exc:
        raise TcalcError(f"{where} cannot be read: {exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise TcalcError(f"{where} is a directory; give {give}")
    if not stat.S_ISREG(info.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else "a device or socket"
        raise TcalcError(f"{where} is {kind}, not a regular file; give a file on disk")
    return info


def read_user_file(path: Path | str, what: str, *, name: str | None = None, limit: int = MAX_FILE_BYTES,
                   plural: str = "files", hint: str = "", give: str = "a text file", lenient: bool = False) -> str:
    """The text of a user's file: a regular, non-empty, UTF-8 file of at most `limit` bytes (MAX_FILE_BYTES).
    `name` is the path as messages name it (clipped by default); `plural`, `hint` and `give` word the refusals
    ("logs over ... (hint)", "give the text log"); `lenient` replaces bytes that are not UTF-8 instead of refusing."""
    name = clip(str(path)) if name is None else name
    info = regular_file(path, f"{what} {name}")
    if info.st_size > limit:
        raise TcalcError(f"{what} {name} is {info.st_size:,} bytes; {plural} over {limit:,} bytes are refused{hint}")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(limit + 1)
    except OSError as exc:
        raise TcalcError(f"{what} {name} cannot be read: {exc.strerror}") from None
    if len(raw) > limit:
        raise TcalcError(f"{what} {name} is over {limit:,} bytes; {plural} that large are refused")
    if b"\x00" in raw:
        raise TcalcError(f"{what} {name} is a binary file; give {give}")
    try:
        text = raw.decode("utf-8", errors="replace" if lenient else "strict")
    except UnicodeDecodeError:
        raise TcalcError(f"{what} {name} is not UTF-8 text") from None
    if not text.strip():
        raise TcalcError(f"{what} {name} is empty")
    return text


# ---------------------------------------------------------------------------- YAML
_PLAIN_TAGS = {
    "tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null", "tag:yaml.org,2002:map",
    "tag:yaml.org,2002:seq",
}  # fmt: skip


class _Node:
    """A composed container with the number of values it holds (what an alias to it costs)."""

    __slots__ = ("value", "size", "key", "keys", "anchor", "merged")

    def __init__(self, value: Any, anchor: str | None):
        self.keys: set[Any] = set()  # keys given in this mapping
        self.merged: set[Any] = set()  # keys it took from merge keys (<<), which its own keys override
        self.value, self.size, self.key, self.anchor = value, 1, _NO_KEY, anchor


_NO_KEY = object()
_MERGE = object()  # the key position holds a YAML merge key (<<: *anchor)
_MERGE_TAG = "tag:yaml.org,2002:merge"


def parse_yaml(text: str, where: str) -> Any:
    """A YAML document as plain Python values, within the budgets above (module docstring)."""
    import yaml
    from yaml import events as ev

    builder = _YamlBuilder(where)
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            mark = event.start_mark
            if isinstance(event, ev.DocumentStartEvent):
                builder.document(mark)
            elif isinstance(event, ev.ScalarEvent):
                builder.scalar(event)
            elif isinstance(event, (ev.SequenceStartEvent, ev.MappingStartEvent)):
                builder.start(event, [] if isinstance(event, ev.SequenceStartEvent) else {})
            elif isinstance(event, (ev.SequenceEndEvent, ev.MappingEndEvent)):
                builder.end(mark)
            elif isinstance(event, ev.AliasEvent):
                builder.alias(event)
    except yaml.MarkedYAMLError as exc:
        raise builder.fail(clip(exc.problem or str(exc), 120), exc.problem_mark) from None
    except yaml.YAMLError as exc:
        raise TcalcError(f"{where}: invalid YAML: {clip(str(exc), 120)}") from None
    return builder.root


class _YamlBuilder:
    """Builds plain values from parser events, counting every value (aliases expanded) against MAX_NODES."""

    def __init__(self, where: str):
        from yaml.constructor import SafeConstructor
        from yaml.resolver import Resolver

        self.where = where
        self.resolver, self.constructor = Resolver(), SafeConstructor()
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.stack: list[_Node] = []
        self.total = 0
        self.documents = 0
        self.root: Any = None

    def fail(self, problem: str, mark: Any = None) -> TcalcError:
        pos = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return TcalcError(f"{self.where}: invalid YAML{pos}: {problem}")

    def document(self, mark: Any) -> None:
        self.documents += 1
        if self.documents > 1:
            raise self.fail("more than one document (---); give one", mark)

    def check_tag(self, tag: str | None, mark: Any) -> None:
        if tag is not None and tag not in ("!", *_PLAIN_TAGS):
            raise self.fail(f"tag {clip(tag)} is refused (plain YAML values only)", mark)

    def scalar(self, event: Any) -> None:
        """A plain value: resolved as YAML 1.1's safe loader does, refused when it cannot be read or is not finite."""
        import yaml
        from yaml.nodes import ScalarNode

        mark, stack = event.start_mark, self.stack
        self.check_tag(event.tag, mark)
        tag = event.tag
        if tag in (None, "!"):
            tag = self.resolver.resolve(ScalarNode, event.value, event.implicit)
        if tag == _MERGE_TAG and stack and isinstance(stack[-1].value, dict) and stack[-1].key is _NO_KEY:
            self.add(_MERGE, 0, mark)
            return
        node = ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            value = self.constructor.construct_object(node)
        except TcalcError:
            raise
        except (ValueError, yaml.YAMLError) as exc:  # e.g. an int of 5,000 digits
            raise self.fail(f"value {clip(event.value)} cannot be read ({clip(str(exc), 60)})", mark) from None
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(f"non-finite number {clip(event.value)}; give a finite number", mark)
        if event.anchor is not None:
            self.anchors[event.anchor] = (value, 1)
        self.add(value, 1, mark)

    def start(self, event: Any, container: Any) -> None:
        self.check_tag(event.tag, event.start_mark)
        if len(self.stack) >= MAX_DEPTH:
            raise self.fail(f"nested more than {MAX_DEPTH} levels deep; refused", event.start_mark)
        self.stack.append(_Node(container, event.anchor))  # the anchor is set when it ends

    def end(self, mark: Any) -> None:
        node = self.stack.pop()
        if isinstance(node.value, dict) and node.key is not _NO_KEY:
            raise self.fail("a key without a value", mark)
        if node.anchor is not None:
            self.anchors[node.anchor] = (node.value, node.size)
        self.add(node.value, node.size, mark)
        self.total -= node.size  # its values were counted as they were added

    def alias(self, event: Any) -> None:
        if event.anchor not in self.anchors:
            raise self.fail(f"unknown alias *{clip(event.anchor)}", event.start_mark)
        value, size = self.anchors[event.anchor]
        self.add(value, size, event.start_mark)

    def add(self, value: Any, size: int, mark: Any) -> None:
        """Place a value: the root, the next item of a list, a mapping's key, or its value."""
        self.total += size
        if self.total > MAX_NODES:
            raise self.fail(f"more than {MAX_NODES:,} values (aliases expanded); refused", mark)
        if not self.stack:
            self.root = value
            return
        top = self.stack[-1]
        top.size += size
        if isinstance(top.value, list):
            top.value.append(value)
        elif top.key is _NO_KEY:
            self.key(top, value, mark)
        elif top.key is _MERGE:
            self.merge(top, value, mark)
        else:
            top.value[top.key] = value
            top.key = _NO_KEY

    def key(self, top: _Node, value: Any, mark: Any) -> None:
        if value is _MERGE:
            top.key = _MERGE
            return
        if isinstance(value, (dict, list)):
            raise self.fail("a mapping key must be a plain value", mark)
        if value in top.keys:
            raise self.fail(f"key {clip(value)} is given twice; keep one", mark)
        try:
            top.keys.add(value)
        except TypeError:
            raise self.fail("a mapping key must be a plain value", mark) from None
        top.merged.discard(value)  # its own key overrides a merged one (YAML merge keys)
        top.key = value

    def merge(self, top: _Node, value: Any, mark: Any) -> None:
        # <<: *a or <<: [*a, *b]: the mappings' keys join this one's, its own keys and earlier
        # mappings winning (https://yaml.org/type/merge.html)
        sources = value if isinstance(value, list) else [value]
        if not sources or not all(isinstance(m, dict) for m in sources):
            raise self.fail("a merge key (<<) takes a mapping or a list of mappings", mark)
        for source in sources:
            for k, v in source.items():
                if k not in top.keys and k not in top.merged:
                    top.value[k] = v
                    top.merged.add(k)
        top.key = _NO_KEY


# ---------------------------------------------------------------------------- JSON
def json_depth(text: str) -> int:
    """The deepest nesting of [ and { outside strings (a linear scan, no recursion)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_json(text: str, where: str, *, non_finite: bool = False) -> Any:
    """A JSON document within the budgets: nesting, duplicate keys; NaN/Infinity/-Infinity refused
    unless `non_finite` (a config.json: they become floats, as `json.loads` makes them for
    transformers' `PretrainedConfig.from_json_file`; whoever reads a value checks it is finite)."""
    import json

    if json_depth(text) > MAX_DEPTH:
        raise TcalcError(f"{where}: invalid JSON: nested more than {MAX_DEPTH} levels deep; refused")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise TcalcError(f"{where}: invalid JSON: key {clip(key)} is given twice; keep one")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        if non_finite:
            return float(name)  # "NaN", "Infinity", "-Infinity": what json.loads gives by default
        raise TcalcError(f"{where}: invalid JSON: {name} is not a JSON number; give a finite number")

    try:
        return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise TcalcError(f"{where}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except TcalcError:
        raise
    except (ValueError, RecursionError) as exc:  # an int of too many digits
        raise TcalcError(f"{where}: invalid JSON: {clip(str(exc), 120)}") from None


def finite_or_error(data: Any, where: str = "result") -> None:
    """Refuse a result that holds NaN or an infinity (no output may carry one), naming its key.

    Walks with an explicit stack (results are shallow; no recursion on a user's structure)."""
    stack: list[tuple[str, Any]] = [(where, data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise TcalcError(
                f"{path} is {value} (an input is out of range for this computation); check the inputs that feed it"
            )
        if isinstance(value, dict):
            stack.extend((f"{path}.{k}", v) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(value))
