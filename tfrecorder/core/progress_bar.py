"""Progress of a conversion: rows processed / total, as a tqdm.auto bar.

For a DataFrame the total is its length; for a CSV the bar starts on an estimate from the driver's
sample and switches to the exact count as soon as it is known.

The bar reads a count a few times a second from a driver thread. Locally, workers (in this process or
in worker subprocesses on this machine) each keep a running count in a tiny file of their own under a
local directory (`directory_counts` sums them, and reads the total the pipeline counted). Workers
elsewhere (a portable runner's) count in a Beam counter, which the driver reads from the job service.
The bar renders in Jupyter and terminals and stays silent when output is neither (CI logs).
"""
from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
import tempfile
import threading
import uuid
from typing import Callable, Iterator, Optional

POLL_SECONDS = 0.25


class ProgressReporter:
    """Worker side: `add(n)` after each batch; the count is replaced atomically on disk."""

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, uuid.uuid4().hex)
        self.rows = 0

    def add(self, rows: int) -> None:
        self.rows += rows
        temporary = self.path + ".tmp"
        with open(temporary, "w") as stream:
            stream.write(str(self.rows))
        os.replace(temporary, self.path)


TOTAL_FILE = "rows.total"  # the exact row count, once the pipeline has counted it (the bar starts on an estimate)


def report_total(directory: str, rows: int) -> None:
    """Pipeline side: replace the bar's estimated total by the counted one."""
    temporary = os.path.join(directory, f"{uuid.uuid4().hex}.tmp")
    with open(temporary, "w") as stream:
        stream.write(str(rows))
    os.replace(temporary, os.path.join(directory, TOTAL_FILE))


def total_reported(directory: str) -> Optional[int]:
    try:
        with open(os.path.join(directory, TOTAL_FILE)) as stream:
            return int(stream.read())
    except (OSError, ValueError):
        return None


def rows_reported(directory: str) -> int:
    total = 0
    for name in os.listdir(directory):
        if not name.endswith((".tmp", ".total")):
            try:
                with open(os.path.join(directory, name)) as stream:
                    total += int(stream.read() or 0)
            except (OSError, ValueError):
                continue  # a file being replaced right now; the next poll reads it
    return total


def directory_counts(directory: str) -> tuple[int, Optional[int]]:
    """The rows the workers reported into `directory`, and the total the pipeline counted (None: not yet)."""
    return rows_reported(directory), total_reported(directory)


Counts = Callable[[], tuple[Optional[int], Optional[int]]]  # → (rows done or None: unknown yet, exact total or None)


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython") and getattr(sys.modules["IPython"], "get_ipython", lambda: None)()
    return type(shell).__name__ == "ZMQInteractiveShell"


def should_show(progress: Optional[bool]) -> bool:
    """progress=False: never. Otherwise only when a person can see it (terminal or notebook)."""
    if progress is False:
        return False
    return _in_notebook() or bool(getattr(sys.stderr, "isatty", lambda: False)())


class ProgressBar:
    """Driver side: a context manager showing rows processed / total while the pipeline runs, from
    `counts()` (e.g. `directory_counts` of the workers' directory), read a few times a second and once more
    on exit."""

    def __init__(self, counts: Counts, total: int, description: str = "converting", file=None) -> None:
        from tqdm.auto import tqdm

        self.counts = counts
        self.bar = tqdm(total=total, desc=description, unit="row", file=file, dynamic_ncols=True)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="tfrecorder-progress", daemon=True)

    def _update(self) -> None:
        done, total = self.counts()
        if total is not None and total != self.bar.total:
            self.bar.total = total
            self.bar.refresh()
        if done is not None:
            self.bar.update(min(done, self.bar.total) - self.bar.n)

    def _poll(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            self._update()

    def __enter__(self) -> "ProgressBar":
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._stop.set()
        self._thread.join()
        self._update()
        self.bar.close()


@contextlib.contextmanager
def local_progress(show: bool, total: int) -> Iterator[Optional[str]]:
    """While the block runs, show a bar over `total` rows; yields the directory workers report into
    (None when no bar is shown, so workers skip reporting)."""
    if not show:
        yield None
        return
    directory = tempfile.mkdtemp(prefix="tfrecorder-progress-")
    try:
        with ProgressBar(functools.partial(directory_counts, directory), total):
            yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
