"""`make demo` (python -m tfrecorder.demo) prints its own summary and nothing else."""
from __future__ import annotations

import re
import subprocess
import sys

from support.cli_runs import USER_ENV

DEMO_LINES = (
    r"sample dataset: .*/demo_output/sample/data\.csv \(60 generated JPEG/PNG images\)",
    r"ConversionResult\(DirectRunner\)",
    r"  tfrecord_dir: .*/demo_output/tfrecords/demo-\d{8}-\d{6}",
    r"  rows in: 60  written: TRAIN=\d+, VALIDATION=\d+, TEST=\d+  discarded: 0",
    r"  bytes written: [\d,]+  elapsed: [\d.]+ s",
    r"  image check: validate='decode'",
    r"read back with tfrecorder.load:",
    r"  (TRAIN|VALIDATION|TEST): \d+ records decoded, image shapes \[.*\], labels \{.*\}",
)


def test_demo_prints_only_its_own_lines(tmp_path):
    """No TensorFlow start-up lines (absl, oneDNN, CUDA, CPU instructions) and no Beam logs, on either stream."""
    done = subprocess.run([sys.executable, "-m", "tfrecorder.demo"], cwd=tmp_path, capture_output=True, text=True,
                          env=USER_ENV, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert [line for line in lines if not any(re.fullmatch(p, line) for p in DEMO_LINES)] == []
    assert len(lines) == len(DEMO_LINES) + 2  # one "records decoded" line per split
