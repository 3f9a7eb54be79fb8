"""`dh demo`: watch dh survive a crash in a few seconds, offline, with nothing installed.

DEMO ONLY. A scripted model (model.py, an HTTP server on loopback inside the dh process) and
a tiny scripted harness (harness.py, a child process, stdlib only) that writes its session
in Pi's session-file format, so the demo wrapper (wrappers/demo.py) is Pi's real wrapper
under its own name. These are not the test fakes under tests/fakes/ and are not a harness for `dh run`:
the demo drives them through the real supervision path (run.py: `start_run`, the Supervisor,
the live mirror, repair and resume) in a temporary DH_HOME and harness home."""
