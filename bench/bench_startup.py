"""The fixed CPU cost of one `dh run` (issue 17): interpreter start-up, imports, argument
parsing, config, launch and the final checks, in a log that exists already, over a harness that writes no record
(tests/fakes/pi_writer.py as `pi`), the `dh run` process alone (its rusage from wait4, less
the CPU the writer reports for itself; a shared mirror it starts is another process). This is
what each of the 128 sessions of `bench_load.py --sessions 128 --rate 5` pays once.

Measured in the same run, interleaved round by round, median of --runs:
  interpreter   `python -c pass`: the floor of any Python command on this machine
  dh run        as shipped, no setting given (no config file, no DH_* setting)
  typer's own   the same `dh run` with typer's pydantic coercion of every parameter
                (dh_cli/cliparams.py not installed): what cliparams saves
  a setting     the same `dh run` with one setting given (DH_TOOL_GRACE=3): pydantic is
                imported to validate the settings (dh_cli/config.py): what a run with no
                setting saves
Bytecode is cached (in the work folder), as an installed dh's is.
Run: python bench/bench_startup.py [--runs 9]"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dh_cli.worlds.local import LocalWorld  # noqa: E402

WRITER = ROOT / "tests" / "fakes" / "pi_writer.py"
TYPERS_OWN = ("import sys, dh_cli.cliparams as p; p.install = lambda: None; "
              "from dh_cli.cli import main; sys.argv[0] = 'dh'; main()")
RUN = ["run", "pi", "--", "-p", "go"]
VARIANTS = {  # name: (python's arguments, environment)
    "interpreter": (["-c", "pass"], {}),
    "dh run": (["-m", "dh_cli", *RUN], {}),
    "typer's own": (["-c", TYPERS_OWN, *RUN], {}),
    "a setting": (["-m", "dh_cli", *RUN], {"DH_TOOL_GRACE": "3"}),
}


def cpu_of(args: list[str], extra: dict, work: Path) -> float:
    """CPU seconds of one process (without its harness child's own), in a new home."""
    home = Path(tempfile.mkdtemp(dir=work))
    cwd = home / "proj"
    cwd.mkdir(parents=True)
    cpu_file = home / "writer-cpu.txt"
    LocalWorld(home / "dh" / "dh.db").close()  # a log made already, as bench_load.py's
    env = {**os.environ, "DH_HOME": str(home / "dh"), "PI_CODING_AGENT_DIR": str(home / "pi"),
           "XDG_CONFIG_HOME": str(home / "config"), "DH_PI_BIN": f"{sys.executable} {WRITER}",
           "DH_WRITER_RECORDS": "0", "DH_WRITER_CPU_FILE": str(cpu_file),
           "PYTHONPATH": str(ROOT), **extra}
    proc = subprocess.Popen([sys.executable, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{args} failed: {proc.stderr.read().decode()[-400:]}")
    proc.stderr.close()
    writer = sum(float(x) for x in cpu_file.read_text().split()) if cpu_file.exists() else 0.0
    return usage.ru_utime + usage.ru_stime - writer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        work = Path(tmp)
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: pip compiles dh
        os.environ["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        os.environ["DH_SHARED_MIRROR"] = "1"
        for args, extra in VARIANTS.values():  # fills the bytecode cache
            cpu_of(args, extra, work)
        costs: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for _ in range(runs):
            for name, (args, extra) in VARIANTS.items():
                costs[name].append(cpu_of(args, extra, work))
    report({name: statistics.median(values) for name, values in costs.items()}, runs)


def report(median: dict[str, float], runs: int) -> None:
    floor = median["interpreter"]
    print(f"CPU of one process, median of {runs}, same run ({os.cpu_count()} CPUs):")
    for name, value in median.items():
        print(f"  {name:12} {value * 1000:6.0f} ms  ({value / floor:.1f}x the interpreter)")
    run = median["dh run"]
    for name, what in (("typer's own", "typer's own coercion"), ("a setting", "a setting given")):
        print(f"dh run / {what}: {run / median[name]:.2f}x ({(median[name] - run) * 1000:.0f} ms a run)")
    print(f"dh run beyond the interpreter: {(run - floor) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
