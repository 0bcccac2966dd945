"""Import TensorFlow without its C++ start-up lines on stderr, hiding no warning or error.

TensorFlow's native libraries print a fixed set of lines while they load and when the devices are first
listed (oneDNN notice, "Could not find cuda drivers", "failed call to cuInit" on machines without a
GPU, the CPU-instructions notice, absl's "All log messages before absl::InitializeLog()"). They are
written before TensorFlow's logging is set up, so TF_CPP_MIN_LOG_LEVEL cannot hide them.

So the first import made by tfrecorder runs with file descriptor 2 pointed at a temporary file; the
known start-up lines are dropped and everything else written meanwhile (Python warnings, real errors,
other threads' output) goes to the real stderr afterwards, in order. If the user has not set
TF_CPP_MIN_LOG_LEVEL, it is "1" during the import (and removed again): TensorFlow keeps that level,
so INFO lines such as tf.data's per-dataset "buffer_size is unspecified" stay out of notebooks while
warnings and errors still show. When the user has imported TensorFlow already, nothing is changed:
it is their TensorFlow and their output.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
from types import ModuleType
from typing import Iterator

# TensorFlow's known start-up messages, as logged by absl/glog ("I0000 00:00:17... 123 port.cc:153] message").
_LOGGED_AT_START_UP = (
    r"oneDNN custom operations are on\. .*",
    r"Could not find cuda drivers on your machine, GPU will not be used\.",
    r"failed call to cuInit: .*",
    r"Unable to register cu(DNN|FFT|BLAS) factory: .*",
    r"computation placer already registered\. .*",
    r"TF-TRT Warning: Could not find TensorRT",
    r"This TensorFlow binary is optimized to use available CPU instructions in performance-critical operations\.",
    r"(retrieving CUDA diagnostic information for host|hostname|libcuda reported version is"
    r"|kernel reported version is|kernel driver does not appear to be running on this host).*",
)
# ... and the lines printed without that prefix.
_PRINTED_AT_START_UP = (
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler flags\.",
)
START_UP_LINE = re.compile(r"(?:[IWEF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] (?:" + "|".join(_LOGGED_AT_START_UP) + ")"
                           + "|" + "|".join(_PRINTED_AT_START_UP) + r")\s*")

INFO_HIDDEN = "1"  # TF_CPP_MIN_LOG_LEVEL that hides INFO lines, keeps warnings and errors
_lock = threading.Lock()
_redirect_lock = threading.RLock()


def without_start_up_lines(text: str) -> str:
    """`text` minus TensorFlow's known start-up lines."""
    return "".join(line for line in text.splitlines(keepends=True) if not START_UP_LINE.fullmatch(line))


def import_tensorflow() -> ModuleType:
    """`import tensorflow`, the first time without TensorFlow's start-up lines (see the module docstring)."""
    with _lock:
        if "tensorflow" not in sys.modules:
            with info_level_unless_set(), stderr_without_start_up_lines():
                import tensorflow as tf

                tf.config.list_physical_devices()  # loads the GPU platform: the cuInit lines come now, not later
    import tensorflow

    return tensorflow


@contextlib.contextmanager
def info_level_unless_set() -> Iterator[None]:
    """TF_CPP_MIN_LOG_LEVEL=1 for the duration, unless the user has set it."""
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        yield
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = INFO_HIDDEN
    try:
        yield
    finally:
        if os.environ.get("TF_CPP_MIN_LOG_LEVEL") == INFO_HIDDEN:
            del os.environ["TF_CPP_MIN_LOG_LEVEL"]


@contextlib.contextmanager
def stderr_without_start_up_lines() -> Iterator[None]:
    """Send file descriptor 2 to a temporary file for the duration; then write it to the real stderr,
    minus TensorFlow's known start-up lines. One thread at a time (each restores the descriptor it saved)."""
    with _redirect_lock:
        try:
            saved_fd = os.dup(2)
        except OSError:  # no stderr to protect
            yield
            return
        yield from _redirected(saved_fd)


def _redirected(saved_fd: int) -> Iterator[None]:
    with tempfile.TemporaryFile() as captured:
        _flush_stderr()
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            _flush_stderr()
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            captured.seek(0)
            rest = without_start_up_lines(captured.read().decode("utf-8", "replace")).encode("utf-8")
            while rest:
                rest = rest[os.write(2, rest):]


def _flush_stderr() -> None:
    if sys.stderr is not None:
        sys.stderr.flush()
