"""Workspace snapshot benchmark on a generated git checkout of ~10,000 files.

Prints ratios against baselines measured in the same run (this machine is noisy):
  snapshot after a one-file change vs. `git status --porcelain` on the same tree (goal ≤ 2×)
  storage of 100 snapshots, one changed file each, vs. one full snapshot (goal ≤ 1.05×)
Run: python bench/bench_workspace.py [--files 10000] [--rounds 100]"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dh_cli.worlds.local import LocalWorld  # noqa: E402
from dh_cli.workspace.snapshot import Snapshotter  # noqa: E402


def make_checkout(root: Path, files: int) -> list[Path]:
    """A checkout shaped like a mid-size project: 2-3 levels of folders, ~50 files a folder,
    source-like files of 200 B to 6 KiB, all committed."""
    rng = random.Random(7)
    paths = []
    words = [f"token{i}" for i in range(400)]
    for i in range(files):
        folder = root / f"pkg{i // 1000}" / f"mod{(i // 50) % 20}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"file{i}.py"
        body = " ".join(rng.choice(words) for _ in range(rng.randint(30, 900)))
        path.write_text(f"# file {i}\n{body}\n")
        paths.append(path)
    (root / ".gitignore").write_text("build/\n")
    git = ["git", "-C", str(root), "-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "init"], check=True)
    return paths


def db_bytes(world: LocalWorld) -> int:
    return sum(row[0] for row in world.conn.execute(
        "SELECT sum(length(data)) + sum(length(hash)) FROM ws_objects")) + sum(
        row[0] for row in world.conn.execute(
            "SELECT coalesce(sum(length(root) + length(at) + 40), 0) FROM ws_snapshots"))


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "checkout"
        paths = make_checkout(root, args.files)
        world = LocalWorld(Path(tmp) / "dh.db")
        session = world.create_session("claude-code", cwd=str(root), state="running")
        snapper = Snapshotter(world, session.id, str(root))
        first = timed(lambda: snapper.take("tool", 1, "call-0"))
        full = db_bytes(world)
        git_times, snap_times = [], []
        rng = random.Random(3)
        for n in range(args.rounds):
            target = rng.choice(paths)
            with open(target, "a") as handle:
                handle.write(f"edit {n}\n")
            git_times.append(timed(lambda: subprocess.run(
                ["git", "-C", str(root), "status", "--porcelain"], capture_output=True, check=True)))
            snap_times.append(timed(lambda: snapper.take("tool", 1, f"call-{n + 1}")))
        total = db_bytes(world)
        snaps = world.conn.execute("SELECT count(*) FROM ws_snapshots").fetchone()[0]
        git_med, snap_med = statistics.median(git_times), statistics.median(snap_times)
        print(f"checkout: {args.files} files, {sum(p.stat().st_size for p in paths) / 1e6:.1f} MB")
        print(f"first (full) snapshot: {first * 1000:.0f} ms, {full / 1e6:.2f} MB stored")
        print(f"after a one-file change, median of {args.rounds}: snapshot {snap_med * 1000:.1f} ms,"
              f" git status --porcelain {git_med * 1000:.1f} ms ->"
              f" ratio {snap_med / git_med:.2f}x (goal <= 2x)")
        print(f"storage of {snaps} snapshots: {total / 1e6:.2f} MB vs one full snapshot"
              f" {full / 1e6:.2f} MB -> ratio {total / full:.3f}x (goal <= 1.05x)")
        world.close()


if __name__ == "__main__":
    main()
