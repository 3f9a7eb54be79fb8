"""Two copies of one source that both went on (issue 14): detected, and both kept.

Sources are append-only, so two copies either agree on a prefix or diverged after it. The
check looks at one record: the last one of the copy whose end comes first. The other copy
must hold the same bytes under the same key (generation, offset); different bytes, or a
record of the other copy that spans that offset, means the copies diverged. (A key the other
copy simply lacks, with nothing spanning it, is a hole there, which the copy loop re-sends.)

A diverged copy is never spliced into the other: the sender's latest generation is stored
whole on the receiver as a new generation, once (a receiver already holding a generation
that ends in the sender's last record has it)."""

from __future__ import annotations

from ..worlds.base import Mark, Position, World
from .sync_rows import checked, decoded

SPAN = 1 << 20  # how far back a record spanning the checked offset is looked for (1 MiB)


def raw_at(world: World, source, position: Position) -> bytes | None:
    generation, offset = position
    for batch in world.read_rows(source, after=(generation, offset - 1), upto=position):
        for row in batch:
            return decoded(row)
    return None


def _spanned(world: World, source, position: Position) -> bool:
    """Whether a record of this copy starts before `position` and runs past it."""
    generation, offset = position
    last = None
    for batch in world.read_rows(source, after=(generation, max(-1, offset - SPAN)), upto=position):
        last = batch[-1] if batch else last
    return last is not None and last[2] + len(decoded(last)) > offset


def diverged(a_world: World, a_source, a: Mark, b_world: World, b_source, b: Mark, same=None) -> bool:
    """Whether the two copies of a source (with these marks) diverged. `same` maps both
    sides' bytes before comparing (a masking world holds masked copies of raw records)."""
    if a.last is None or b.last is None:
        return False
    check = min(a.last, b.last)
    mine, theirs = raw_at(a_world, a_source, check), raw_at(b_world, b_source, check)
    if mine is not None and theirs is not None:
        return mine != theirs if same is None else same(mine) != same(theirs)
    from ..stores import store_for

    if not store_for(a_source).offsets_are_bytes:  # OpenCode's count row versions: no span
        return False
    lacking_world, lacking_source = (b_world, b_source) if theirs is None else (a_world, a_source)
    return _spanned(lacking_world, lacking_source, check)


def already_kept(dst: World, target, have: Mark, tip: Position, tip_bytes: bytes) -> bool:
    """Whether the receiver holds, in some generation, the sender's last record where the
    sender has it: that copy was kept before."""
    top = have.last[0] if have.last else -1
    return any(raw_at(dst, target, (g, tip[1])) == tip_bytes for g in range(top + 1))


def keep_both(src: World, dst: World, source, target, have: Mark, sent: Mark,
              masking: bool = False) -> tuple[int, int | None]:
    """Store the sender's latest generation whole as a new generation of the receiver's
    source: (records added, the generation it got; None when it was kept already)."""
    tip_bytes = raw_at(src, source, sent.last)
    if already_kept(dst, target, have, sent.last, mask_row_bytes(tip_bytes) if masking else tip_bytes):
        return 0, None
    generation = max(have.last[0], sent.last[0]) + 1
    added = 0
    rows = src.read_rows(source, after=(sent.last[0], -1), upto=sent.last, as_source_id=target.id)
    for batch in checked(masked_chunks(rows, masking)):
        added += dst.append_rows([row[:1] + (generation,) + row[2:] for row in batch])
    return added, generation


def mask_row_bytes(raw: bytes) -> bytes:
    from ..redact import mask_bytes

    return mask_bytes(raw)


def masked_chunks(chunks, masking: bool):
    """Stored rows with credentials masked in their native bytes and in every text column
    derived from them (tool_input, tool_output: flag `masked` on each row that changed), for
    a world that masks; the rows as they are otherwise. A row whose bytes hold no keyword of
    redact.py passes untouched without being decoded twice; a derived column is checked on
    its own (a JSON `\\u` escape hides a keyword from the bytes, not from the decoded text)."""
    if not masking:
        yield from chunks
        return
    for rows in chunks:
        yield [masked_row(row) for row in rows]


def masked_row(row: tuple) -> tuple:
    from ..redact import mask, may_hold_secret, mask_bytes
    from ..worlds.local import RECORD_COLUMNS, decode_raw, encode_raw

    out = list(row)
    raw = row[3] if row[4] is None else decode_raw(row[3], row[4])
    if may_hold_secret(raw) and (masked := mask_bytes(raw)) != raw:
        out[3:5] = encode_raw(masked)
    for name in _DERIVED:
        at = RECORD_COLUMNS.index(name)
        out[at] = mask(row[at]) if isinstance(row[at], str) else row[at]
    if out == list(row):
        return row
    flags = RECORD_COLUMNS.index("flags")
    out[flags] = ",".join(filter(None, [row[flags], "masked"]))
    return tuple(out)


_DERIVED = ("tool_input", "tool_output")  # the text columns a record's bytes are parsed into


def masked_events(events: list, masking: bool) -> list:
    """Events as a world that masks receives them: every text in their details masked (a
    run's prompt, a harness's error line, a relaunch's reason can quote a credential)."""
    if not masking:
        return events
    from dataclasses import replace

    from ..redact import clean

    return [replace(e, details=clean(e.details)) for e in events]
