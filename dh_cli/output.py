"""All terminal output goes through here: one Rich console for stdout, one for stderr. Colour
only on a terminal (Rich's own check) and never with NO_COLOR; `--json` prints plain JSON."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from contextlib import contextmanager
from typing import Iterable



def console(name: str):
    """The Rich console `out` or `err`, made on first use: importing Rich costs `dh run`
    (which prints through note() only) 14-17 ms of its start-up (-X importtime)."""
    if name not in globals():
        from rich.console import Console

        globals()[name] = Console(stderr=name == "err", highlight=False, soft_wrap=True)
    return globals()[name]


def __getattr__(name: str):
    """`output.out`, `output.err`: see console()."""
    if name not in ("out", "err"):
        raise AttributeError(name)
    return console(name)


def is_terminal() -> bool:
    return sys.stdout.isatty()


def terminal_width() -> int | None:
    """The columns of the terminal stdout is, or None when it is not one (a pipe, a file:
    lines are then not wrapped)."""
    import shutil

    return shutil.get_terminal_size().columns if is_terminal() else None


def shown(value, show_secrets: bool = False):
    """Every string in value as a text view shows what a transcript or a world holds
    (redact.py): credentials masked and control characters made visible, terminal or not (a
    pipe into `head` ends on a terminal too)."""
    from .redact import clean

    return clean(value, show_secrets, True)


def visible(text: str) -> str:
    """A line of a text view with its control characters as visible `\\x1b` text: every
    text view prints through here, so a record's OSC 52 or clear-screen never reaches a
    terminal, piped or not (dh's own styling goes through Rich, never as bytes in text)."""
    from .redact import neutralise

    return neutralise(text)


def print_json(data, cleaned: bool = False) -> None:
    """data as JSON, masked first unless the caller cleaned it (`--show-secrets`); JSON
    escapes C0 controls itself, C1 ones are made visible on a terminal."""
    from .redact import clean

    data = data if cleaned else clean(data, False, is_terminal())
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def error_line(message: str, hint: str | None = None) -> None:
    from .redact import clean

    text = f"Error: {message}"
    if hint:
        text += f" (hint: {hint})"
    # it may name what a world or a transcript holds (a holder's host, a refusal's reason)
    console("err").print(clean(text, False, True), markup=False, highlight=False)


def note_shown(message: str) -> None:
    """A line that holds values from a world or a transcript (the worker's): shown() always,
    terminal or not (a log file is read on a terminal later)."""
    from .redact import clean

    note(clean(message, False, True))


def note(message: str) -> None:
    # Plain text either way (no markup, no highlighting, no wrapping), so skip Rich's
    # rendering: its first use costs ~8 ms, paid between a crash and the relaunch.
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def print_text(text: str) -> None:
    """text and a newline on stdout as `out.print(text, markup=False, soft_wrap=True)` prints
    it (emoji codes replaced, by Rich's own function), control characters made visible(),
    without Rich's work on each line: the 10,001 lines of a `dh log list` took it 0.15 s. A
    text with a tab goes through Rich, which expands tabs by cells."""
    target = console("out")
    text = visible(text)
    if "\t" in text:
        target.print(text, markup=False, soft_wrap=True)
        return
    from rich._emoji_replace import _emoji_replace

    target.file.write(_emoji_replace(text) + "\n")
    target.file.flush()


def table(title: str | None, columns: list[str], rows: list[list]) -> None:
    """Cells are shown() and never read as Rich markup: a world or a transcript wrote them."""
    from rich.table import Table
    from rich.text import Text

    grid = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        grid.add_column(column, overflow="fold")
    for row in rows:
        grid.add_row(*[Text(shown("" if v is None else str(v))) for v in row])
    console("out").print(grid)


def progress(label: str):
    """A progress bar on a terminal; a no-op context elsewhere."""
    from rich.progress import Progress

    return Progress(console=console("err"), disable=not console("err").is_terminal, transient=True)


def stream_json(key: str, items: Iterable, rest) -> None:
    """A JSON object whose `key` is an array written item by item (so a reader of any size
    prints in flat memory), then the keys of `rest()`, called once the items are out (it may
    hold what was learnt while they streamed). The layout is print_json's."""
    write = sys.stdout.write
    write("{\n  " + json.dumps(key) + ": [")
    first = True
    for item in items:
        text = json.dumps(item, indent=2, ensure_ascii=False, default=str)
        write(("\n" if first else ",\n") + "    " + text.replace("\n", "\n    "))
        first = False
    write("\n  ]" if not first else "]")
    for name, value in rest().items():
        text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
        write(",\n  " + json.dumps(name) + ": " + text.replace("\n", "\n  "))
    write("\n}\n")
    sys.stdout.flush()


@contextmanager
def pager(wanted: bool = True):
    """Page what is printed inside, as git does: only when stdout is a terminal, through
    $PAGER (else `less -R`; LESS=FRX unless set, so a short text is printed and less quits).
    Quitting the pager early ends the output quietly."""
    command = os.environ.get("PAGER", "less -R")
    if not wanted or not sys.stdout.isatty() or command.strip() in ("", "cat"):
        yield
        return
    env = {**os.environ, "LESS": os.environ.get("LESS", "FRX")}
    proc = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, env=env)
    stream = io.TextIOWrapper(proc.stdin, encoding="utf-8", errors="replace")
    out = console("out")
    saved = sys.stdout, out.file
    sys.stdout = out.file = stream
    try:
        yield
    except BrokenPipeError:
        pass
    finally:
        sys.stdout, out.file = saved
        try:
            stream.close()
        except BrokenPipeError:
            pass
        proc.wait()


