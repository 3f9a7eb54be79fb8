"""The generated man pages and completions match the CLI, every command explains itself with
an example, and every command that lists or reports can speak JSON."""

import copy
import json

import pytest
import typer

from dh_cli import _gen_docs
from dh_cli.cli import app

from .conftest import fixture_home

DOCS = _gen_docs.walk(typer.main.get_command(app))
# Commands that act rather than report: they have no --json.
ACTIONS = {"dh run", "dh resume", "dh log export", "dh demo", "dh workspace restore",
           "dh log trace",  # trace: needs a collector (tests/test_otel.py)
           "dh worker",  # dh worker: a long-running service
           "dh serve",  # dh serve: a web server (tests/test_serve.py)
           "dh completion", "dh man"}  # they print a script or a page


def test_checked_in_docs_are_byte_identical_to_a_fresh_generation(tmp_path):
    files = _gen_docs.render(app)
    _gen_docs.write(files, tmp_path)
    for rel in files:
        assert (tmp_path / rel).read_bytes() == (_gen_docs.ROOT / rel).read_bytes(), \
            f"{rel} is stale: run `python -m dh_cli._gen_docs`"
    assert _gen_docs.stale(files, _gen_docs.ROOT) == []


def test_a_command_added_without_regenerating_makes_the_docs_stale():
    changed = copy.copy(app)
    changed.registered_commands = list(app.registered_commands)

    @changed.command("throwaway")
    def throwaway() -> None:
        """Do nothing (a test command).

        Example:
          $ dh throwaway
        """

    assert "man/dh.1" in _gen_docs.stale(_gen_docs.render(changed), _gen_docs.ROOT)
    assert "throwaway" not in typer.main.get_command(app).commands  # the real app is untouched


def test_check_mode_passes_on_the_checked_in_files(capsys):
    assert _gen_docs.main(["--check"]) == 0


@pytest.mark.parametrize("doc", DOCS, ids=[d.path for d in DOCS])
def test_every_command_and_group_has_help_and_an_example(doc):
    summary, _, example = _gen_docs.split_help(doc.command.help)
    assert summary, f"{doc.path} has no help text"
    assert any(line.startswith("$ dh") for line in example), f"{doc.path} has no `$ dh` example"


def test_every_command_appears_in_the_main_man_page():
    page = (_gen_docs.ROOT / "man" / "dh.1").read_text()
    for doc in DOCS[1:]:
        assert f".SS {_gen_docs.esc(doc.path)}\n" in page


@pytest.mark.parametrize("doc", DOCS, ids=[d.path for d in DOCS])
def test_example_lines_render_on_lines_of_their_own_in_help(doc, run_dh, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    text = run_dh(*doc.path.split()[1:], "--help").stdout
    lines = {line.strip() for line in text.splitlines()}
    for example in _gen_docs.split_help(doc.command.help)[2]:
        assert example in lines, f"{example!r} is not on a line of its own in {doc.path} --help"


def test_completion_scripts_offer_every_top_level_command(run_dh, monkeypatch):
    monkeypatch.setenv("_DH_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", "dh ")
    monkeypatch.setenv("COMP_CWORD", "1")
    offered = run_dh().stdout.split()
    assert set(typer.main.get_command(app).commands) <= set(offered)


LEAVES = [d for d in DOCS if not d.is_group]


@pytest.mark.parametrize("doc", [d for d in LEAVES if d.path not in ACTIONS],
                         ids=[d.path for d in LEAVES if d.path not in ACTIONS])
def test_every_listing_or_reporting_command_has_json(doc):
    assert any("--json" in p.opts for p in doc.command.params), f"{doc.path} has no --json"


def _invocations(tmp_path, session_id):
    return {
        "dh import": ["import", "pi", "--all", "--home", str(fixture_home("pi", "basic", tmp_path))],
        "dh log list": ["log", "list"],
        "dh log show": ["log", "show", session_id],
        "dh log rebuild": ["log", "rebuild", session_id, "--to", str(tmp_path / "rebuilt")],
        "dh log status": ["log", "status"],
        "dh log schema": ["log", "schema"],
        "dh log cost": ["log", "cost", "--by", "session"],
        "dh log search": ["log", "search", "files"],
        "dh restore": ["restore", "--lost", "--dry-run"],
        "dh doctor": ["doctor"],
        "dh config show": ["config", "show"],
        "dh log docs": ["log", "docs", session_id],
        "dh workspace list": ["workspace", "list", session_id],
        "dh workspace diff": ["workspace", "diff", session_id],  # no snapshot: no change
        "dh shim install": ["shim", "install", "--dir", str(tmp_path / "shims")],
        "dh shim list": ["shim", "list", "--dir", str(tmp_path / "shims")],
        "dh shim remove": ["shim", "remove", "--dir", str(tmp_path / "shims")],
        "dh log rm": ["log", "rm", session_id, "--yes"],  # last: it removes the session
    }


def test_json_output_of_every_listing_command_parses(tmp_path, run_dh):
    """`dh world …` needs a PostgreSQL server; tests/test_world* cover its --json."""
    home = fixture_home("claude-code", "basic", tmp_path)
    assert run_dh("import", "claude", "--all", "--home", str(home)).exit_code == 0
    session_id = json.loads(run_dh("log", "list", "--json").stdout)[0]["id"]
    calls = _invocations(tmp_path, session_id)
    wanted = {d.path for d in LEAVES if d.path not in ACTIONS and not d.path.startswith("dh world")}
    assert wanted <= set(calls), f"add an invocation for {wanted - set(calls)}"
    for path, args in calls.items():
        result = run_dh(*args, "--json")
        assert result.exit_code in (0, 1), (path, result.output)  # doctor: 1 if a check fails
        json.loads(result.stdout)


def _man_section(name: str) -> str:
    page = (_gen_docs.ROOT / "man" / "dh.1").read_text()
    return page.split(f".SH {name}\n", 1)[1].split("\n.SH ", 1)[0]


def test_exit_status_lists_the_code_of_every_dh_error():
    from dh_cli import errors

    section = _man_section("EXIT STATUS")
    for klass in errors._family(errors.DhError):
        assert f"\\fB{klass.exit_code}\\fR\n" in section, f"{klass.__name__}'s exit code is not documented"
    assert "\\fB130\\fR\n" in section and "\\fB0\\fR\n" in section


def test_environment_lists_every_setting_variable_and_every_dh_variable_read():
    import re

    from dh_cli import config

    section = _man_section("ENVIRONMENT")
    documented = set(re.findall(r"\\fB([A-Z_<>]+)\\fR", section))
    assert set(config.ENV_KEYS) | {config.REPLAY_ENV} <= documented
    # every DH_ variable the code reads by name (environ[...], environ.get, getenv, env.get)
    source = "\n".join(p.read_text() for p in (_gen_docs.ROOT / "dh_cli").rglob("*.py"))
    read = set(re.findall(r"""(?:environ|getenv|env)(?:\.get)?[\[(]\s*["'](DH_[A-Z_0-9]+)["']""", source))
    demo_only = {"DH_DEMO_MODEL_URL"}  # set by `dh demo` for its own demo harness, never by a user
    assert read, "the scan found no variable at all: the pattern is broken"
    assert read - demo_only <= documented, f"not in the man page: {sorted(read - demo_only - documented)}"
