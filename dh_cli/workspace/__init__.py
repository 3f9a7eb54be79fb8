"""Workspace snapshots: a session's cwd, content-addressed, after every step that may write.

What other code calls:
  start_watcher(world_path, wrapper, session, cwd, replay)  the supervisor, per attempt
  restore_workspace(world, session_id, cwd, ...)            resume and the worker, before relaunch
  copy_workspace(src, dst, session_id)                      push and pull"""

from __future__ import annotations


class _NoWatcher:
    def stop(self) -> None:
        pass


def start_watcher(world_path, wrapper, session, cwd: str, replay: dict | None = None, notice=None,
                  committed=None):
    """The snapshot thread for one attempt (a no-op when [workspace] enabled = false);
    committed: the live mirror's event, set when it logged records (else the thread polls)."""
    from .watch import WorkspaceWatcher, load_rules

    try:
        from ..config import load

        if not load().settings.workspace.enabled:
            return _NoWatcher()
    except Exception:  # noqa: BLE001 - a bad config file was reported when dh started
        return _NoWatcher()
    return WorkspaceWatcher(world_path, wrapper, session.id, cwd, replay, load_rules(),
                            notice, committed).start()


def restore_workspace(world, session_id: str, cwd: str, **kwargs):
    from .resume import restore_workspace as restore

    return restore(world, session_id, cwd, **kwargs)


def copy_workspace(src, dst, session_id: str) -> int:
    from .sync import copy_workspace as copy

    return copy(src, dst, session_id)
