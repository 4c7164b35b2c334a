"""Requests: one pydantic model per command, the only place an option is declared.

A request field is one option of one command, under one name (docs/notation.md): the field's name
is the Python keyword and, where the command reads a job-file section, the job-file key; its
`Opt` metadata gives the command-line spellings (the seed's letter first where it has one: `--S`,
`--seq-len`), the help line, the help panel and the parser of a typed value. From that one
declaration:

- the CLI builds the command's typer parameters (`cli.command_parameters`),
- the Python API accepts exactly the field names and the flags' spellings as keywords
  (`Request.from_keywords`: `S=` and `seq_len=` are one option; an unknown keyword is a TypeError
  naming it, with did-you-mean),
- the command's body receives the validated request (`requests/<family>.py`'s `run_<command>`),
  and the job file's section is resolved under the same names (`model.config.resolve`).

tests/test_vocabulary.py checks by introspection that every field is a flag and a keyword.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from transformer_calc.errors import TcalcError, clip, did_you_mean


@dataclass(frozen=True)
class Opt:
    """How one request field is typed on a command line. `flags`: the spellings, primary first (a
    switch is "--x/--no-x"; none: a positional argument); `parse`: text or number -> the value
    (ValueError on bad input), applied by both doors; `job`: the field is a job-file key of the
    command's section; `cli`: the field exists on the command line (False: the API only, e.g. a
    list of models); `metavar`: a positional's name."""

    flags: tuple[str, ...]
    help: str
    panel: str | None = None
    parse: Callable[[Any], Any] | None = None
    job: bool = True
    cli: bool = True
    metavar: str | None = None
    repeat: bool = False  # a flag given several times (--set k=v --set k2=v2); a list in the request
    api: bool = True  # False: the command line only (an output file, plot axes)

    @property
    def positional(self) -> bool:
        """A command-line argument (no flag): the API's positional argument too."""
        return not self.flags and self.cli

    def spellings(self) -> list[str]:
        """The flags as typed, without the negative half of a switch."""
        return [f.split("/")[0] for f in self.flags]


def opt(*flags: str, help: str, panel: str | None = None, parse: Callable[[Any], Any] | None = None,
        job: bool = True, cli: bool = True, metavar: str | None = None, repeat: bool = False, api: bool = True) -> Opt:
    return Opt(tuple(flags), help, panel, parse, job, cli, metavar, repeat, api)


def keyword_of(flag: str) -> str:
    """A flag's spelling as a Python keyword: --seq-len -> seq_len, --S -> S."""
    return flag.lstrip("-").replace("-", "_")


