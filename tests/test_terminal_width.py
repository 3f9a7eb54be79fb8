"""The terminal views at 80 columns, read off a real terminal (tmux, 80x24): dh fits every line
itself (tmux never had to wrap one), a line that is too long breaks between words (every
word of the 80-column screen is a word of the same view on a 300-column terminal), and no
Python repr, pydantic wording or cut help text is shown."""

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from dh_cli import _gen_docs
from dh_cli.cli import app
from tests.require import skip_if_missing

from .helpers.crashed import crashed  # noqa: F401 (a fixture)

TMUX = shutil.which("tmux")
ROOT = Path(__file__).parent.parent
END = "@@dh-done@@"
NOT_DH = [r"\bNone\b", r"\b0o[0-7]{3}\b", r"\{'", r"Value error", r"Input should be",
          r"<[a-z_.]+ object at 0x"]


class Terminal:
    """A private tmux server, kept up by a session of its own (a server whose last session
    ends exits, and the next view's new-session could meet it exiting); each view runs in a
    fresh session of the asked size."""

    def __init__(self, folder: Path):
        self.socket = folder / "tmux.sock"
        self.count = 0
        self.tmux("new-session", "-d", "-s", "keep", "sleep 3600")

    def tmux(self, *args) -> str:
        done = subprocess.run([TMUX, "-S", str(self.socket), "-f", "/dev/null", *args],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    def close(self) -> None:
        self.tmux("kill-server")

    def show(self, argv: list[str], width: int, height: int) -> tuple[str, str]:
        """(the screen as shown, the same with tmux's own wraps joined): after dh printed
        everything, or its pager shows its first page."""
        self.count += 1
        name = f"v{self.count}"
        env = {"DH_HOME": os.environ["DH_HOME"], "PYTHONPATH": str(ROOT), "PAGER": "less -R",
               "LESS": "FRX", "TERM": "xterm-256color", "COLUMNS": "", "LINES": ""}
        command = " ".join(f"{k}='{v}'" for k, v in env.items()) + " python -m dh_cli " + \
            " ".join(argv) + f"; echo {END}; sleep 600"
        self.tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), command)
        try:
            shown = self._wait(name)
            return shown, self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", name)
        finally:
            self.tmux("kill-session", "-t", name)

    def _wait(self, name: str) -> str:
        deadline = time.monotonic() + 120
        while True:
            shown = self.tmux("capture-pane", "-p", "-S", "-", "-t", name)
            lines = shown.rstrip("\n").splitlines()
            if END in shown or (lines and lines[-1].strip() == ":"):  # done, or less waits
                return shown
            assert time.monotonic() < deadline, shown
            time.sleep(0.2)


def _lines(screen: str) -> list[str]:
    return [line.rstrip() for line in screen.splitlines()]  # -J keeps trailing spaces


def _words(screen: str) -> set[str]:
    """Words as a person reads them: split at spaces and after a path's '/'; a clip's '…',
    relative times ('14m ago' may turn '15m' between two looks), plain figures (`dh doctor`'s
    free bytes change between two looks) and less's prompt set aside."""
    text = re.sub(r"\n:\s*$", "\n", screen.replace(END, ""))
    words = {w.strip("…") for w in re.split(r"\s+|(?<=/)", text)}
    return {re.sub(r"^(\d+[smhdw]|\d[\d,.]*)$", "N", w) for w in words if w.strip("…│╭╮╰╯─")}


VIEWS = {"status": [], "list": ["log", "list"], "show": ["log", "show", "{id}"],
         "search": ["log", "search", "files"], "doctor": ["doctor"], "help": ["--help"],
         "run help": ["run", "--help"]}


@skip_if_missing(TMUX is None, "tmux is not installed (.ci/run installs it with apt-get)")
@pytest.mark.parametrize("view", VIEWS)
def test_the_view_fits_80_columns_and_wraps_at_words(view, crashed, tmp_path):
    argv = [a.format(id=crashed[0]) for a in VIEWS[view]]
    terminal = Terminal(tmp_path)
    try:
        shown, joined = terminal.show(argv, 80, 24)
        wide, _ = terminal.show(argv, 300, 200)
    finally:
        terminal.close()
    assert _lines(shown) == _lines(joined), "a line longer than 80 columns: the terminal wrapped it"
    cut = _words(shown) - _words(wide)
    assert not cut, f"words cut at 80 columns: {sorted(cut)}\n{shown}"
    for pattern in NOT_DH:
        assert not re.search(pattern, shown), (pattern, shown)
    if "help" in view:
        assert "…" not in shown


RESUMED = sorted((ROOT / "tests" / "fixtures" / "resumed").glob("*.db"))
EPOCH_MS = r"(?<![\w.-])1\d{12}(?![\w.-])"  # a raw time in milliseconds (OpenCode's)


