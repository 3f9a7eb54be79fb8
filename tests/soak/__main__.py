"""python -m tests.soak: run a fault soak and print its table (see tests/soak/__init__.py)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tests.helpers import harnesses

from .case import run_case
from .plan import draw_cases

# harnesses whose newest release here is their pinned one soak once, in the pinned set
SAME_IN_BOTH = ("codex", "opencode")


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m tests.soak")
    ap.add_argument("--set", dest="version_set", default="pinned", choices=("pinned", "newest"))
    ap.add_argument("--kills", type=int, default=200, help="kills per harness")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--harness", action="append", help="default: every harness of the set")
    ap.add_argument("--jobs", type=int, default=1, help="cases run at once")
    ap.add_argument("--tui-share", type=float, default=0.25)
    ap.add_argument("--out", type=Path, help="JSON lines, one per case")
    ap.add_argument("--root", type=Path, help="where cases run (kept when one fails)")
    ap.add_argument("--only", type=int, action="append", help="run only the case of this index")
    return ap.parse_args(argv)


def default_harnesses(version_set: str) -> list[str]:
    return [h for h in harnesses.ALL if version_set == "pinned" or h not in SAME_IN_BOTH]


def _run(args: tuple) -> dict:
    case, version_set, root = args
    from tests.e2e import install

    installed = install.ensure(log=lambda _m: None, version_set=version_set)
    return run_case(case, installed, root).to_dict()


def table(results: list[dict]) -> str:
    rows = {}
    for r in results:
        key = (r["version_set"], r["harness"])
        row = rows.setdefault(key, {"cases": 0, "tui": 0, "kills": 0, "violations": 0,
                                    "targets": {}})
        row["cases"] += 1
        row["tui"] += r["mode"] == "tui"
        row["kills"] += r["kills_made"]
        row["violations"] += len(r["violations"])
        for kill in r["kills"][: r["kills_made"]]:
            row["targets"][kill["target"]] = row["targets"].get(kill["target"], 0) + 1
    lines = ["| set | harness | cases (TUI) | kills | harness/dh/both/home | violations |",
             "|---|---|---|---|---|---|"]
    for (vset, harness), row in sorted(rows.items()):
        t = row["targets"]
        split = "/".join(str(t.get(k, 0)) for k in ("harness", "dh", "both", "home"))
        lines.append(f"| {vset} | {harness} | {row['cases']} ({row['tui']}) | {row['kills']} | "
                     f"{split} | {row['violations']} |")
    return "\n".join(lines)


def soak(args: argparse.Namespace) -> list[dict]:
    chosen = args.harness or default_harnesses(args.version_set)
    cases = draw_cases(args.seed, chosen, args.version_set, args.kills, args.tui_share)
    cases = [c for c in cases if args.only is None or c.index in args.only]
    root = args.root or Path(tempfile.mkdtemp(prefix="dh-soak-"))
    results = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for result in pool.map(_run, [(c, args.version_set, root) for c in cases]):
            results.append(result)
            _report(result, args.out)
    return results


def _report(result: dict, out: Path | None) -> None:
    status = "ok" if not result["violations"] else "VIOLATION " + "; ".join(result["violations"])
    print(f"{result['case']}: {result['kills_made']} kill(s), {result['seconds']} s: {status}",
          flush=True)
    if out:
        with out.open("a") as fh:
            fh.write(json.dumps(result) + "\n")


def main(argv: list[str]) -> int:
    args = parse(argv)
    started = time.monotonic()
    results = soak(args)
    print(f"\nseed {args.seed}, set {args.version_set}, {time.monotonic() - started:.0f} s")
    print(table(results))
    return 1 if any(r["violations"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

