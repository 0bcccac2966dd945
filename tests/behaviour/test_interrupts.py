"""Ctrl-C during a running local conversion: the CLI exits 130 with one line, the API raises
KeyboardInterrupt; either way nothing is published, the temporary directory is removed and no forked
encoding process is left behind.

Each conversion runs in a real subprocess, interrupted by a real SIGINT once it has written its first
piece file (the job is large enough to still be running then, and to use forked encoding processes).
"""
from __future__ import annotations

import csv
import glob
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image

import tfrecorder
from beam_pipelines.launches import runners

pytestmark = pytest.mark.skipif(not runners.can_fork(), reason="SIGINT and /proc are Linux-only here")

ROWS = 60_000
API = """
import sys
import tfrecorder
try:
    tfrecorder.convert(sys.argv[1], sys.argv[2], validate="header", progress=False)
except KeyboardInterrupt as exc:
    print(type(exc).__name__, exc.__cause__, exc.__suppress_context__)
"""


@pytest.fixture(scope="module")
def slow_table(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("slow")
    Image.new("RGB", (16, 16), (10, 20, 30)).save(folder / "a.png")
    with open(folder / "table.csv", "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["split", "image_uri", "label"])
        writer.writerows(["TRAIN" if i % 5 else "TEST", "a.png", "ab"[i % 2]] for i in range(ROWS))
    return folder / "table.csv"


def _running_with(marker: str) -> list[int]:
    """Processes (not zombies) whose command line holds `marker`: the conversion and its forked children."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes().decode(errors="replace") \
                    and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
        except OSError:  # ended meanwhile
            continue
    return found


def _sigint_by_default() -> None:
    """In the conversion's process before it starts: SIGINT's default action, so that Python turns it into
    KeyboardInterrupt as in a terminal, even when the test run itself ignores SIGINT (started in the
    background by a shell without job control, which makes its children inherit that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_once_working(command: list[str], output_dir: Path) -> subprocess.CompletedProcess:
    """Run `command`, send it SIGINT once a piece file exists under `output_dir`, and wait for its end."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               preexec_fn=_sigint_by_default)
    try:
        deadline = time.monotonic() + 240
        while not glob.glob(f"{output_dir}/.incomplete-*/_pieces/**/*.part", recursive=True):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "no piece file was written"
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    deadline = time.monotonic() + 10
    while _running_with(str(output_dir)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _running_with(str(output_dir)) == []  # no forked encoding process is left
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def test_ctrl_c_during_a_cli_conversion_exits_130_with_one_line_and_publishes_nothing(slow_table, tmp_path):
    output_dir = tmp_path / "out"
    done = _interrupt_once_working(
        [sys.executable, "-m", "tfrecorder", "convert", "--source", str(slow_table), "--output_dir",
         str(output_dir), "--validate", "header", "--no_progress"], output_dir)
    assert done.returncode == 130, done.stderr
    kept, resume = sorted(output_dir.iterdir())  # no job directory; the .incomplete- one kept to be continued (issue 27)
    assert kept.name.startswith(".incomplete-") and resume.name == ".resume-" + kept.name[len(".incomplete-"):]
    assert (resume / "fingerprint.json").exists() and not (resume / "lock").exists()
    assert done.stderr.splitlines() == [f"tfrecorder: interrupted; nothing was published; its committed work is "
                                        f"kept in {kept}: the same command continues it"]


def test_ctrl_c_during_an_api_conversion_raises_keyboard_interrupt_after_cleanup(slow_table, tmp_path):
    output_dir = tmp_path / "out"
    done = _interrupt_once_working([sys.executable, "-c", API, str(slow_table), str(output_dir)], output_dir)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "KeyboardInterrupt None True"  # not Beam's RuntimeError, nor shown chained to it
    (kept,) = output_dir.glob(".incomplete-*")
    (job,) = tfrecorder.incomplete_jobs(output_dir)  # the same call would continue it
    assert job.resumable and job.path == str(kept)
