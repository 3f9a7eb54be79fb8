"""The log in a real datasette, as the README tells people to open it: `tool_calls` shows
each call's harness, its input as JSON and the opening of its output as text, for every
harness's real fixture, and `model_calls` its price (never `<Binary ...>`)."""

import json

import pytest

from tests.require import skip_if_missing

from .conftest import fixture_home
from .helpers import harnesses
from .helpers.datasette import DATASETTE, page, rows, serving


@skip_if_missing(not DATASETTE,  # required (CI): fail, never skip
                 "datasette is not installed (pip install -e '.[test]')")
def test_tool_calls_show_inputs_and_outputs_in_datasette(tmp_path, run_dh, dh_home):
    for harness in harnesses.ALL:
        (tmp_path / harness).mkdir()
        home = fixture_home(harness, "basic", tmp_path / harness)
        assert run_dh("import", harness, "--all", "--home", str(home)).exit_code == 0
    costs = {r["harness"]: r["usd"] for r in
             json.loads(run_dh("log", "cost", "--by", "harness", "--json").stdout)["rows"]}
    with serving(dh_home / "dh.db", tmp_path) as url:
        calls = rows(url, "dh", "tool_calls")
        priced = rows(url, "dh", "model_calls", price_usd__notblank="1")
        kinds = rows(url, "dh", "", sql="select distinct typeof(input), typeof(output), typeof(harness)"
                                        " from tool_calls")
        assert {k["typeof(input)"] for k in kinds} == {"text"} == {k["typeof(harness)"] for k in kinds}
        assert {k["typeof(output)"] for k in kinds} <= {"text", "null"}
        shown = page(url, "dh/tool_calls?_size=max")
    assert "Binary" not in shown and "echo step0" in shown
    assert {c["harness"] for c in calls} == set(harnesses.ALL)
    for harness in harnesses.ALL:
        of_harness = [c for c in calls if c["harness"] == harness]
        for call in of_harness:
            assert isinstance(call["input"], str) and isinstance(json.loads(call["input"]), dict), call
            assert isinstance(call["output"], str) or call["status"] == "no result", call
        shell = [c for c in of_harness if "echo step0" in c["input"]]
        assert shell and shell[0]["status"] == "ok" and shell[0]["tool"], (harness, of_harness)
        finished = [c for c in of_harness if c["status"] != "no result"]
        assert finished and all(c["output"] is not None for c in finished), harness
    by_harness = {}
    for call in priced:
        by_harness[call["harness"]] = by_harness.get(call["harness"], 0) + call["price_usd"]
    assert by_harness and by_harness == pytest.approx({h: usd for h, usd in costs.items() if usd}, abs=1e-6)
