"""Helpers shared by test modules. A test module imports what it shares from here (or from
tests/rig.py, tests/pg.py, tests/fakes/), never from another test module: a test module is
free to change for its own tests (tests/test_test_layout.py holds this)."""