class Request(BaseModel):
    """A command's options, validated: frozen, unknown names refused."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True, arbitrary_types_allowed=True)

    command: ClassVar[str] = ""
    section: ClassVar[str | None] = None  # the job-file section the command reads (training, inference, checks)
    # The options most questions need (issue 38): `--help`'s first panel and the MCP tool's typed
    # arguments; every other option stays one keyword away (the tool's `options` object). A command
    # that declares none gets its positional argument and its required fields (`common_options`).
    common: ClassVar[tuple[str, ...]] = ()

    # ------------------------------------------------------------------ the declaration, read back
    @classmethod
    def options(cls) -> dict[str, Opt]:
        """field name -> its Opt, in declaration order."""
        cached = cls.__dict__.get("_options_cache")
        if cached is None:
            cached = {}
            for name, field in cls.model_fields.items():
                found = next((m for m in field.metadata if isinstance(m, Opt)), None)
                if found is None:
                    raise TypeError(f"{cls.__name__}.{name} has no Opt: every request field is an option")
                cached[name] = found
            setattr(cls, "_options_cache", cached)
        return cached

    @classmethod
    def common_options(cls) -> tuple[str, ...]:
        """The fields shown first: `common` where declared, else the positional argument and the
        required fields."""
        options = cls.options()
        if cls.common:
            unknown = [n for n in cls.common if n not in options]
            if unknown:
                raise TypeError(f"{cls.__name__}.common names no field: {unknown}")
            return cls.common
        return tuple(n for n, o in options.items()
                     if o.api and (o.positional or cls.model_fields[n].is_required()))

    @classmethod
    def keywords(cls) -> dict[str, str]:
        """keyword -> field: each field's name and each of its flags spelled as a keyword."""
        out: dict[str, str] = {}
        for name, o in cls.options().items():
            if not o.api:
                continue
            out[name] = name
            for flag in o.spellings():
                out.setdefault(keyword_of(flag), name)
        return out

    @classmethod
    def job_keys(cls) -> set[str]:
        """The fields that are keys of the command's job-file section."""
        return {name for name, o in cls.options().items() if o.job}

    # ------------------------------------------------------------------ the two doors
    @classmethod
    def from_keywords(cls, values: dict[str, Any], *, where: str | None = None) -> Self:
        """The Python API's door: keywords (field names or flag spellings) -> the request. An
        unknown keyword is a TypeError naming it (with did-you-mean); one option under two names
        is a TypeError; a bad value is a TcalcError naming the keyword."""
        where = where or f"{cls.command}()"
        names = cls.keywords()
        fields: dict[str, Any] = {}
        given_as: dict[str, str] = {}
        for key, value in values.items():
            if key not in names:
                hint = did_you_mean(key, list(names))
                raise TypeError(f"{where} got an unexpected keyword argument {clip(key, 40)}" + (f"; {hint}" if hint else ""))
            field = names[key]
            if value is None and field != "model":  # None is "not given": say so by leaving the keyword out
                raise TcalcError(f"{key}=None: leave {key} out for its default, or give a value")
            if field in fields:
                first, second = sorted((given_as[field], key), key=lambda k: (k == field, k))
                raise TypeError(f"{where} got {first!r} and {second!r}, one option under two names; give one")
            fields[field], given_as[field] = value, key
        return cls._validated(fields, given_as, lambda field: f"{given_as[field]}=")

    @classmethod
    def from_cli(cls, values: dict[str, Any]) -> Self:
        """The command line's door: typer's values by field name (already parsed by Opt.parse)."""
        options = cls.options()
        return cls._validated(values, {}, lambda field: (options[field].spellings() or [field.upper()])[0] + " ",
                              parsed=True)

    @classmethod
    def _validated(cls, fields: dict[str, Any], given_as: dict[str, str], label: Callable[[str], str],
                   parsed: bool = False) -> Self:
        options = cls.options()
        clean: dict[str, Any] = {}
        for field, value in fields.items():
            o = options[field]
            if value is not None and not parsed:
                try:
                    strict(value, o.parse, cls.model_fields[field].annotation, text_ok=True)
                except ValueError as exc:
                    raise TcalcError(f"{label(field)}{clip(value, 40)}: {exc}") from None
            if value is not None and o.parse is not None and not parsed:
                try:
                    value = o.parse(value)
                except TcalcError:
                    raise
                except ValueError as exc:
                    raise TcalcError(f"{label(field)}{clip(value, 40)}: {exc}") from None
            clean[field] = value
        try:
            request = cls.model_validate(clean)
        except ValidationError as exc:
            error = exc.errors()[0]
            field = str(error["loc"][0]) if error.get("loc") else "?"
            if error.get("type") == "missing":  # a required option not given (check's files, schema's name)
                wanted = options.get(field)
                spelled = wanted.spellings()[0] if wanted is not None and wanted.flags else field.upper()
                raise TcalcError(f"{field} is required and was not given; give it ({field}=... in the API and MCP, "
                                 f"{spelled} on the command line)") from None
            try:
                name = label(field) if field in options else f"{field}="
            except KeyError:  # a field the door did not name (a model validator's)
                name = f"{field}="
            raise TcalcError(f"{name}{clip(clean.get(field), 40)}: {error['msg'][:1].lower()}{error['msg'][1:]}") from None
        request.check(label)
        return request

    def check(self, label: Callable[[str], str]) -> None:
        """Rules between a request's options (an option that means nothing without another is an
        error naming both, never silence); `label(field)` spells a field as its door does."""

    # ------------------------------------------------------------------ what the body reads
    def given(self, *names: str) -> dict[str, Any]:
        """The fields named (default: every job-file field) as {name: value}, None included: the
        flags of `model.config.resolve` (None: not given, the job file or the default decides)."""
        keys = names or tuple(n for n, o in self.options().items() if o.job)
        return {name: getattr(self, name) for name in keys}


