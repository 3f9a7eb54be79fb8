"""What model calls cost, from genai-prices: a maintained, versioned price table that ships
with the package (no network: dh never asks it to update). A call's tokens are priced as the
table prices them: uncached input, cache reads and cache writes each at their own rate."""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from decimal import Decimal

_MILLION = Decimal(1_000_000)
_SUFFIX = re.compile(r"\[[^\]]*\]$")  # Claude Code's "claude-opus-4-8[1m]": a context variant


@dataclass
class _Rates:
    """Per-million-token prices of one model, when they are flat (no tiers by size)."""
    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal


class Pricer:
    """Prices calls; each model is looked up in the table once."""

    def __init__(self):
        self._found: dict[str, object] = {}

    def _prices(self, model: str | None):
        if not model:
            return None
        if model not in self._found:
            self._found[model] = _lookup(_SUFFIX.sub("", model))
        return self._found[model]

    def known(self, model: str | None) -> bool:
        return self._prices(model) is not None

    def cost(self, model: str | None, usage: dict | None, input_includes_cache: bool) -> float | None:
        """USD for one call; None when the table does not know the model."""
        prices = self._prices(model)
        if prices is None or not usage:
            return None
        cache_read, cache_write = usage.get("cache_read") or 0, usage.get("cache_write") or 0
        total_in = (usage.get("input") or 0) + (0 if input_includes_cache else cache_read + cache_write)
        out = usage.get("output") or 0
        if isinstance(prices, _Rates):  # the common case, in plain arithmetic (30x faster)
            uncached = max(0, total_in - cache_read - cache_write)
            return float((uncached * prices.input + cache_read * prices.cache_read
                          + cache_write * prices.cache_write + out * prices.output) / _MILLION)
        from genai_prices import Usage

        return float(prices.calc_price(Usage(input_tokens=total_in, output_tokens=out,
                                             cache_read_tokens=cache_read,
                                             cache_write_tokens=cache_write))["total_price"])


def _lookup(model: str):
    """The model's prices today: flat _Rates, genai-prices' ModelPrice when tiered, or None."""
    from genai_prices import data_snapshot

    try:
        _, info = data_snapshot.get_snapshot().find_provider_model(model, None, None, None)
    except LookupError:
        return None
    price = info.get_prices(_dt.datetime.now(_dt.timezone.utc))
    flat = [price.input_mtok, price.output_mtok, price.cache_read_mtok, price.cache_write_mtok]
    if not all(p is None or isinstance(p, Decimal) for p in flat) or flat[0] is None:
        return price
    base = flat[0]
    return _Rates(base, flat[1] or Decimal(0), flat[2] if flat[2] is not None else base,
                  flat[3] if flat[3] is not None else base)


def session_cost(world, session_id: str, harness: str, pricer: Pricer | None = None) -> dict:
    """The session's model calls priced: total USD (None when no call could be priced), and
    the calls and models the table does not know."""
    from ..errors import UnknownHarness
    from ..wrappers import get

    pricer = pricer or Pricer()
    try:
        includes = get(harness).usage_input_includes_cache
    except UnknownHarness:  # a harness this dh does not know: its calls are not priced
        return {"usd": None, "unpriced_calls": 0, "unpriced_models": []}
    total, unpriced, models = 0.0, 0, set()
    for model, tokens_in, out, cache_read, cache_write in world.model_call_tokens(session_id):
        cost = pricer.cost(model, {"input": tokens_in, "output": out, "cache_read": cache_read,
                                   "cache_write": cache_write}, includes)
        if cost is None:
            unpriced += 1
            models.add(model or "unknown")
        else:
            total += cost
    priced = not unpriced or total > 0
    return {"usd": round(total, 6) if priced else None, "unpriced_calls": unpriced,
            "unpriced_models": sorted(models)}
