"""Keep Beam's and TensorFlow's log noise out of the user's notebook during a conversion.

Only the levels of those libraries' own loggers are raised, and only while the conversion runs;
handlers and the root logger are never touched, so the user's logging configuration is unchanged.
"""
from __future__ import annotations

import contextlib
import logging
from typing import Iterator

NOISY_LOGGERS = ("apache_beam", "absl", "tensorflow", "google.auth", "urllib3")


@contextlib.contextmanager
def quiet_libraries(verbose: bool = False) -> Iterator[None]:
    """Silence NOISY_LOGGERS below CRITICAL for the duration (no-op when verbose)."""
    if verbose:
        yield
        return
    loggers = [logging.getLogger(name) for name in NOISY_LOGGERS]
    saved = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, saved):
            logger.setLevel(level)
