"""Run one worker's per-batch work on every core: forked child processes fed round-robin.

A local Beam job runs its DoFns in one process, and the per-row Python work of encoding (probing,
serialising, framing, writing) holds the GIL, so threads cannot spread it. Beam's own multi-process
mode starts fresh interpreters that import Beam and tfrecorder again (seconds of CPU each). A fork
costs milliseconds: the children inherit the DoFn as it is (schema, encoder, vocabularies) and only
run its batch handler.

- Deterministic: task k of a round goes to child k mod n, and each child handles its tasks in order,
  so the same tasks give every child the same work (and the same output files) on every run. Tasks
  whose output depends on the task alone (`BundleTasks`: a table's parts) go instead to the first
  child free, so that children finish together whatever the parts cost.
- Bounded: at most `in_flight` tasks are queued per child; `submit` waits for a child's oldest result
  before giving it another, so memory holds a few batches whatever the job's size.
- No child waits on the parent: while the parent waits for one child's answer it reads every other
  child's finished answers too (kept until their turn), so a child whose answer is larger than the
  pipe buffer goes on with its next task instead of blocking until the parent asks for that answer.
  Results are still returned in the same order (each child's in its order, children in turn).
- Failures surface: a handler's exception is sent back and re-raised by the parent (failing the
  bundle, which the runner may retry); a child that dies is reported; the parent then closes the
  pool. Children are daemonic and stop when the pool closes or the parent exits.
- No orphans: a parent killed outright (SIGKILL: no exit handler runs) leaves no child behind,
  whatever the child is blocked on (a handler, or writing an answer larger than the pipe buffer that
  nobody will read). Each child asks the kernel for a signal when its parent dies (PR_SET_PDEATHSIG)
  and exits on it once its parent is no longer the process that forked it; a child is single-threaded
  (answers are written by its one thread, not by a queue's feeder thread), so the signal interrupts
  whatever blocking call it is in.

`BundleTasks` runs a DoFn's whole-element tasks (an image-free table's parts: its scan, count and
encoding) on such a pool, bundle by bundle.

Only fork-safe work belongs here: the parent must not have started thread pools or network clients
the handler uses (callers use it for local files only).
"""
from __future__ import annotations

import collections
import contextlib
import ctypes
import gc
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import weakref
from typing import Any, Callable, Iterator, Optional

from tfrecorder.io import storage

_POLL_SECONDS = 1.0  # how often a waiting parent checks that the child is alive
_PR_SET_PDEATHSIG = 1  # prctl(2) option: the signal this process receives when its parent dies
# Not SIGKILL: the kernel also sends it when the parent *thread* that forked the child exits (a runner's
# worker thread), while the parent process lives on; the handler tells the two apart.
_PARENT_DIED = signal.SIGUSR1


class ChildFailed(RuntimeError):
    """A child process died (killed, out of memory, crashed) before answering."""


def _exit_with_parent(parent: int) -> None:
    """In a child right after the fork: exit (without cleanup: there is no one left to answer) as soon as
    `parent` is no longer this process's parent, also if it died before we asked to be told."""
    def parent_died(_signum, _frame) -> None:
        if os.getppid() != parent:
            os._exit(1)

    signal.signal(_PARENT_DIED, parent_died)
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, _PARENT_DIED, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    parent_died(_PARENT_DIED, None)


