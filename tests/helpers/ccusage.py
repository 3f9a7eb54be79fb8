"""ccusage, the real tool dh's cost figures are checked against (.ci/run installs it under
the e2e cache; DH_CCUSAGE names another): its path, or None where it is missing."""

from __future__ import annotations

import os
from pathlib import Path

CCUSAGE = next(iter(p for p in [os.environ.get("DH_CCUSAGE"),
                                Path.home() / ".cache/dh-e2e/ccusage/node_modules/.bin/ccusage"]
                    if p and Path(p).exists()), None)
