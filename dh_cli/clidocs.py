"""dh's man pages (roff) and shell completion scripts, made from the CLI itself: the Click
command tree is walked (Typer carries its own copy of Click, so Click-based man-page tools
cannot read it). The output is deterministic (no dates, no machine paths). `dh man` and
`dh completion` print them; `python -m dh_cli._gen_docs` writes the checked-in copies."""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import config, errors

SHELLS = {"bash": "dh.bash", "zsh": "_dh", "fish": "dh.fish"}  # shell -> its script's file name
COMPLETE_VAR = "_DH_COMPLETE"

# EXIT STATUS comes from the error classes (errors.py), ENVIRONMENT from the settings and the
# variables read beside them (config.py): documented where they are decided.
EXIT_CODES = errors.exit_codes()
ENVIRONMENT = config.environment()

FILES = [
    ("$DH_HOME/dh.db", "The log: every session, native record and dh event (SQLite, WAL, mode 0600, "
                       "folder 0700), with dh.db-wal and dh.db-shm beside it."),
    ("$DH_HOME/locks/", "One lock file per session being run, so two dh processes never drive "
                        "one session."),
    ("$DH_HOME/checkpoint.lock", "Taken in turn by the dh processes of the machine while one folds "
                                 "the WAL back into the log."),
    ("$XDG_CONFIG_HOME/dh/config.toml", "Settings; see CONFIGURATION."),
    ("~/.claude/projects/", "Claude Code transcripts (read; rebuilt on resume when missing)."),
    ("~/.codex/sessions/", "Codex rollouts (read; rebuilt on resume when missing)."),
    ("~/.local/share/opencode/opencode.db", "OpenCode's database (read; restored through "
                                            "`opencode import` on resume)."),
    ("~/.pi/agent/sessions/", "Pi sessions (read; rebuilt on resume when missing)."),
]

CONFIG_EXAMPLE = """world = "local"
postgres_url = "postgresql://dh@db.internal/dh"
stall_timeout = 300
tool_grace = 3
continue_prompt = "Continue from where you left off."

[restart]
max_restarts = 5
start_secs = 1
backoff_cap = 30

[replay]
Bash = "never"
Read = "safe\""""


# reading the app ----------------------------------------------------------------------------
@dataclass
class Doc:
    path: str  # "dh log show"
    command: object  # the Click command or group
    ctx: object

    @property
    def is_group(self) -> bool:
        return hasattr(self.command, "commands")


def walk(root) -> list[Doc]:
    """The root Click command and every group and command under it, depth first, in
    registration order."""
    ctx = root.make_context("dh", [], resilient_parsing=True)
    out = [Doc("dh", root, ctx)]
    _walk(root, ctx, "dh", out)
    return out


def _walk(group, ctx, prefix: str, out: list[Doc]) -> None:
    for name, command in group.commands.items():
        if command.hidden:
            continue
        sub = command.make_context(name, [], parent=ctx, resilient_parsing=True)
        doc = Doc(f"{prefix} {name}", command, sub)
        out.append(doc)
        if doc.is_group:
            _walk(command, sub, doc.path, out)


def split_help(text: str | None) -> tuple[str, list[str], list[str]]:
    """(summary, paragraphs, example lines) of a command's help."""
    import inspect

    text = inspect.cleandoc(text or "").partition("\f")[0]
    body, _, example = text.partition("Example:")
    paragraphs = [p.strip() for p in body.split("\n\n") if p.strip()]
    summary = paragraphs.pop(0) if paragraphs else ""
    lines = [line.strip() for line in example.splitlines() if line.strip()]
    return " ".join(summary.split()), [" ".join(p.split()) for p in paragraphs], lines


def usage(doc: Doc) -> str:
    pieces = doc.command.collect_usage_pieces(doc.ctx)
    if doc.is_group:
        pieces = [p for p in pieces if p != "COMMAND [ARGS]..."] + ["COMMAND [ARGS]..."]
    return " ".join([doc.path, *pieces])


def options(doc: Doc) -> list[tuple[str, str]]:
    records = (p.get_help_record(doc.ctx) for p in doc.command.get_params(doc.ctx) if not p.hidden)
    return [r for r in records if r]


