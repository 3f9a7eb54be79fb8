"""The log's human views: what `dh log show/list/export/trace` and `dh` alone show, built from the log alone."""
