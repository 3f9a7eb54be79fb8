"""One error family for dh. The library raises these; the CLI edge turns each into a single
`Error: …` line on stderr and the class's exit code."""


class DhError(Exception):
    """Base of every error dh reports to the user."""

    exit_code = 1
    hint: str | None = None

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        if hint is not None:
            self.hint = hint


class UsageError(DhError):
    exit_code = 2


class UnknownHarness(UsageError):
    pass


class HarnessNotFound(DhError):
    exit_code = 127


class SessionNotFound(DhError):
    pass


class AmbiguousSession(UsageError):
    pass


class LogDbError(DhError):
    """The log database is corrupt, locked, unwritable or from a newer dh."""

    exit_code = 3


class LogConflict(LogDbError):
    """The log refused a change that would break one of its keys (a source's relpath taken)."""


class NativeStateError(DhError):
    """Native session state is missing, unreadable or not what dh expects."""


class RebuildConflict(DhError):
    pass


class SessionLocked(DhError):
    exit_code = 4


class WorldError(DhError):
    """A remote world (PostgreSQL) is unreachable or refused us."""

    exit_code = 5


class ConfigError(UsageError):
    pass