def _serve(handle: Callable[[Any], Any], tasks, answers, parent: int) -> None:
    _exit_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the parent, which stops the children
    gc.freeze()  # inherited objects (~440k with TensorFlow loaded): never traversed nor their pages copied
    storage.maps_sources_here()  # a fault in a mapped source file ends this child, reported as ChildFailed
    while True:
        task = tasks.get()
        if task is None:
            break
        try:
            answer = pickle.dumps((True, handle(task)), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # noqa: BLE001 - sent back and re-raised by the parent
            try:
                answer = pickle.dumps((False, exc), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001 - an exception that does not pickle
                answer = pickle.dumps((False, RuntimeError(f"{type(exc).__name__}: {exc}")))
        answers.send_bytes(answer)  # by this thread: blocks until the parent reads, or the parent dies


def _ending(exit_code: Optional[int]) -> str:
    """How a child ended, for ChildFailed: its exit code, or the signal that ended it (exit code -N)."""
    if exit_code is None or exit_code >= 0:
        return f"exit code {exit_code}"
    try:
        name = signal.Signals(-exit_code).name
    except ValueError:
        name = f"signal {-exit_code}"
    if -exit_code == signal.SIGBUS:  # storage.open_source maps local source files in children
        name += ": a file it had mapped, such as a local Parquet source, shrank while it was read"
    return f"exit code {exit_code}, {name}"


def _terminate(processes: list) -> None:
    for process in processes:
        if process.is_alive():
            process.terminate()
            process.join()


class _Child:
    """One forked child: a task queue to it, a pipe of answers from it (its write end only in the child,
    so that the parent reads end-of-file once the child is gone)."""

    def __init__(self, context, handle: Callable[[Any], Any]) -> None:
        self.tasks = context.Queue()
        self.answers, writer = context.Pipe(duplex=False)
        self.process = context.Process(target=_serve, args=(handle, self.tasks, writer, os.getpid()),
                                       daemon=True, name="tfrecorder-encode")
        self.process.start()  # before any queue's feeder thread starts: no task is put before every fork
        writer.close()
        self.outstanding = 0  # tasks sent whose results were not returned yet
        self._read: collections.deque[bytes] = collections.deque()  # answers read from the pipe, not returned

    @property
    def unread(self) -> int:
        """Tasks sent whose answers are still to come through the pipe."""
        return self.outstanding - len(self._read)

    def read_answer(self) -> None:
        """Read the next answer from the pipe (waiting for it) and keep it for `receive`."""
        try:
            while not self.answers.poll(_POLL_SECONDS):
                if not self.process.is_alive():
                    raise self._failed()
            self._read.append(self.answers.recv_bytes())
        except (EOFError, OSError):  # the pipe closed before (or in the middle of) an answer
            raise self._failed() from None

    def receive(self) -> Any:
        """The oldest outstanding task's result (its exception re-raised)."""
        if not self._read:
            self.read_answer()
        self.outstanding -= 1
        ok, value = pickle.loads(self._read.popleft())
        if not ok:
            raise value
        return value

    def _failed(self) -> ChildFailed:
        self.process.join()
        return ChildFailed(f"an encoding process stopped ({_ending(self.process.exitcode)})")


class ForkPool:
    """`processes` forked children each running `handle(task)`; results come back to the parent.

    Tasks go to the children in turn (`in_turn`: deterministic, for tasks whose output depends on the
    child that runs them), or each to a child with the fewest tasks outstanding once one has room
    (`in_turn=False`, for tasks whose output depends on the task alone: a child that finishes early
    takes the next task instead of idling while another works through its turn's)."""

    def __init__(self, processes: int, handle: Callable[[Any], Any], in_flight: int = 2, in_turn: bool = True) -> None:
        if processes < 1 or in_flight < 1:
            raise ValueError(f"processes and in_flight must be >= 1, got {processes}, {in_flight}")
        context = multiprocessing.get_context("fork")
        self._children = [_Child(context, handle) for _ in range(processes)]
        # A pool dropped without close() (a runner abandoning a failed pipeline) still stops its children.
        self._finalizer = weakref.finalize(self, _terminate, [child.process for child in self._children])
        self.in_flight = in_flight
        self._in_turn = in_turn
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
        """Queue `task` on the next child in turn (or the first with room); returns the results that had
        to be collected first."""
        collected = []
        with self._closing_on_error():
            if self._in_turn:
                child = self._children[self._next]
                self._next = (self._next + 1) % len(self._children)
                while child.outstanding >= self.in_flight:
                    collected.append(self._receive(child))
            else:
                child = min(self._children, key=lambda other: other.outstanding)
                while child.outstanding >= self.in_flight:
                    child = self._receive_any(collected)
            child.tasks.put(task)
            child.outstanding += 1
        return collected

    def drain(self) -> list:
        """Every outstanding result, child by child, in the order each child handled its tasks."""
        with self._closing_on_error():
            return [self._receive(child) for child in self._children for _ in range(child.outstanding)]

    def broadcast(self, task: Any) -> tuple[list, list]:
        """Collect every outstanding result, then run `task` on every child: (those results, one answer
        per child). Starts a new round: the next task goes to the first child again."""
        drained = self.drain()
        with self._closing_on_error():
            for child in self._children:
                child.tasks.put(task)
                child.outstanding += 1
            answers = [self._receive(child) for child in self._children]
        self._next = 0
        return drained, answers

    def _receive(self, child: _Child) -> Any:
        """`child`'s oldest outstanding result. Until its answer arrives, the answers every child sends
        are read as they come (and kept for their turn): a child blocked writing an answer to a full
        pipe would otherwise idle until the parent asked for it."""
        while child.unread == child.outstanding:  # none of its answers read yet
            self._read_arrived([child])
        return child.receive()

    def _receive_any(self, collected: list) -> _Child:
        """Add the oldest result of whichever child answers first to `collected`; returns that child."""
        while True:
            answered = next((child for child in self._children if child.outstanding > child.unread), None)
            if answered is not None:  # an answer read already
                collected.append(answered.receive())
                return answered
            self._read_arrived([child for child in self._children if child.unread])

    def _read_arrived(self, awaited: list[_Child]) -> None:
        """Read every answer that arrives within _POLL_SECONDS (or the end of the pipe of a child that
        died); when none does, a child of `awaited` that is gone raises ChildFailed."""
        sending = [child for child in self._children if child.unread]
        ready = multiprocessing.connection.wait([child.answers for child in sending], _POLL_SECONDS)
        for child in sending:
            if child.answers in ready:
                child.read_answer()
        if not ready:
            for child in awaited:
                if not child.process.is_alive():
                    raise child._failed()

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
            child.tasks.close()
            child.tasks.cancel_join_thread()
            child.answers.close()

    @contextlib.contextmanager
    def _closing_on_error(self) -> Iterator[None]:
        try:
            yield
        except BaseException:
            self.close(wait=False)
            raise


class BundleTasks:
    """A DoFn's whole-element tasks (source parts) on `processes` forked children, bundle by bundle.

    The pool is forked at the bundle's first task, so the children inherit what the DoFn built before
    it. Each task goes to the first child free (a part's output depends on the part alone: with the
    parts dealt in turn, a child dealt the larger ones worked on while the other idled). `submit(task)`
    returns the results already due; `finish()` the others (each child's in its order, not one order
    across children: a PCollection has none) at the bundle's end, and stops the children (a runner
    need not call a DoFn's teardown). A bundle that failed leaves its pool behind: `start_bundle` stops
    it, and the next task forks afresh, so a retry never receives a failed attempt's results (work those
    tasks committed is the retry's to reuse).
    """

    def __init__(self, processes: int, handle: Callable[[Any], Any]) -> None:
        self._processes, self._handle = processes, handle
        self._pool: Optional[ForkPool] = None

    def start_bundle(self) -> None:
        self.close(wait=False)  # a failed bundle's

    def submit(self, task: Any) -> list:
        if self._pool is None:
            self._pool = ForkPool(self._processes, self._handle, in_flight=1, in_turn=False)
        return self._pool.submit(task)

    def finish(self) -> list:
        try:
            return self._pool.drain() if self._pool is not None else []
        finally:
            self.close()

    def close(self, wait: bool = True) -> None:
        if self._pool is not None:
            self._pool.close(wait)
            self._pool = None
