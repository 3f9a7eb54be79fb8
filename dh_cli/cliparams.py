"""Command-line values that need no pydantic.

Typer 0.29 coerces every parameter's value through a pydantic TypeAdapter, built for each
parameter of the command on every invocation, given or not: for `dh run pi -- -p go` that is
13 adapters, the import of pydantic and typer._adapters, about a third of a `dh run`'s CPU
before it launches anything (bench/bench_startup.py). Most of dh's parameters are text or
absent. Here a parameter that was not given (None) is left as typer would leave it, and text
(`str`, `list[str]`) is taken as it is; anything else (numbers, choices, paths, files, a
custom parser) is handed to typer's own coercion, built on first use as before. Typer
without that coercion layer is left untouched."""

from __future__ import annotations

from typing import Any, get_args, get_origin

try:
    from typer import _coercion, core
except ImportError:  # another typer: its own coercion stays
    _coercion = core = None


class PlainParam:
    """What typer's runtime parameter does, for the values that need no conversion."""

    def __init__(self, descriptor):
        self.descriptor = descriptor
        self.text, self.texts = _plain_kind(descriptor)
        self.built = None  # typer's own, for anything else

    def coerce(self, value: Any, param, ctx) -> Any:
        if value is None:
            return () if param.multiple or param.nargs == -1 else None
        if self.text and isinstance(value, str):
            return value
        if self.texts and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return list(value)
        if self.built is None:
            self.built = _coercion.build_runtime_param(self.descriptor)
        try:
            return self.built.coerce(value, param=param, ctx=ctx)
        except _coercion.UsageError as exc:
            raise _in_dh_words(exc) from None


def _in_dh_words(exc):
    """typer's usage error with pydantic's wording ("Input should be", "Value error,") in
    dh's (config.problem_text), keeping its kind (a bad parameter stays one)."""
    from pydantic import ValidationError

    from .config import problem_text

    cause = exc.__cause__
    while cause is not None and not isinstance(cause, ValidationError):
        cause = cause.__cause__
    if cause is not None and cause.errors():
        exc.message = problem_text(cause.errors()[0])
    return exc


def _plain_kind(descriptor) -> tuple[bool, bool]:
    """(a str, a list of str) when no parser, file or choice changes what the text means."""
    info = descriptor.parameter_info
    if info.parser is not None or descriptor.file_annotation is not None:
        return False, False
    annotation = descriptor.annotation
    return annotation is str, get_origin(annotation) is list and get_args(annotation) == (str,)


def _runtime_param(self):
    if self._runtime_param is None:
        self._runtime_param = PlainParam(self.type_descriptor)
    return self._runtime_param


def install() -> None:
    """Called once by dh_cli.cli, before any command runs."""
    if core is not None and hasattr(core._TyperParameter, "get_runtime_param") \
            and hasattr(_coercion, "build_runtime_param"):
        core._TyperParameter.get_runtime_param = _runtime_param
