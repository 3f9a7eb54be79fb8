"""What model calls cost, from genai-prices: a maintained, versioned price table that ships
with the package (no network: dh never asks it to update). A call's tokens are priced as the
table prices them: uncached input, cache reads, 5-minute and 1-hour cache writes and output
each at their own rate (the kinds of tokens.py)."""

from __future__ import annotations

import datetime as _dt
import importlib.util
import json
import os
import re
import threading
from dataclasses import astuple, dataclass
from decimal import Decimal
from pathlib import Path

from .tokens import KINDS, Usage

_MILLION = Decimal(1_000_000)
_SUFFIX = re.compile(r"\[[^\]]*\]$")  # Claude Code's "claude-opus-4-8[1m]": a context variant


@dataclass
class _Rates:
    """Per-million-token prices of one model, when they are flat (no tiers by size)."""
    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal
    cache_write_1h: Decimal


class Pricer:
    """Prices calls; each model is looked up in the table once (and, given a file to
    `remember` in, once an hour for as long as the same table is installed)."""

    def __init__(self, remember: Path | None = None):
        self._found: dict[str, object] = {}
        self._remembered = _Remembered(remember) if remember else None

    def _prices(self, model: str | None):
        if not model:
            return None
        if model not in self._found:
            name = _SUFFIX.sub("", model)
            self._found[model] = self._remembered.prices(name) if self._remembered else _lookup(name)
        return self._found[model]

    def known(self, model: str | None) -> bool:
        return self._prices(model) is not None

    def flat(self, model: str | None) -> bool:
        """True when the model's price has no tiers: the cost of calls is the cost of their sum."""
        return isinstance(self._prices(model), _Rates)

    def cost(self, model: str | None, usage: dict | Usage | None) -> float | None:
        """USD for one call (usage in the kinds of tokens.py); None when the table does not
        know the model."""
        prices = self._prices(model)
        if prices is None or not usage:
            return None
        u = usage if isinstance(usage, Usage) else Usage.of(usage)
        if isinstance(prices, _Rates):  # the common case, in plain arithmetic (30x faster)
            return float((u.input * prices.input + u.cache_read * prices.cache_read
                          + u.cache_write * prices.cache_write
                          + u.cache_write_1h * prices.cache_write_1h + u.output * prices.output)
                         / _MILLION)
        from genai_prices import Usage as Counted

        writes = u.cache_write + u.cache_write_1h  # genai-prices counts the 1h ones inside
        # reasoning is part of output (tokens.py), as genai-prices counts it: a model that
        # prices it apart has it at its rate and the rest of the output at the output rate
        return float(prices.calc_price(Counted(
            input_tokens=u.prompt, output_tokens=u.output, cache_read_tokens=u.cache_read,
            cache_write_tokens=writes, cache_write_1h_tokens=u.cache_write_1h,
            output_reasoning_tokens=min(u.reasoning, u.output)))["total_price"])


_LOGGED = Pricer()
_LOADING: list[threading.Thread] = []


def load_table_in_background() -> None:
    """Import genai-prices and read its table on a thread of its own, once a process. Loaded
    by the first priced record instead, it held that insert 120-150 ms (this 2-core machine),
    and the live mirror's first model call reached the log after the 50 ms of
    tests/e2e/test_mirror_lag.py; an insert that comes meanwhile waits only for the rest."""
    if not _LOADING:
        _LOADING.append(threading.Thread(target=_load_table, name="dh-prices", daemon=True))
        _LOADING[0].start()


def _load_table() -> None:
    try:
        from genai_prices import data_snapshot

        data_snapshot.get_snapshot()
    except Exception:  # noqa: BLE001 (no table: every price stays NULL, as logged_price says)
        pass


def logged_price(model, *counted) -> float | None:
    """One logged call's price (the counts of tokens.KINDS, NULL as 0): the value of the log's
    `records.price_usd`, filled as SQL's `dh_price()` when a record is written (see
    register_price), so that sqlite3, sqlite-utils and datasette read the price dh prints.
    Never raises: an exception here would fail the insert, and no price is worth a record."""
    try:
        return _LOGGED.cost(model, Usage(*(int(c or 0) for c in counted)))
    except Exception:  # noqa: BLE001 (a broken price table leaves the price NULL)
        return None


def register_price(conn) -> None:
    """`dh_price(model, input, cache_read, cache_write, cache_write_1h, output, reasoning)` on a
    SQLite connection: what the log's writer and its migrations price records with."""
    conn.create_function("dh_price", 1 + len(KINDS), logged_price, deterministic=True)


def table_signature() -> str | None:
    """Which price table is installed, read without importing it (0.08 ms, where its version
    from the package metadata took 29 ms): its data file's size and modification time. None
    when genai-prices is missing."""
    spec = importlib.util.find_spec("genai_prices")
    for folder in (spec and spec.submodule_search_locations) or []:
        try:
            found = os.stat(os.path.join(folder, "data.py"))
        except OSError:
            continue
        return f"{found.st_size}:{found.st_mtime_ns}"
    return None


