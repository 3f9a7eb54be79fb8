"""`dh serve`: every session of this machine (and, with a team world, of the team) in a browser,
live. A small Starlette app over the log opened read-only: the session list (filters, the
log's full-text search), one session's trace drawn by the HTML export's renderer with its
attempts, resumes and workspace snapshots, the cost by day, model, harness and session
(cost.py), and the team's holdings. Pages are Jinja2 templates with autoescape (pages.py)
and follow the log over server-sent events (live.py). The guard (guard.py) wants the token
on every request, checks the Host header, allows GET only and sets a strict
Content-Security-Policy; server.py caps connections and bounds slow headers."""
