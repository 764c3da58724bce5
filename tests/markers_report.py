# SPDX-License-Identifier: MIT
"""A pytest plugin for tests/test_stages.py: ``-p tests.markers_report`` with
``REDISLOCK_MARKERS_REPORT=<file>`` writes, once collection (and any ``-m`` selection) is
done, each collected test's node id and the names of its markers as JSON to that file."""

from __future__ import annotations

import json
import os

import pytest


def pytest_collection_finish(session: pytest.Session) -> None:
    path = os.environ.get("REDISLOCK_MARKERS_REPORT")
    if not path:
        return
    report = {item.nodeid: sorted({m.name for m in item.iter_markers()}) for item in session.items}
    with open(path, "w", encoding="utf-8") as out:
        json.dump(report, out)
