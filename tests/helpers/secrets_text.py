"""A transcript text holding credentials and terminal escapes, and how to find them in what
dh printed: shared by the tests of masked and escaped views."""

from __future__ import annotations

from tests import rig


KEY = "sk-ant-api03-Qx7TqZr9vW2pL4mN8bC1dF6gH3jK5sA0"
GH = "ghp_R2d2C3po4Bb8Ee1Yoda9Luke7Leia6Hans"
URL_PW = "Pw9x7c5v3b1n"
JSON_PW = "Json-pw 4411"  # a password in a JSON file a tool printed: escaped quotes in the record
BEARER = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
SECRETS = [KEY, GH, URL_PW, BEARER, JSON_PW]
ESCAPES = ["\x1b]0;pwned title\x07", "\x1b]52;c;ZWNobyBwd25lZA==\x07", "\x1b[8mhidden\x1b[0m"]
TEXT = (f"use {KEY} and GITHUB_TOKEN={GH}, db postgres://admin:{URL_PW}@db.internal/app, "
        f"curl -H 'Authorization: Bearer {BEARER}', cat config.json: {{\"password\": \"{JSON_PW}\"}} "
        + "".join(ESCAPES))


def imported_pi_prompt(tmp_path, text: str):
    """A real Pi session with a last user prompt of `text` appended, imported into the log:
    (its dh id, the native file)."""
    import json

    from dh_cli.worlds.local import LocalWorld
    from tests.conftest import fixture_home

    home = fixture_home("pi", "basic", tmp_path)
    native = next(home.rglob("*.jsonl"))
    last = json.loads(native.read_bytes().splitlines()[-1])
    entry = {"type": "message", "id": "appended", "parentId": last.get("id"),
             "timestamp": last.get("timestamp"), "message": {"role": "user", "content": text}}
    with open(native, "a") as handle:
        handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
    assert dh("import", "pi", "--all", "--home", str(home)).returncode == 0
    world = LocalWorld()
    (found,) = world.sessions()
    world.close()
    return found.id, native


def dh(*args, env=None, cwd=None):
    return rig.dh(*args, env=env, cwd=cwd, errors="surrogateescape")


def leaked(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]
