"""Mirroring native session state into the log."""

from .session import SessionMirror

__all__ = ["SessionMirror"]
