"""wrappers/clip.py: a huge line's bounded view parses, keeps every key and every short value
as it was, and cuts a long string only between whole characters and escapes."""

from __future__ import annotations

import json

from dh_cli.wrappers.clip import bounded, clipped_json

NOTE = "more bytes not shown: the native record has them]"
LINE = json.dumps({"escaped": "x\n\"y\\" * 40, "unicode": "é中" * 30, "short": "kept",
                   "list": ["z" * 30, 1, None], "k" * 40: "v"},
                  ensure_ascii=False).encode()


def test_every_cut_parses_and_keeps_keys_and_short_values():
    whole = json.loads(LINE)
    for limit in range(4, 130):
        obj = json.loads(clipped_json(LINE, limit))  # raises on a broken escape or character
        assert list(obj) == list(whole)
        assert obj["list"][1:] == [1, None]
        for key, value in whole.items():
            if isinstance(value, str) and len(json.dumps(value, ensure_ascii=False).encode()) - 2 <= limit:
                assert obj[key] == value, (limit, key)
            elif isinstance(value, str):
                head, _, note = obj[key].partition(" \u2026 [")
                assert value.startswith(head) and note.endswith(NOTE), (limit, key, obj[key])


def test_ascii_escapes_are_cut_whole():
    line = json.dumps({"t": "\u00e9\u4e2d" * 40}).encode()  # \\u00e9\\u4e2d...
    for limit in range(0, 30):
        head = json.loads(clipped_json(line, limit))["t"].partition(" \u2026")[0]
        assert len(head) == limit // 6 and ("\u00e9\u4e2d" * 40).startswith(head)


def test_a_line_without_a_long_string_is_not_copied():
    assert clipped_json(LINE, 1 << 20) is LINE
    assert bounded(LINE, len(LINE)) is LINE and bounded(LINE, None) is LINE
    assert NOTE in bounded(LINE, 100).decode()
