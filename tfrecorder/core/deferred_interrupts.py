"""Ctrl-C held back while a few lines must finish: cleanup that leaves nothing half-removed."""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Run the block with SIGINT recorded instead of raised, then raise KeyboardInterrupt if one came, so a
    second Ctrl-C during cleanup neither interrupts it nor is lost. The caller's handler is put back.
    Only the main thread receives signals; elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: received.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt
