"""Documents: typed session state (todo lists, plans, tasks) mirrored from the tool calls each
harness already records. Each wrapper says which of its tool calls edit a document
(`Wrapper.document_edit`); this package replays those edits in log order, each tied to the
record that carries the harness's answer to it."""
