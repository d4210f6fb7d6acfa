"""benchmarks/copy_probe.py on the test device, at a small size: every measurement it names is
reported, as a bandwidth."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_copy_probe_reports_each_measurement():
    env = {**os.environ, "COPY_PROBE_ELEMENTS": "16384"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "copy_probe.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(rows) == 11
    assert rows[0]["what"] == "first pair, ones" and len(rows[0]["value"]) == 3
    assert rows[-1]["what"] == "newer pair after 2 s idle"
    for row in rows:
        values = row["value"] if isinstance(row["value"], list) else [row["value"]]
        assert all(isinstance(v, int) and v >= 0 for v in values), row
    assert [r["s"] for r in rows] == sorted(r["s"] for r in rows)
