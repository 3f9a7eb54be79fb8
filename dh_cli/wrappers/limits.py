"""A provider's usage or rate limit as a harness reports it (`Wrapper.limit_from`), and the
reading of the reset times harnesses print: a wall-clock time in the user's time zone,
to the minute or the hour, sometimes with a date or a zone name ("resets 3pm",
"resets Dec 5, 3:30pm (Europe/Paris)", "try again at 2:16 PM", "try again at Dec 5 3:04 PM"),
and of a provider's 429 as an SDK passes it on (status, body, headers) to harnesses that
keep the API's own words (Pi, OpenCode)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..util import readable_epoch

MAX_TEXT = 300  # of the harness's message, kept in the limit event

# the Anthropic API's unified limits (`anthropic-ratelimit-unified-representative-claim`)
CLAIMS = {"five_hour": "5-hour", "seven_day": "weekly", "seven_day_opus": "weekly Opus",
          "seven_day_sonnet": "weekly Sonnet"}
# a 429 as the SDKs print it ("429 {…}", "429: {…}"), or the error types of the APIs' bodies
_LIMIT_ERROR = re.compile(r"^\s*429\b|rate_limit_error|rate_limit_exceeded|usage_limit_reached|"
                          r"too many requests", re.IGNORECASE)
# the OpenAI API's "Please try again in 20s" (also "1m30s", "2h5m3.2s", "640ms")
_TRY_IN = re.compile(r"try again in (?:(?P<h>\d+)h)?(?:(?P<m>\d+)m(?!s))?(?:(?P<s>\d+(?:\.\d+)?)s)?"
                     r"(?:(?P<ms>\d+)ms)?", re.IGNORECASE)
MONTHS = {m: i for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
_CLOCK = re.compile(
    r"(?:(?P<mon>[A-Za-z]{3})[a-z]*\.? (?P<day>\d{1,2})(?:, (?P<year>\d{4}))?,?(?: at)? )?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))? ?(?P<half>[AaPp]\.?[Mm]\.?)"
    r"(?: \((?P<zone>[A-Za-z_]+(?:/[A-Za-z_+-]+)*)\))?")


@dataclass(frozen=True)
class Limit:
    """A turn the service refused for a limit."""

    which: str  # the limit as the harness or service names it: five_hour, usage_limit_exceeded, rate_limit
    label: str  # for the user: "5-hour", "weekly", "usage", "rate"
    reset_at: float | None  # epoch seconds when it resets, when the harness said
    where: str  # where dh read it (the record, the field)
    text: str  # the harness's own words (shortened)

    def to_dict(self) -> dict:
        return asdict(self)


def limit(which: str, label: str, reset_at: float | None, where: str, text: str) -> Limit:
    return Limit(which, label, readable_epoch(reset_at), where, " ".join(text.split())[:MAX_TEXT])


def reset_after(text: str, words: tuple[str, ...], now: float, tz=None) -> float | None:
    """The epoch seconds of the wall-clock time that follows one of `words` ("resets",
    "try again at") in text, read in `tz` (the local zone by default) unless the text names
    a zone; a time without a date is the next such time after `now`. A time to the minute
    is read as that minute's end (Codex prints the reset rounded down: 14:16:46 is "2:16
    PM"); a bare hour ("3pm") as that hour. None when there is no such time."""
    for word in words:
        at = text.lower().find(word.lower())
        if at < 0:
            continue
        found = _CLOCK.match(text, at + len(word) + 1)
        if found:
            return _epoch(found, now, tz)
    return None


def _epoch(found: re.Match, now: float, tz) -> float | None:
    zone = _zone(found["zone"]) or tz
    hour = int(found["hour"]) % 12 + (12 if found["half"][0] in "Pp" else 0)
    minute = int(found["minute"] or 0)
    if hour > 23 or minute > 59:
        return None
    today = datetime.fromtimestamp(now, zone)
    try:
        when = today.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if found["mon"]:
            month = MONTHS.get(found["mon"].lower())
            if month is None:
                return None
            when = when.replace(month=month, day=int(found["day"]), year=int(found["year"] or today.year))
    except ValueError:
        return None
    if when.timestamp() + 60 <= now:  # passed: tomorrow's, or next year's for a date
        when = when + timedelta(days=1) if not found["mon"] else when.replace(year=when.year + 1)
    return when.timestamp() + (60 if found["minute"] else 0)


def _zone(name: str | None):
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def api_limit_kind(text: str) -> tuple[str, str] | None:
    """(which, label) when a provider's error text (its status and body, as an SDK prints
    them) is a usage or rate limit; None for any other error."""
    if not _LIMIT_ERROR.search(text):
        return None
    if "usage_limit" in text.lower():
        return "usage_limit_reached", "usage"
    return "rate_limit", "rate"


def wait_told(text: str) -> float | None:
    """The seconds of an OpenAI "try again in 1m30s" in text; None without one."""
    found = _TRY_IN.search(text)
    if not found or not any(found.groupdict().values()):
        return None
    parts = {k: float(v) for k, v in found.groupdict().items() if v}
    return (parts.get("h", 0) * 3600 + parts.get("m", 0) * 60 + parts.get("s", 0)
            + parts.get("ms", 0) / 1000)


def retry_after(value, since: float) -> float | None:
    """The epoch seconds an HTTP `retry-after` (seconds, or an HTTP date) names, counted
    from `since`; None when it is neither."""
    from email.utils import parsedate_to_datetime

    try:
        return since + float(value)
    except (TypeError, ValueError):
        pass
    try:
        return parsedate_to_datetime(str(value)).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
