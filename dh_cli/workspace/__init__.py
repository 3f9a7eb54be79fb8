"""Workspace snapshots: a session's cwd, content-addressed, after every step that may write.

What other code calls:
  start_watcher(world_path, wrapper, session, cwd, replay)  the supervisor, per attempt
  restore_workspace(world, session_id, cwd, ...)            resume and the worker, before relaunch
  unrecorded_changes(world, session_id, cwd)                the relaunch plan of a cut turn
  steps_not_restored(world, wrapper, session_id, replay)    the relaunch plan after a restore
  copy_workspace(src, dst, session_id, masking)             push and pull"""

from __future__ import annotations


class _NoWatcher:
    def stop(self) -> None:
        pass

    def wait_for_start(self, timeout: float) -> None:
        pass


def _enabled() -> bool:
    try:
        from ..config import load

        return load().settings.workspace.enabled
    except Exception:  # noqa: BLE001 - a bad config file was reported when dh started
        return False


def unrecorded_changes(world, session_id: str, cwd: str) -> list[dict]:
    """How the folder differs from the snapshot of the session's last recorded step."""
    if not _enabled():
        return []
    from .watch import unrecorded

    return unrecorded(world, session_id, cwd)


def steps_not_restored(world, wrapper, session_id: str, replay: dict) -> list:
    """The recorded steps (behind.Step) whose files this resume's restore could not bring:
    its snapshot was taken before them."""
    if not _enabled():
        return []
    from .behind import not_restored

    return not_restored(world, wrapper, session_id, replay)


def start_watcher(world_path, wrapper, session, cwd: str, replay: dict | None = None, notice=None,
                  committed=None):
    """The snapshot thread for one attempt (a no-op when [workspace] enabled = false), whose
    first snapshot of a session is the folder as it found it, taken as the harness starts;
    committed: the live mirror's event, set when it logged records (else the thread polls)."""
    from .watch import WorkspaceWatcher, load_rules

    if not _enabled():
        return _NoWatcher()
    return WorkspaceWatcher(world_path, wrapper, session.id, cwd, replay, load_rules(),
                            notice, committed).start()


def restore_workspace(world, session_id: str, cwd: str, **kwargs):
    from .resume import restore_workspace as restore

    return restore(world, session_id, cwd, **kwargs)


def copy_workspace(src, dst, session_id: str, masking: bool = False) -> int:
    from .sync import copy_workspace as copy

    return copy(src, dst, session_id, masking)
