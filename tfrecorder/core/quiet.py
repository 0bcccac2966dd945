"""Keep Beam's and TensorFlow's log noise out of the user's notebook, and their logging setup untouched.

`quiet_libraries` raises only the levels of those libraries' own loggers, and only while a conversion
runs; it also drops what Beam's own code logs straight on the root logger (its portable runner logs every
job message there, workers' tracebacks included, which tfrecorder raises as its own errors instead). `leaves_logging_alone` wraps the public calls (convert, load, inspect, verify): whatever they or
the libraries they use change in the root, `tensorflow`, `apache_beam` or `absl` loggers — Beam's
`PipelineOptions()` calls `logging.basicConfig()`, TensorFlow's first log call adds a handler to its
logger when the root has none — is put back as it was when the call returns or raises. (A change
another thread makes to those loggers while such a call runs is undone too; configure logging first.)
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
from typing import Callable, Iterator, Optional, TypeVar

NOISY_LOGGERS = ("apache_beam", "absl", "tensorflow", "google.auth", "urllib3")
KEPT_LOGGERS = ("", "tensorflow", "apache_beam", "absl")  # "" is the root logger

Function = TypeVar("Function", bound=Callable)


class BeamRootRecords(logging.Filter):
    """Drops records below CRITICAL that Beam's own code logs on the root logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.CRITICAL or f"{os.sep}apache_beam{os.sep}" not in record.pathname


@contextlib.contextmanager
def quiet_libraries(verbose: bool = False) -> Iterator[None]:
    """Silence NOISY_LOGGERS, and Beam's records on the root logger, below CRITICAL for the duration
    (no-op when verbose)."""
    if verbose:
        yield
        return
    loggers = [logging.getLogger(name) for name in NOISY_LOGGERS]
    saved = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    root, beam_records = logging.getLogger(), BeamRootRecords()
    root.addFilter(beam_records)
    try:
        yield
    finally:
        root.removeFilter(beam_records)
        for logger, level in zip(loggers, saved):
            logger.setLevel(level)


@dataclasses.dataclass(frozen=True)
class LoggerState:
    """What configures a logger: level, handlers, propagation and the disabled flag."""

    level: int = logging.NOTSET
    handlers: tuple[logging.Handler, ...] = ()
    propagate: bool = True
    disabled: bool = False

    @classmethod
    def of(cls, logger: logging.Logger) -> "LoggerState":
        return cls(logger.level, tuple(logger.handlers), logger.propagate, logger.disabled)

    def apply_to(self, logger: logging.Logger) -> None:
        if logger.level != self.level:
            logger.setLevel(self.level)
        if tuple(logger.handlers) != self.handlers:
            logger.handlers[:] = self.handlers
        logger.propagate, logger.disabled = self.propagate, self.disabled


def logging_state(names: tuple[str, ...] = KEPT_LOGGERS) -> dict[str, Optional[LoggerState]]:
    """Each named logger's state; None for a logger nobody has created yet (it has the defaults)."""
    existing = logging.Logger.manager.loggerDict
    return {name: LoggerState.of(logging.getLogger(name)) if name == "" or isinstance(existing.get(name), logging.Logger)
            else None for name in names}


def restore_logging_state(saved: dict[str, Optional[LoggerState]]) -> None:
    """Put the loggers back as `saved` found them (a logger created meanwhile gets the defaults)."""
    existing = logging.Logger.manager.loggerDict
    for name, state in saved.items():
        if state is not None or isinstance(existing.get(name), logging.Logger):
            (state or LoggerState()).apply_to(logging.getLogger(name))


def leaves_logging_alone(function: Function) -> Function:
    """Decorate a public call so the KEPT_LOGGERS are configured afterwards exactly as before it."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        saved = logging_state()
        try:
            return function(*args, **kwargs)
        finally:
            restore_logging_state(saved)

    return call  # type: ignore[return-value]
