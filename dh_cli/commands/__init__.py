"""The CLI commands, one module per command or group: each parses, calls the library, prints (dh_cli/cli.py puts them together)."""