# roff ---------------------------------------------------------------------------------------
def esc(text: str) -> str:
    """Plain text as roff: backslashes and dashes escaped, no line starting a request."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"^([.'])", r"\\&\1", text, flags=re.M)


def _bold_opts(term: str) -> str:
    """`-o, --output <path>` as bold names and an italic metavar."""
    names, metavar = [], []
    for token in term.split():
        if not metavar and (token.startswith("-") or not names):
            names.append(token.rstrip(","))
        else:
            metavar.append(token)
    bold = ", ".join(f"\\fB{esc(name)}\\fR" for name in names)
    return bold + (f" \\fI{esc(' '.join(metavar))}\\fR" if metavar else "")


def roff_command(doc: Doc, level: str = ".SS") -> list[str]:
    out = [f"{level} {esc(doc.path)}", f"\\fB{esc(usage(doc))}\\fR", *_prose(doc)]
    for term, help_ in options(doc):
        out += [".TP", _bold_opts(term), esc(" ".join(help_.split()))]
    return out


def roff_pairs(title: str, pairs: list[tuple[str, str]], bold: bool = True) -> list[str]:
    out = [f".SH {title}"]
    for term, text in pairs:
        out += [".TP", f"\\fB{esc(term)}\\fR" if bold else esc(term), esc(text)]
    return out


def _header(name: str, summary: str, version: str) -> list[str]:
    title = name.upper().replace(" ", "-")
    return [f'.TH {title} 1 "" "dh {version}" "User Commands"', ".SH NAME",
            f"{esc(name.replace(' ', '-'))} \\- {esc(summary)}"]


def _prose(doc: Doc) -> list[str]:
    """The help's paragraphs, then its Example: lines kept as they are (no filling)."""
    summary, paragraphs, example = split_help(doc.command.help)
    out = []
    for para in [summary, *paragraphs]:
        out += [".PP", esc(para)]
    if example:
        out += [".PP", "Example:", ".RS", ".nf", *[esc(line) for line in example], ".fi", ".RE"]
    return out


def _page_top(doc: Doc, version: str) -> list[str]:
    summary = split_help(doc.command.help)[0]
    return _header(doc.path, summary, version) + [
        ".SH SYNOPSIS", f"\\fB{esc(usage(doc))}\\fR", ".SH DESCRIPTION", *_prose(doc)[1:]]


def man_root(docs: list[Doc], version: str) -> str:
    root = docs[0]
    lines = _page_top(root, version) + [".SH OPTIONS"] + [x for term, help_ in options(root)
                                for x in (".TP", _bold_opts(term), esc(help_))]
    lines += [".SH COMMANDS"]
    for doc in docs[1:]:
        lines += roff_command(doc)
        if doc.is_group:
            lines += [".PP", f"See \\fB{esc(doc.path.replace(' ', '-'))}\\fR(1)."]
    lines += _common_sections(docs)
    return "\n".join(lines) + "\n"


def man_group(group: Doc, docs: list[Doc], version: str) -> str:
    lines = _page_top(group, version) + [".SH COMMANDS"]
    for doc in docs:
        if doc.path.startswith(group.path + " "):
            lines += roff_command(doc)
    lines += _exit_section() + [".SH SEE ALSO", "\\fBdh\\fR(1)"]
    return "\n".join(lines) + "\n"


def _exit_section() -> list[str]:
    return roff_pairs("EXIT STATUS", EXIT_CODES)


def _common_sections(docs: list[Doc]) -> list[str]:
    lines = _exit_section() + roff_pairs("ENVIRONMENT", ENVIRONMENT)
    lines += roff_pairs("FILES", FILES, bold=False)
    lines += [".SH CONFIGURATION", esc("$XDG_CONFIG_HOME/dh/config.toml holds defaults for "
              "dh run and dh resume. A setting comes from, lowest first: dh's default, the "
              "file, the environment, a command-line flag; dh config show prints each one "
              "with where it came from. For example:"), ".RS", ".nf",
              *[esc(x) for x in CONFIG_EXAMPLE.splitlines()], ".fi", ".RE"]
    groups = [d.path.replace(" ", "-") for d in docs if d.is_group and d.path != "dh"]
    lines += [".SH SEE ALSO", ", ".join(f"\\fB{esc(g)}\\fR(1)" for g in groups)]
    return lines


# completions --------------------------------------------------------------------------------
def completion(shell: str) -> str:
    """The completion script for SHELL, as `dh --show-completion SHELL` prints it: it asks dh
    itself for the candidates (_DH_COMPLETE), so it is the same for every dh."""
    from typer._completion_shared import get_completion_script

    script = get_completion_script(prog_name="dh", complete_var=COMPLETE_VAR, shell=shell)
    header = (f"# {shell} completion for dh, generated by `python -m dh_cli._gen_docs`.\n"
              f"# It asks dh itself for the candidates, so it follows every command dh has.\n")
    return header + script.rstrip("\n") + "\n"


# pages --------------------------------------------------------------------------------------
def man_pages(root) -> dict[str, str]:
    """Every man page of the root Click command by its name: dh, then dh-GROUP for each group."""
    from . import __version__

    docs = walk(root)
    pages = {"dh": man_root(docs, __version__)}
    for doc in docs[1:]:
        if doc.is_group:
            pages[doc.path.replace(" ", "-")] = man_group(doc, docs, __version__)
    return pages
