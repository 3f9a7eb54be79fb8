"""Parsing of a large import in a second process.

The import of a big native file was parse-bound: the main thread parsed JSON and picked out
the log's columns while one helper thread compressed and inserted, and the insert waited for
the parser (0.43x the throughput of a raw insert of the same lines). Here a worker process
parses, de-duplicates usage and compresses each batch of lines, in order, while this process
reads the file and commits. Nothing changes about what is committed or when: each batch is
still one transaction holding its records and the source's new offset, so an import killed
at any point (this process or the worker) resumes to the same log.

Used only for a file with at least DH_PARSE_POOL_MB (32) megabytes left to read: below that,
starting the worker costs more than it saves. And unless DH_PARSE_POOL_MB is set, only while
the machine has a core to spare: on a saturated one the worker only adds the pickling
(bench_import.py at load 10 on 2 cores: 0.36x the raw insert with it, 0.40x without)."""

from __future__ import annotations

import multiprocessing
import os
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager

from ..errors import ConfigError

_WORKER_STATE: dict = {}  # in the worker: the wrapper, and each source's last message id


def pool_min() -> int:
    value = os.environ.get("DH_PARSE_POOL_MB", "32")
    try:
        return int(float(value) * (1 << 20))
    except ValueError:
        raise ConfigError(f"bad value for DH_PARSE_POOL_MB: {value!r} is not a number of megabytes",
                          hint="unset it, or give megabytes, e.g. DH_PARSE_POOL_MB=32") from None


def parse_batch(wrapper_name: str, source_id: int, generation: int,
                lines: list[tuple[int, bytes]]) -> list[tuple]:
    """In the worker: the encoded log rows of (offset, raw) lines."""
    from .. import wrappers
    from ..worlds.local import encode_rows
    from ..wrappers.base import to_record
    from ..stores.tailer import carry_model
    from ..wrappers.clip import INDEXED, bounded

    wrapper = _WORKER_STATE.get(wrapper_name) or _WORKER_STATE.setdefault(
        wrapper_name, wrappers.get(wrapper_name))
    model = _WORKER_STATE.get((source_id, "model"))
    rows = []
    for offset, raw in lines:
        parsed = wrapper.parse(bounded(raw, INDEXED))  # as Tailer._record parses it
        model = carry_model(parsed, model)
        rows.append(to_record(parsed, source_id, generation, offset, raw))
    _WORKER_STATE[(source_id, "model")] = model
    return encode_rows(rows)


class ParsePool:
    def __init__(self, wrapper_name: str):
        # fork is cheap and safe while this process runs one thread; else a fresh interpreter
        method = "fork" if threading.active_count() == 1 else "spawn"
        from ..procs import die_with_parent

        self.executor = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context(method),
                                            initializer=die_with_parent)
        self.wrapper_name = wrapper_name

    def submit(self, source, lines: list[tuple[int, bytes]]) -> Future:
        return self.executor.submit(parse_batch, self.wrapper_name, source.id, source.generation,
                                    lines)

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


@contextmanager
def parsing_elsewhere(mirror, wrapper_name: str):
    """Give the mirror's large line sources (at least DH_PARSE_POOL_MB unread) one worker
    process for the duration of the block."""
    from ..stores.tailer import Tailer

    large = [t for t in mirror.tailers.values() if isinstance(t, Tailer) and t.source.kind != "file"
             and _unread(t.source) >= pool_min()]
    if not large or not ("DH_PARSE_POOL_MB" in os.environ or _spare_core()):
        yield
        return
    pool = ParsePool(wrapper_name)
    for tailer in large:
        tailer.parser = pool
    try:
        yield
    finally:
        for tailer in large:
            tailer.parser = None
        pool.close()


def _spare_core() -> bool:
    cpus = os.cpu_count() or 1
    return cpus > 1 and os.getloadavg()[0] < cpus - 0.5


def _unread(source) -> int:
    try:
        return os.stat(source.path).st_size - source.offset
    except (OSError, TypeError):
        return 0
