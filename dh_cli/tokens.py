"""One token vocabulary for every harness. Each wrapper maps its harness's own usage fields
onto these kinds, so that a count means the same whichever harness wrote it and no token is
counted twice:

- input: input tokens read neither from nor into the cache (OpenAI's `input_tokens` holds the
  cached ones too: its wrapper takes them out);
- cache_read: input tokens read from the prompt cache;
- cache_write: input tokens written to the cache for 5 minutes (the default lifetime);
- cache_write_1h: input tokens written to the cache for an hour (priced higher);
- output: every output token billed, reasoning included;
- reasoning: the part of `output` that was reasoning (shown, never added to output again).

The prompt a model read is input + cache_read + cache_write + cache_write_1h."""

from __future__ import annotations

from dataclasses import asdict, dataclass

KINDS = ("input", "cache_read", "cache_write", "cache_write_1h", "output", "reasoning")
# The most one call may count of one kind: a trillion tokens is no model's call, and under it
# the SQL sums over a log (SQLite's 64-bit SUM raised "integer overflow" on two records of
# -2**63) cannot overflow for 8 million calls.
MOST = 1 << 40


def plausible(value) -> bool:
    """Whether value can be a token count: a whole number from 0 to MOST."""
    return type(value) is int and 0 <= value <= MOST


@dataclass(frozen=True, slots=True)
class Usage:
    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0
    output: int = 0
    reasoning: int = 0

    @classmethod
    def of(cls, counts: dict | None) -> Usage:
        """From a usage dict (missing or NULL kinds are 0)."""
        counts = counts or {}
        return cls(*(int(counts.get(kind) or 0) for kind in KINDS))

    @property
    def prompt(self) -> int:
        """Every input token the model read, cached or not."""
        return self.input + self.cache_read + self.cache_write + self.cache_write_1h

    @property
    def total(self) -> int:
        """Tokens in and out (reasoning is inside output)."""
        return self.prompt + self.output

    def as_dict(self) -> dict:
        return asdict(self)

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, k) + getattr(other, k) for k in KINDS))


def call_text(counts: dict | None) -> str:
    """A call's tokens as dh's views print them ("in" is the uncached input for every harness;
    "out" holds the reasoning shown beside it); the kinds a call did not use are left out."""
    if not counts:
        return ""
    u = Usage.of(counts)
    parts = [f"{u.input} in"]
    if u.cache_read:
        parts.append(f"{u.cache_read} cache read")
    if u.cache_write or u.cache_write_1h:
        parts.append(f"{u.cache_write + u.cache_write_1h} cache write" +
                     (f" ({u.cache_write_1h} for 1 h)" if u.cache_write_1h else ""))
    parts.append(f"{u.output} out" + (f" ({u.reasoning} reasoning)" if u.reasoning else ""))
    return " / ".join(parts)


def totals_text(counts: dict | None) -> str:
    """A session's tokens, every kind named, as dh's views print them."""
    u = Usage.of(counts)
    return (f"{u.input} in (uncached), {u.cache_read} cache read, "
            f"{u.cache_write + u.cache_write_1h} cache write ({u.cache_write_1h} for 1 h), "
            f"{u.output} out ({u.reasoning} reasoning)")


def whole(value) -> int:
    """A count from a harness's usage for arithmetic: anything but a positive integer is 0 (the
    record itself is checked, and flagged when damaged, in wrappers/record_row.py)."""
    return value if type(value) is int and value > 0 else 0


def counts(input=0, cache_read=0, cache_write=0, cache_write_1h=0, output=0, reasoning=0) -> dict:
    """A wrapper's usage dict, every kind present (the form a parsed record carries)."""
    return {"input": input, "cache_read": cache_read, "cache_write": cache_write,
            "cache_write_1h": cache_write_1h, "output": output, "reasoning": reasoning}
