"""Supervisor states (named as in supervisord), and the session state each one sets.

    STARTING --(alive for start_secs)--> RUNNING
    STARTING --(died: a failed start)--> BACKOFF | FATAL (too many failed starts)
    RUNNING  --(died: crashed)---------> BACKOFF | FATAL (too many restarts)
    RUNNING | STARTING --(user signal, stall, takeover, lingering)--> STOPPING
    STOPPING --(exited)-----------------> EXITED (user signal; lingering, its turn done)
                                          | BACKOFF (stall, takeover) | FATAL (no restarts left)
    any      --(the work ended, or died under --no-supervise)--> EXITED
    STARTING | RUNNING --(exited on a provider's limit)--> WAITING | EXITED (--on-limit stop,
                                          or waited the longest allowed)
    WAITING  --(reset time or next try)-> STARTING (not a restart: max_restarts untouched)
    WAITING  --(user signal)------------> EXITED (interrupted: `dh resume` goes on)
    BACKOFF  --(delay over)-------------> STARTING
    BACKOFF  --(user signal)------------> EXITED
    BACKOFF  --(lease taken or stale)---> (no relaunch here: dh exits 4, lease_lost)
    STOPPED  --(first launch)-----------> STARTING

tests/test_supervisor_states.py lists each transition with the tick-level test that drives it.
"""

STOPPED = "STOPPED"  # not started yet (the state a Supervisor is made in)
STARTING = "STARTING"  # launched, not yet running for start_secs
RUNNING = "RUNNING"  # up for at least start_secs
BACKOFF = "BACKOFF"  # died; waiting before the next start
EXITED = "EXITED"  # finished for good (the work ended, or the user stopped it)
STOPPING = "STOPPING"  # dh is stopping it (user signal, or a stall)
FATAL = "FATAL"  # too many failed starts: dh gives up and says how to resume by hand
WAITING = "WAITING"  # the service refused the turn for a limit: waiting for it to reset

ATTEMPT_STATES = (STARTING, RUNNING, STOPPING)  # the harness runs (or is being stopped)

# The sessions table keeps the vocabulary its readers know (liveness.py LIVE_STATES,
# worlds/takeover.py OPEN_STATES): "starting" is a session whose dh has not taken its lock
# yet (liveness gives it a grace), "running" one whose dh holds it. Once launched, every
# state of a live supervisor (STARTING, RUNNING, BACKOFF, STOPPING) is "running"; EXITED
# records how the work ended (finished, stopped, crashed, hung: supervisor/attempts.py).
_SESSION_STATE = {STOPPED: "starting", STARTING: "running", RUNNING: "running", BACKOFF: "running",
                  STOPPING: "running", FATAL: "fatal", WAITING: "waiting"}


def session_state(state: str, outcome: str | None = None) -> str:
    """The sessions.state value for a supervisor state (EXITED: the attempt's outcome)."""
    if state == EXITED:
        return outcome or "finished"
    return _SESSION_STATE[state]