def cells(text: str) -> int:
    """The columns text takes on a terminal: two for a wide character (CJK, most emoji),
    none for a combining mark or a zero-width one, one for the rest."""
    if text.isascii():
        return len(text)
    return sum(_char_cells(c) for c in text)


def _char_cells(char: str) -> int:
    import unicodedata

    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def cut_cells(text: str, room: int) -> str:
    """The longest start of text that takes at most `room` columns."""
    if text.isascii():
        return text[:max(0, room)]
    used = 0
    for at, char in enumerate(text):
        used += _char_cells(char)
        if used > room:
            return text[:at]
    return text


def clip_words(text: str, room: int) -> str:
    """text in at most `room` columns, cut after a whole word (a single word longer than the
    room is cut where it must be)."""
    text = " ".join(text.split())
    if cells(text) <= room:
        return text
    head = cut_cells(text, room - 1)
    cut = head.rfind(" ")
    return (head[:cut].rstrip(" ,;:") if cut > 0 else head) + "…"


def fitted(text: str, width: int | None) -> str:
    """text wrapped at words to `width` columns (None: as it is), each continuation indented
    under the line's own indent plus four."""
    if not width or (len(text) <= width // 2 and "\n" not in text):
        return text  # (a character takes at most two columns)
    return "\n".join(_wrap(part, width) for part in text.expandtabs().split("\n"))


def _wrap(part: str, width: int) -> str:
    """One line wrapped at its spaces, by columns: the spaces at a break are dropped, a word
    longer than half a line breaks after each '/' (a path between its folders), and one still
    longer than a line is cut where it must be."""
    if cells(part) <= width:
        return part
    lead = len(part) - len(part.lstrip(" "))
    indent = " " * min(width // 2, lead + 4)
    lines, line, gap = [], part[:lead], ""
    for token in re.split(r"( +)", part[lead:]):
        if not token or token.startswith(" "):
            gap = token
            continue
        for word in re.split(r"(?<=/)", token) if len(token) > width // 2 else [token]:
            line, gap = _place(lines, line, gap, word, (width, indent)), ""
    lines.append(line)
    return "\n".join(lines)


def _place(lines: list[str], line: str, gap: str, word: str, room: tuple[int, str]) -> str:
    """The line with word added after gap, or the line put in lines and word begun on a new
    one (cut into lines of its own while longer than one)."""
    width, indent = room
    if not word or cells(line + gap + word) <= width:
        return line + gap + word if word else line + gap
    if line.strip():
        lines.append(line)
        line = indent
    while cells(line + word) > width:
        head = cut_cells(word, width - cells(line)) or word[0]
        lines.append(line + head)
        word, line = word[len(head):], indent
    return line + word