def check_section(section: str, values: dict[str, Any], parsers: dict[str, Callable[[Any], Any]],
                  where: str = "") -> dict[str, Any]:
    """A job file's section read as the flags are: each key whose option has a parser is parsed by
    it (`S: 8k` is 8192; `ttft_s: 0`, `block_size: 0`, `memory_utilization: 1.5` are errors naming
    the file, the section and the key), so a job file is validated as the command line is."""
    out = dict(values)
    for key, value in values.items():
        parse = parsers.get(key)
        if parse is None or value is None:
            continue
        try:
            strict(value, parse)
            out[key] = parse(value)
        except TcalcError:
            raise
        except ValueError as exc:
            raise TcalcError(f"{where + ': ' if where else ''}{section}: {key} ({clip(value, 40)}): {exc}") from None
    return out


def strict(value: Any, parse: Callable[[Any], Any] | None, annotation: Any = None, *, text_ok: bool = False) -> None:
    """A value from a program or a file (the API, a job file, an MCP call) keeps its type, as a
    flag's text cannot: a whole number is not a float (`block_size: 16.0`), a switch is a boolean
    (`cuda_graphs='yes'`), and in a job file a number is not text (`ttft: '1'`; the API takes the
    CLI's text, `tokens_per_s="1e5"`, as the web page sends it). ValueError with the reason."""
    if parse in FLOAT_PARSERS and isinstance(value, str) and not text_ok:
        raise ValueError("is text, not a number; give the number itself (without quotes)")
    if parse in WHOLE_PARSERS and isinstance(value, float):
        raise ValueError(f"is a float, not a whole number; give {int(value) if value.is_integer() else 'a whole number'}")
    if parse is None and annotation in (bool, bool | None) and not isinstance(value, bool):
        raise ValueError("is not a boolean; give true or false")


def checked_job(job: Any, *requests: type[Request], where: str = "") -> Any:
    """A job file (sources.presets.JobFile) with the sections the request classes read parsed by
    their fields' parsers (check_section): a job file's value is checked as the flag's."""
    import dataclasses

    if job is None:
        return None
    parsers: dict[str, dict[str, Callable[[Any], Any]]] = {}
    for cls in requests:
        if cls.section is not None:
            for name, o in cls.options().items():
                if o.job and o.parse is not None:
                    parsers.setdefault(cls.section, {}).setdefault(name, o.parse)
    changes = {name: check_section(name, getattr(job, name), table, where or str(job.path))
               for name, table in parsers.items() if getattr(job, name)}
    return dataclasses.replace(job, **changes) if changes else job


# The help lines of the compute dtype and its bytes, which every command that prices work shares.
# The option every time command shares (issue 37): a profile `tcalc calibrate --output` wrote
# (declared here, not in requests/calibrate.py, so that a time command does not build CalibrateRequest).
ProfileOpt = Annotated[Path | None, opt("--profile", help="A calibrated time profile (YAML) that `tcalc calibrate --output` wrote: its fitted GEMM efficiency, exposed-communication factor and per-step overhead replace the defaults; the answer says it is calibrated and on what \\[default: none: the built-in profile].", job=False)]


DTYPE_HELP = "Compute dtype: fp32 | fp16 | bf16 | fp8 (the design card's p: 4, 2, 2, 1 bytes per value)"
P_HELP = "p: bytes per value of the compute dtype (4 fp32, 2 bf16, 1 fp8); the same as --dtype"


# ============================================================================ parsers
# Each takes what a person types or a program passes (text or a number) and returns the value, or
# raises ValueError with the reason; the door adds the option's name.
def whole(text: Any) -> int:
    """A positive integer (counts, sizes, parallel degrees): 8192, 8k, 4M, 1e3, 1_000."""
    from transformer_calc.model.config import parse_whole

    return parse_whole(text, low=1)


def whole_or_zero(text: Any) -> int:
    """A count where 0 means none (images per prompt)."""
    from transformer_calc.model.config import parse_whole

    return parse_whole(text, low=0)


