"""The words of a wait on a provider's limit, for the one line the user reads: which limit,
when dh goes on (a local wall-clock time) and in how long."""

from __future__ import annotations

import time


def limit_words(limit) -> str:
    """"usage limit (5-hour)", "usage limit", "rate limit"."""
    kind = "rate limit" if limit.which == "rate_limit" else "usage limit"
    return kind if limit.label in ("rate", "usage") else f"{kind} ({limit.label})"


def clock_time(epoch: float) -> str:
    """A local wall-clock time: 15:02, or with its date when not today."""
    when, today = time.localtime(epoch), time.localtime()
    same_day = when[:3] == today[:3]
    return time.strftime("%H:%M" if same_day else "%Y-%m-%d %H:%M", when)


def span(seconds: float) -> str:
    """4 h 12 min, 12 min, 45 s."""
    seconds = int(round(seconds))
    hours, minutes = divmod(seconds // 60, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min" if minutes else f"{seconds} s"


def resets(reset_at: float | None) -> str:
    return f" (resets at {clock_time(reset_at)})" if reset_at else ""
