"""Run one worker's per-batch work on every core: forked child processes fed round-robin.

A local Beam job runs its DoFns in one process, and the per-row Python work of encoding (probing,
serialising, framing, writing) holds the GIL, so threads cannot spread it. Beam's own multi-process
mode starts fresh interpreters that import Beam and tfrecorder again (seconds of CPU each). A fork
costs milliseconds: the children inherit the DoFn as it is (schema, encoder, vocabularies) and only
run its batch handler.

- Deterministic: task k of a round goes to child k mod n, and each child handles its tasks in order,
  so the same tasks give every child the same work (and the same output files) on every run.
- Bounded: at most `in_flight` tasks are queued per child; `submit` waits for a child's oldest result
  before giving it another, so memory holds a few batches whatever the job's size.
- Failures surface: a handler's exception is sent back and re-raised by the parent (failing the
  bundle, which the runner may retry); a child that dies is reported; the parent then closes the
  pool. Children are daemonic and stop when the pool closes or the parent exits; a parent killed
  outright (SIGKILL: no exit handlers run) leaves no child behind either, as idle children notice
  that their parent is gone.

Only fork-safe work belongs here: the parent must not have started thread pools or network clients
the handler uses (callers use it for local files only).
"""
from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import pickle
import queue
import signal
import weakref
from typing import Any, Callable, Iterator

_POLL_SECONDS = 1.0  # how often a waiting parent (an idle child) checks that the child (the parent) is alive


class ChildFailed(RuntimeError):
    """A child process died (killed, out of memory, crashed) before answering."""


def _serve(handle: Callable[[Any], Any], tasks, results, parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the parent, which stops the children
    gc.freeze()  # inherited objects (~440k with TensorFlow loaded): never traversed nor their pages copied
    while True:
        try:
            task = tasks.get(timeout=_POLL_SECONDS)
        except queue.Empty:
            if os.getppid() != parent:  # the parent was killed (no chance to stop us): do not linger
                break
            continue
        if task is None:
            break
        try:
            answer = pickle.dumps((True, handle(task)), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # noqa: BLE001 - sent back and re-raised by the parent
            try:
                answer = pickle.dumps((False, exc), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001 - an exception that does not pickle
                answer = pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}")))
        results.put(answer)
    results.close()
    results.join_thread()


def _terminate(processes: list) -> None:
    for process in processes:
        if process.is_alive():
            process.terminate()
            process.join()


class _Child:
    def __init__(self, context, handle: Callable[[Any], Any]) -> None:
        self.tasks, self.results = context.Queue(), context.Queue()
        self.process = context.Process(target=_serve, args=(handle, self.tasks, self.results, os.getpid()),
                                       daemon=True, name="tfrecorder-encode")
        self.outstanding = 0

    def receive(self) -> Any:
        while True:
            try:
                answer = self.results.get(timeout=_POLL_SECONDS)
                break
            except queue.Empty:
                if not self.process.is_alive():
                    raise ChildFailed(f"an encoding process stopped (exit code {self.process.exitcode})") from None
        self.outstanding -= 1
        ok, value = pickle.loads(answer)
        if not ok:
            raise value
        return value


class ForkPool:
    """`processes` forked children each running `handle(task)`; results come back to the parent."""

    def __init__(self, processes: int, handle: Callable[[Any], Any], in_flight: int = 2) -> None:
        if processes < 1 or in_flight < 1:
            raise ValueError(f"processes and in_flight must be >= 1, got {processes}, {in_flight}")
        context = multiprocessing.get_context("fork")
        self._children = [_Child(context, handle) for _ in range(processes)]
        for child in self._children:  # all forked before any queue's feeder thread starts
            child.process.start()
        # A pool dropped without close() (a runner abandoning a failed pipeline) still stops its children.
        self._finalizer = weakref.finalize(self, _terminate, [child.process for child in self._children])
        self.in_flight = in_flight
        self._next = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        """Closed by `close()` or by a failure (a new pool must be forked)."""
        return self._closed

    @property
    def pids(self) -> list[int]:
        """The children's process ids."""
        return [child.process.pid for child in self._children]

    def submit(self, task: Any) -> list:
        """Queue `task` on the next child in turn; returns the results that had to be collected first."""
        child = self._children[self._next]
        self._next = (self._next + 1) % len(self._children)
        collected = []
        with self._closing_on_error():
            while child.outstanding >= self.in_flight:
                collected.append(child.receive())
            child.tasks.put(task)
            child.outstanding += 1
        return collected

    def drain(self) -> list:
        """Every outstanding result, child by child, in the order each child handled its tasks."""
        with self._closing_on_error():
            return [child.receive() for child in self._children for _ in range(child.outstanding)]

    def broadcast(self, task: Any) -> tuple[list, list]:
        """Collect every outstanding result, then run `task` on every child: (those results, one answer
        per child). Starts a new round: the next task goes to the first child again."""
        drained = self.drain()
        with self._closing_on_error():
            for child in self._children:
                child.tasks.put(task)
                child.outstanding += 1
            answers = [child.receive() for child in self._children]
        self._next = 0
        return drained, answers

    def close(self, wait: bool = True) -> None:
        """Stop the children (letting them finish their current task when `wait`) and release the queues."""
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        for child in self._children:
            if wait and child.process.is_alive():
                child.tasks.put(None)
        for child in self._children:
            child.process.join(timeout=5 if wait else 0)
            if child.process.is_alive():
                child.process.terminate()
                child.process.join()
            for channel in (child.tasks, child.results):
                channel.close()
                channel.cancel_join_thread()

    @contextlib.contextmanager
    def _closing_on_error(self) -> Iterator[None]:
        try:
            yield
        except BaseException:
            self.close(wait=False)
            raise
