"""A fault soak over the real harness CLIs (issue 30): many sessions of all four harnesses,
killed at random moments (the harness, dh, both, or both and the whole harness home), resumed,
and checked after each case against the invariants in `checks.py`.

    python -m tests.soak --set pinned --kills 200 --seed 7 [--harness pi] [--jobs 2]

A case is one session: a scripted turn of nine model replies (shell steps, writes, reads, a
slow step, the final text) whose replies come with small delays, so that a kill lands in
every phase: a reply streaming, a tool running, the harness writing, dh mirroring. A case
plans two to four kills (fewer are made when the turn ends first); each kill's moment is drawn from the seed. The CI slice is
tests/e2e/test_soak.py."""
