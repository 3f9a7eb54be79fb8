"""One error family for dh. The library raises these; the CLI edge turns each into a single
`Error: …` line on stderr and the class's exit code.

A class that brings a new exit code says what it means (`exit_meaning`): the man page's EXIT
STATUS is generated from these classes and OTHER_EXIT_CODES (dh_cli/_gen_docs.py)."""


class DhError(Exception):
    """Base of every error dh reports to the user."""

    exit_code = 1
    exit_meaning = "Failure: a session not found, native state missing or unreadable, a check failed."
    hint: str | None = None

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        if hint is not None:
            self.hint = hint


class UsageError(DhError):
    exit_code = 2
    exit_meaning = "Usage error: a bad option or argument, an unknown harness, a bad config file."


class UnknownHarness(UsageError):
    pass


class HarnessNotFound(DhError):
    exit_code = 127
    exit_meaning = "The harness binary was not found."


class SessionNotFound(DhError):
    pass


class AmbiguousSession(UsageError):
    pass


class LogDbError(DhError):
    """The log database is corrupt, locked, unwritable or from a newer dh."""

    exit_code = 3
    exit_meaning = "The log database is corrupt, locked, unwritable or from a newer dh."


class LogConflict(LogDbError):
    """The log refused a change that would break one of its keys (a source's relpath taken)."""


class NativeStateError(DhError):
    """Native session state is missing, unreadable or not what dh expects."""


class RebuildConflict(DhError):
    pass


class SessionLocked(DhError):
    exit_code = 4
    exit_meaning = "The session is locked: another dh process is running it."


class WorldError(DhError):
    """A team world (its server) is unreachable or refused us."""

    exit_code = 5
    exit_meaning = "A team world is unreachable or refused the connection."


class ConfigError(UsageError):
    pass


class NotGranted(DhError):
    """A session from elsewhere had permissions this machine's flags do not grant its harness."""

    exit_code = 6
    exit_meaning = ("A session from elsewhere ran with permissions this machine's local_flags "
                    "do not grant its harness.")


class DamagedRow(DhError):
    """A record row a world holds is not one dh can read: a codec it does not know, packed
    bytes that do not decode, columns of the wrong types."""


class CopiedWithFailures(DhError):
    """`dh world pull/push` copied every session it could; some it could not take whole."""

    exit_code = 7
    exit_meaning = ("dh world pull or push finished with failures: the sessions named on "
                    "stderr could not be copied whole (a damaged record or workspace object); "
                    "every other session was.")


# The exit codes that are no DhError's: success, Ctrl-C (cli.report_error) and the harness's own.
OTHER_EXIT_CODES = [
    ("0", "Success."),
    ("130", "Interrupted by Ctrl-C (for example `dh log show --follow`)."),
    ("N", "dh run and dh resume exit with the harness's own exit code when it finishes, "
          "and with 128+signal when it was killed for good (after the restart budget) "
          "or when dh itself was stopped by that signal."),
]


def exit_codes() -> list[tuple[str, str]]:
    """(code, meaning) of every exit code dh documents, in the man page's order."""
    meanings = {}
    for klass in _family(DhError):
        if "exit_meaning" in vars(klass):
            meanings[klass.exit_code] = klass.exit_meaning
    missing = {k.__name__: k.exit_code for k in _family(DhError) if k.exit_code not in meanings}
    if missing:
        raise AssertionError(f"exit codes without a meaning: {missing}")
    rows = OTHER_EXIT_CODES + [(str(code), text) for code, text in meanings.items()]
    return sorted(rows, key=lambda row: int(row[0]) if row[0].isdigit() else 1 << 30)


def _family(klass: type) -> list[type]:
    out = [klass]
    for sub in klass.__subclasses__():
        out += _family(sub)
    return out
