"""`dh log …`: list, show (or follow), export and rebuild sessions from the log; schema status.

One Typer group whose commands live by job: reading (log_read.py), carrying a session out
(log_export.py) and keeping the log (log_maintain.py). They are registered here, in the order
`dh log --help` and the man pages list them."""

import typer

from .log_export import log_export, log_trace
from .log_maintain import log_rebuild, log_rm, log_status
from .log_read import log_cost, log_docs, log_list, log_schema, log_search, log_show

app = typer.Typer(help="""Read the log: sessions, timelines, native records, exports.

Example:
  $ dh log list
  $ dh log show 1m8k6p --follow
""", no_args_is_help=True, rich_markup_mode="rich")

for _name, _command in [("list", log_list), ("search", log_search), ("show", log_show),
                        ("docs", log_docs), ("export", log_export), ("trace", log_trace),
                        ("rebuild", log_rebuild), ("rm", log_rm), ("schema", log_schema),
                        ("cost", log_cost), ("status", log_status)]:
    app.command(_name)(_command)
