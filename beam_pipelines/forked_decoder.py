"""Small local decode-mode jobs: TensorFlow's import and decodes in one forked child process.

`validate="decode"` needs TensorFlow, whose import costs ~2 s of CPU and holds the GIL the whole time
(a background thread does not hide it). In a small job that import is most of the run. Forked before
the Beam graph is built, a child imports TensorFlow on another core while this process builds and
starts the pipeline, reads the table and checks headers; the DoFn then sends each batch's image bytes
to the child and gets TensorFlow's verdicts back (`decode_check.decode`, so the verdicts are exactly
the in-process ones). The driver's process never imports TensorFlow. Large jobs keep the in-process
`DecodePool` instead: there a thread per core decodes and one import serves them all
(`beam_pipelines.runners.forked_decoder_pays_off` decides).

Only started when TensorFlow is not imported yet (forking a process whose TensorFlow runs threads is
unsafe) and forking is (`runners.can_fork`). A child that dies fails the batch's bundle, and so the
job, as any infrastructure failure does.
"""
from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any, Iterator, Optional

from beam_pipelines.fetch import Fetched
from beam_pipelines.fork_pool import ForkPool
from tfrecorder.io import decode_check
from tfrecorder.tensorflow_import import import_tensorflow

_WARM, _DECODE = "warm", "decode"
_started: dict[str, "ForkedDecoder"] = {}  # job (its temporary directory) → the decoder started for it


def _serve(task: tuple[str, Any]) -> Optional[dict[str, decode_check.Verdict]]:
    """The child's handler: ("warm", _) imports TensorFlow; ("decode", [(uri, bytes)]) → {uri: verdict}."""
    operation, images = task
    if operation == _WARM:
        import_tensorflow()
        return None
    return {uri: decode_check.decode(data) for uri, data in images}


class Verdicts:
    """One batch's verdicts, as `DecodePool`'s Pending gives them (`verdict(uri, data)`, `wait()`)."""

    def __init__(self, verdicts: dict[str, decode_check.Verdict]) -> None:
        self._verdicts = verdicts

    def verdict(self, uri: str, data: bytes) -> decode_check.Verdict:
        found = self._verdicts.get(uri)
        return found if found is not None else decode_check.decode(data)

    def wait(self) -> None:
        """Every verdict is in already."""


class ForkedDecoder:
    """A forked child that imports TensorFlow at once and then decodes the batches it is sent."""

    def __init__(self) -> None:
        if "tensorflow" in sys.modules:
            raise RuntimeError("TensorFlow is imported already: decode in this process (DecodePool)")
        self._pool = ForkPool(1, _serve, in_flight=2)
        self._pool.submit((_WARM, None))  # the import starts now, while the caller goes on
        self._lock = threading.Lock()  # one batch at a time, whichever thread runs the bundle

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self._pool.pids[0]

    def submit(self, fetched: Fetched) -> Verdicts:
        """Decode a batch's fetched images in the child (read failures are the fetcher's to report)."""
        images = [(uri, data) for uri, data in fetched.items() if isinstance(data, bytes)]
        with self._lock:
            self._pool.submit((_DECODE, images))
            *_warm, verdicts = self._pool.drain()
        return Verdicts(verdicts)

    def close(self) -> None:
        """Stop the child at once (every batch's verdicts are in; it may still be importing TensorFlow)."""
        self._pool.close(wait=False)


@contextlib.contextmanager
def started_for(job: str, start: bool) -> Iterator[None]:
    """While the block runs, `decoder_for(job)` gives a ForkedDecoder started now (when `start`)."""
    if not start:
        yield
        return
    decoder = _started[job] = ForkedDecoder()
    try:
        yield
    finally:
        _started.pop(job, None)
        decoder.close()


def decoder_for(job: str) -> Optional[ForkedDecoder]:
    """The decoder started for `job` by `started_for`, if any (the in-process runner's DoFns run here)."""
    return _started.get(job)
