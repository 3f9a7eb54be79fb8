"""A model's per-million-token rates as genai-prices' bundled data lists them (the providers'
published prices), read from the data itself rather than through dh's pricing.py: an expected
figure that dh's own lookup or arithmetic cannot bend."""

from __future__ import annotations

# a call's input by its parts (logviews/resumecost.py's split) -> the rate each is billed at
RATE_OF = {"uncached": "input_mtok", "cache_write_5m": "cache_write_mtok",
           "cache_write_1h": "cache_write_1h_mtok", "cache_read": "cache_read_mtok"}


def published_rates(provider: str, model: str):
    """The model's one flat ModelPrice (an exact id: no matching, no context suffix)."""
    from genai_prices.data import providers
    from genai_prices.types import ModelPrice

    (listed,) = [p for p in providers if p.id == provider]
    (info,) = [m for m in listed.models if m.id == model]
    assert isinstance(info.prices, ModelPrice), info.prices  # not prices by date or size
    return info.prices


def input_price(provider: str, model: str, split: dict) -> float:
    """USD for tokens by part ({"uncached": n, "cache_read": n, ...}) at the published rates."""
    rates = published_rates(provider, model)
    return sum(n * float(getattr(rates, RATE_OF[part])) for part, n in split.items()) / 1e6
