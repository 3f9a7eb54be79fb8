"""Supervisor states (named as in supervisord). Constants only."""

STARTING = "STARTING"  # launched, not yet running for start_secs
RUNNING = "RUNNING"  # up for at least start_secs
BACKOFF = "BACKOFF"  # died; waiting before the next start
EXITED = "EXITED"  # finished for good (the work ended, or the user stopped it)
STOPPING = "STOPPING"  # dh is stopping it (user signal, or a stall)
FATAL = "FATAL"  # too many failed starts: dh gives up and says how to resume by hand