def length(text: Any) -> int:
    """A sequence length: 8k = 8192, 128k = 131072."""
    from transformer_calc.model.config import parse_whole

    return parse_whole(text, low=1, binary=True)


MAX_NODE_SIZE = 1024  # GPUs in one NVLink domain: 8 (HGX), 72 (GB200/GB300 NVL72), 576 (NVL576, announced)


def node_size(text: Any) -> int:
    """GPUs per NVLink domain: a whole number up to MAX_NODE_SIZE (plan enumerates T within it)."""
    from transformer_calc.model.config import parse_whole

    value = parse_whole(text, low=1)
    if value > MAX_NODE_SIZE:
        raise ValueError(f"{value} GPUs in one NVLink domain is beyond any system (NVL72: 72, NVL576: 576); "
                         f"use at most {MAX_NODE_SIZE}")
    return value


def zero_stage(text: Any) -> int:
    from transformer_calc.model.config import parse_whole

    return parse_whole(text, low=0, high=3)


def count(text: Any) -> int:
    """A token or FLOP budget: 300e9, 1.4T, 70B."""
    from transformer_calc.model.config import parse_whole

    try:
        return parse_whole(text, low=1)
    except TcalcError:
        raise
    except ValueError as exc:
        reason = str(exc).split(" (write e.g.")[0].split("; use")[0]
        if not any(ch.isdigit() for ch in str(text)):
            raise ValueError("not a number; write e.g. 300e9, 1.4T or 70B") from None
        raise ValueError(f"{reason}; write e.g. 300e9, 1.4T or 70B") from None


def _number(text: Any, example: str) -> float:
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is a boolean, not a number; write e.g. {example}")
    try:
        return float(str(text).strip())
    except TcalcError:
        raise
    except (ValueError, OverflowError):
        raise ValueError(f"{clip(text, 40)} is not a number; write e.g. {example}") from None


def _as_given(text: Any, value: float) -> float:
    """A number given as a number keeps its type (a job file's 100 stays 100 in the JSON); text
    becomes the float it reads as."""
    return text if isinstance(text, (int, float)) and not isinstance(text, bool) else value


def fraction(text: Any) -> float:
    """A fraction in (0, 1] (an efficiency, a memory utilization)."""
    value = _number(text, "0.9")
    if not (math.isfinite(value) and 0 < value <= 1):
        raise ValueError(f"{clip(text, 40) if isinstance(text, str) else value} is out of range; use a fraction in (0, 1], e.g. 0.9")
    return _as_given(text, value)


def unit_interval(text: Any) -> float:
    """A fraction in [0, 1] (an acceptance rate)."""
    value = _number(text, "0.7")
    if not (math.isfinite(value) and 0 <= value <= 1):
        raise ValueError(f"{clip(text, 40) if isinstance(text, str) else value} is out of range; use a fraction in [0, 1]")
    return _as_given(text, value)


def seconds(text: Any) -> float:
    """A duration in seconds >= 0 (finite)."""
    value = _number(text, "0.05")
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{clip(text, 40) if isinstance(text, str) else value} is out of range; use a finite number of seconds >= 0")
    return _as_given(text, value)


def positive(text: Any) -> float:
    """A positive finite number (seconds, a rate, bandwidth, a price)."""
    value = _number(text, "1.5")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{clip(text, 40) if isinstance(text, str) else value} is out of range; use a positive finite number")
    return _as_given(text, value)


def text(value: Any) -> str:
    """A name or a word (a preset, a GPU, an enum value): a string, never a number or a list."""
    if isinstance(value, str):
        return value
    if hasattr(value, "__fspath__"):
        return str(value)
    raise ValueError(f"expected a name, not {type(value).__name__}")


def paths(value: Any) -> list[Path]:
    """One or more file paths (a positional FILES argument): strings or paths, never numbers."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not isinstance(item, (str, Path)):
            raise ValueError(f"takes paths, not {type(item).__name__}")
    return [Path(item) for item in items]


FLOAT_PARSERS = (fraction, unit_interval, seconds, positive)
WHOLE_PARSERS = (whole, whole_or_zero, length, node_size, zero_stage)
