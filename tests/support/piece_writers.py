"""Which processes wrote a job's piece files: forked encoding processes or the converting one."""
from __future__ import annotations

import os
from pathlib import Path

from tfrecorder.io import storage


def log_piece_writers(monkeypatch, log: Path) -> Path:
    """From now on, a "pid path" line in `log` per piece file opened (a file, so that forked children's
    writes show); returns `log`."""
    real_open_write = storage.open_write

    def watched(path):
        if f"{os.sep}_pieces{os.sep}" in path and path.endswith(".part"):
            with open(log, "a") as out:
                out.write(f"{os.getpid()} {path}\n")
        return real_open_write(path)

    monkeypatch.setattr(storage, "open_write", watched)
    return log


def piece_writers(log: Path) -> set[int]:
    """The processes that opened piece files, by the log."""
    return {int(line.split()[0]) for line in log.read_text().splitlines()}
