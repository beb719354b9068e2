"""Without a trainer installed, its tests are not collected (they import it at module level); CI installs all three
through the test extra."""

from __future__ import annotations

import importlib.util

collect_ignore_glob = [
    pattern
    for module, pattern in (
        ("lightning", "*lightning*.py"),
        ("transformers", "*transformers*.py"),
        ("accelerate", "*accelerate*.py"),
    )
    if importlib.util.find_spec(module) is None
]