@skip_if_missing(TMUX is None, "tmux is not installed (.ci/run installs it with apt-get)")
@pytest.mark.parametrize("captured", RESUMED, ids=[p.stem for p in RESUMED])
def test_a_resumed_session_shown_whole_at_80_columns(captured, dh_home, tmp_path):
    """`dh log show --no-pager` of each captured killed-and-resumed session, every line of
    it (the scrollback too): fitted by dh, wrapped at words, no Python None, no raw epoch
    milliseconds, and every clip ('…') made after a whole word of the log."""
    dh_home.mkdir(parents=True, exist_ok=True)
    shutil.copy(captured, dh_home / "dh.db")
    sid = json.loads(_dh("log", "list", "--json"))[0]["id"]
    terminal = Terminal(tmp_path)
    try:
        shown, joined = terminal.show(["log", "show", sid, "--no-pager"], 80, 24)
        wide, _ = terminal.show(["log", "show", sid, "--no-pager"], 300, 200)
    finally:
        terminal.close()
    assert "last turn: complete" in shown, shown  # the whole view, not a first screen
    assert _lines(shown) == _lines(joined), "a line longer than 80 columns: the terminal wrapped it"
    assert not _words(shown) - _words(wide), f"words cut at 80 columns\n{shown}"
    for pattern in NOT_DH + [EPOCH_MS]:
        assert not re.search(pattern, shown), (pattern, shown)
    logged = set(re.split(r"[\s\"]+|(?<=/)", _dh("log", "show", sid, "--json")))
    clipped = [w for w in re.split(r"\s+|(?<=/)", shown) if w.endswith("…") and w[:-1] not in logged]
    assert not clipped, f"words clipped inside: {clipped}"


def _helps(command, path: str = "dh"):
    import click

    yield path, command.help or ""
    for name, sub in getattr(command, "commands", {}).items() if isinstance(command, click.Group) else ():
        yield from _helps(sub, f"{path} {name}")


def test_help_paragraphs_reflow_and_examples_fit_80_columns():
    """Every paragraph of every command's help is one line (Rich keeps a line break inside a
    paragraph, so a hard-wrapped text breaks raggedly at 80 columns); an example, a line of
    its own, fits the help screen's 80 columns (76 inside its margins)."""
    for path, text in _helps(typer.main.get_command(app)):
        for paragraph in text.strip().split("\n\n"):
            lines = paragraph.splitlines()
            if lines[0].endswith(":"):  # Example: and its lines, each on its own
                assert all(line.startswith("  ") and len(line) <= 76 for line in lines[1:]), (path, lines)
            else:
                assert len(lines) == 1, (path, paragraph)


def _dh(*argv: str) -> str:
    done = subprocess.run(["python", "-m", "dh_cli", *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_doctor_writes_modes_as_chmod_does(run_dh, crashed):
    (check,) = [c for c in json.loads(run_dh("doctor", "--json").stdout) if c["name"] == "log privacy"]
    assert check["message"].endswith(" is 0600 in a 0700 folder")
    assert (check["details"]["file_mode"], check["details"]["folder_mode"]) == ("0600", "0700")


@pytest.mark.parametrize("argv,message", [
    (["log", "list", "--limit", "x"], "Invalid value for '--limit': must be a whole number"),
    (["log", "show", "x", "--turn", "0"], "Invalid value for '--turn': must be at least 1"),
    (["log", "export", "x", "--format", "pdf"], "Invalid value for '--format': 'pdf' is not one of"),
])
def test_a_bad_option_is_told_in_dh_words(argv, message):
    done = subprocess.run(["python", "-m", "dh_cli", *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}, timeout=60)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Value error" not in done.stderr and "Input should be" not in done.stderr


COMMANDS = [doc.path.split()[1:] for doc in _gen_docs.walk(typer.main.get_command(app))]


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(["dh", *p]))
def test_every_help_fits_80_columns_uncut(path):
    """Rich cuts a cell that does not fit with '…'; every help text must fit at 80 columns."""
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    assert "…" not in result.output and max(map(len, result.output.splitlines())) <= 80, result.output


WIDE = ("把测试修好，然后运行全部测试 🚀✅ " * 6 + "ファイルを作成してください。 " * 3)
LONG_HOST = "build-machine-number-seventeen-in-the-second-rack.datacenter.example.internal"


@pytest.fixture
def wide_session(dh_home, tmp_path):
    """A Pi session whose last prompt is wide text (CJK, emoji: two columns a character),
    shown as running on another host with a long name."""
    import sqlite3

    from .helpers.secrets_text import imported_pi_prompt

    sid, _ = imported_pi_prompt(tmp_path, WIDE)
    with sqlite3.connect(dh_home / "dh.db") as db:
        db.execute("UPDATE sessions SET host = ?, state = 'running', cwd = ?",
                   [LONG_HOST, "/srv/项目/" + "子目录/" * 12 + "最后"])
    return sid


@skip_if_missing(TMUX is None, "tmux is not installed (.ci/run installs it with apt-get)")
def test_wide_text_and_a_long_host_fit_80_columns(wide_session, tmp_path):
    """Wide characters take two columns: dh fits by columns, not characters."""
    terminal = Terminal(tmp_path)
    try:
        for argv in (["log", "show", wide_session, "--no-pager"], [], ["log", "list"],
                     ["log", "search", "ファイル"]):
            shown, joined = terminal.show(argv, 80, 24)
            assert _lines(shown) == _lines(joined), (argv, "the terminal wrapped a line", joined)
            assert "把测试" in shown or argv[:2] != ["log", "show"], shown
    finally:
        terminal.close()


@pytest.mark.parametrize("text", [WIDE, "  tool Bash [ok] " + WIDE + " /srv/" + "folder/" * 20, "x" * 200,
                                  "a  b   c " * 20, "tab\there " * 15, "é\u0301" * 90])
def test_fitted_keeps_every_word_within_the_columns(text):
    from dh_cli.output import cells, fitted

    lines = fitted(text, 80).split("\n")
    assert all(cells(line) <= 80 for line in lines), lines
    assert "".join("".join(lines).split()) == "".join(text.expandtabs().split())