def _lookup(model: str):
    """The model's prices today: flat _Rates, genai-prices' ModelPrice when tiered, or None."""
    from genai_prices import data_snapshot

    try:
        _, info = data_snapshot.get_snapshot().find_provider_model(model, None, None, None)
    except LookupError:
        return None
    return _rates(info.get_prices(_dt.datetime.now(_dt.timezone.utc)))


def provider_of(model: str | None) -> str | None:
    """The provider that serves the model, as the price table names it ("Anthropic",
    "OpenAI"); None when the table does not know the model."""
    from genai_prices import data_snapshot

    if not model:
        return None
    try:
        provider, _ = data_snapshot.get_snapshot().find_provider_model(_SUFFIX.sub("", model), None, None, None)
    except LookupError:
        return None
    return provider.name


def _rates(price):
    """Flat _Rates of a ModelPrice, or the ModelPrice itself when its calculation is not plain
    arithmetic on our kinds: prices tiered by prompt size, or reasoning tokens priced apart
    from the rest of the output (Perplexity's sonar-deep-research: $3 against $8 a million)."""
    hour = getattr(price, "cache_write_1h_mtok", None)
    flat = [price.input_mtok, price.output_mtok, price.cache_read_mtok, price.cache_write_mtok, hour]
    if not all(p is None or isinstance(p, Decimal) for p in flat) or flat[0] is None \
            or getattr(price, "output_reasoning_mtok", None) is not None:
        return price
    base = flat[0]
    write = flat[3] if flat[3] is not None else base
    return _Rates(base, flat[1] or Decimal(0), flat[2] if flat[2] is not None else base, write,
                  hour if hour is not None else write)


PRICE_FILE = "model-prices.json"  # in the dh home: what `dh log list` found in the table


class _Remembered:
    """Flat prices (and models the table does not know) kept in a file between runs:
    importing genai-prices to look three models up took 0.14 s of a list of 10,001 sessions.
    Kept for one table (its data module's size and time) and one hour (prices start on
    dates); a model priced in tiers is looked up each time."""

    def __init__(self, path: Path):
        self.path, self.key, self.models = path, None, None

    def prices(self, model: str):
        if self.models is None:
            self.key = _table_key()
            self.models = self._read() if self.key else {}
        if model in self.models:
            kept = self.models[model]
            try:
                return _Rates(*map(Decimal, kept)) if kept is not None else None
            except (TypeError, ValueError, ArithmeticError):  # not as written: looked up again
                pass
        found = _lookup(model)
        if found is None or isinstance(found, _Rates):
            self.models[model] = [str(rate) for rate in astuple(found)] if found else None
            self._write()
        return found

    def _read(self) -> dict:
        try:
            kept = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        ok = isinstance(kept, dict) and kept.get("table") == self.key and isinstance(kept.get("models"), dict)
        return kept["models"] if ok else {}

    def _write(self) -> None:
        from .util import atomic_write

        if not self.key:
            return
        try:
            atomic_write(self.path, json.dumps({"table": self.key, "models": self.models}).encode())
        except OSError:
            pass  # only a cache: looked up in the table again next time


def _table_key() -> str | None:
    """Which price table is installed and the hour it is read in, without importing it (None
    when its files cannot be told: nothing is then kept)."""
    import importlib.util

    try:
        data = Path(importlib.util.find_spec("genai_prices").origin).parent / "data.py"
        info = data.stat()
    except (AttributeError, TypeError, ImportError, OSError):
        return None
    hour = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H")
    return f"{data}:{info.st_size}:{info.st_mtime_ns}:{hour}"


def session_cost(world, session_id: str, pricer: Pricer | None = None) -> dict:
    """The session's model calls priced: total USD (None when no call could be priced), and
    the calls and models the table does not know."""
    return calls_cost(world.model_call_tokens(session_id), pricer)


def calls_cost(calls, pricer: Pricer | None = None) -> dict:
    """`session_cost` of the calls given as (model, then the counts of tokens.KINDS)."""
    pricer = pricer or Pricer()
    total, unpriced, models = 0.0, 0, set()
    for model, of_model in _by_model(calls).items():
        if not pricer.known(model):
            unpriced += len(of_model)
            models.add(model or "unknown")
            continue
        total += sum(pricer.cost(model, Usage(*counted)) for counted in _linear_sum(pricer, model, of_model))
    priced = not unpriced or total > 0
    return {"usd": round(total, 6) if priced else None, "unpriced_calls": unpriced,
            "unpriced_models": sorted(models)}


def _by_model(calls) -> dict:
    found: dict = {}
    for model, *counted in calls:
        found.setdefault(model, []).append([c or 0 for c in counted])
    return found


def _linear_sum(pricer: Pricer, model, calls: list[list[int]]) -> list:
    """The calls of one model summed into one when its price is flat (the cost is then linear
    in each kind of token); else each call as it is. Call by call, in Decimal, 10,008 sessions
    took 0.36 s to price."""
    if not pricer.flat(model):
        return calls
    return [[sum(column) for column in zip(*calls)]]
