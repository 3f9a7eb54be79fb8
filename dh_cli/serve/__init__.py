"""`dh serve`: every session of this machine (and, with a world, of the team) in a browser,
live. A small Starlette app over the log opened read-only: the session list (filters, the
log's full-text search), one session's trace drawn by the HTML export's renderer with its
attempts, resumes and workspace snapshots, and the team's holdings. Pages follow the log over
server-sent events (live.py). The guard (guard.py) keeps it to loopback unless a token is
set, checks the Host header, allows GET only and sets a strict Content-Security-Policy."""
