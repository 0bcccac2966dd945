"""Forked encoding processes: the pool itself, and header-mode conversions that run on it."""
from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import tfrecorder
from beam_pipelines.workers.fork_pool import BundleTasks, ChildFailed, ForkPool
from support.readers import read_job
from support.piece_writers import log_piece_writers, piece_writers
from support.replay import REPLAY, snapshot
from beam_pipelines.launches import runners
from tfrecorder.io.storage import NotRegularFile
from tfrecorder.options import piece_units

pytestmark = pytest.mark.skipif(not runners.can_fork(), reason="forked encoding processes are Linux-only")


def _pid_and(task):
    if task == "fail":
        raise FileNotFoundError(2, "no such file", "/x")
    if task == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    return os.getpid(), task


def _frozen_objects(_task):
    import gc

    return gc.get_freeze_count()


def test_children_never_collect_the_objects_they_inherit_and_the_parent_is_left_alone():
    import gc

    frozen_here = gc.get_freeze_count()
    pool = ForkPool(1, _frozen_objects)
    try:
        (frozen_in_child,) = [r for r in pool.submit("count")] + pool.drain()
    finally:
        pool.close()
    assert frozen_in_child > 100_000  # this pytest process holds TensorFlow's and Beam's objects
    assert gc.get_freeze_count() == frozen_here


def test_tasks_go_round_robin_and_each_child_keeps_its_order():
    pool = ForkPool(2, _pid_and, in_flight=2)
    try:
        results = [r for task in range(10) for r in pool.submit(task)] + pool.drain()
        by_child: dict[int, list[int]] = {}
        for pid, task in results:
            by_child.setdefault(pid, []).append(task)
        assert sorted(by_child.values()) == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]
        assert os.getpid() not in by_child
        drained, answers = pool.broadcast("all")
        assert drained == [] and sorted(pid for pid, _ in answers) == sorted(by_child)
        assert [task for _, task in pool.submit(0) + pool.drain()] == [0]  # a new round starts at child 0
    finally:
        pool.close()
    assert multiprocessing.active_children() == []


def _timed(task):
    """("wait", path): block until `path` exists; ("big", _): a 1 MB answer, larger than a pipe's
    buffer; ("started", path): whether `path` existed when the task started."""
    kind, path = task
    if kind == "wait":
        while not os.path.exists(path):
            time.sleep(0.01)
        return kind
    if kind == "big":
        return b"x" * (1 << 20)
    return os.path.exists(path)


def test_a_child_with_a_large_answer_goes_on_while_the_parent_waits_for_another(tmp_path):
    """Child 1's first answer fills its pipe; the parent, waiting on child 0 (drain goes child by child),
    reads it meanwhile, so child 1 starts its next task before child 0 ends its first."""
    released = tmp_path / "released"
    pool = ForkPool(2, _timed, in_flight=2)
    try:
        pool.submit(("wait", str(released)))  # child 0: blocks until released
        pool.submit(("big", ""))  # child 1
        pool.submit(("wait", str(released)))  # child 0 again, once released
        pool.submit(("started", str(released)))  # child 1: did it start before child 0 was released?
        releaser = threading.Timer(1.0, released.touch)  # long after child 1 could have started its task
        releaser.start()
        results = pool.drain()
        releaser.join()
    finally:
        pool.close()
    assert results[:2] == ["wait", "wait"] and len(results[2]) == 1 << 20
    assert results[3] is False  # child 1 ran its second task while child 0 was still blocked


def test_at_most_in_flight_tasks_wait_per_child():
    pool = ForkPool(1, _pid_and, in_flight=2)
    try:
        assert pool.submit(1) == [] and pool.submit(2) == []
        assert [task for _, task in pool.submit(3)] == [1]  # the third task waits for the first result
    finally:
        pool.close()


def test_a_failing_task_raises_its_exception_in_the_parent_and_closes_the_pool():
    pool = ForkPool(2, _pid_and)
    pool.submit("fail")
    with pytest.raises(FileNotFoundError, match="no such file"):
        pool.drain()
    assert multiprocessing.active_children() == []


def test_a_child_that_dies_is_reported():
    pool = ForkPool(1, _pid_and)
    pool.submit("die")
    with pytest.raises(ChildFailed, match="exit code -9, SIGKILL"):
        pool.drain()
    assert multiprocessing.active_children() == []


def _source_kind(path):
    from tfrecorder.io import storage

    with storage.open_source(path) as source:
        mapped = os.path.realpath(path) in Path("/proc/self/maps").read_text()
        return type(source).__name__, mapped, bytes(source.read(5))


def test_sources_are_mapped_only_in_tfrecorders_own_workers(tmp_path):
    path = tmp_path / "table.parquet"
    path.write_bytes(b"PAR1" + os.urandom(10_000))
    assert _source_kind(str(path)) == ("BufferedReader", False, path.read_bytes()[:5])
    pool = ForkPool(1, _source_kind)
    try:
        (in_worker,) = pool.submit(str(path)) + pool.drain()
        fifo = tmp_path / "fifo"
        os.mkfifo(fifo)  # opened, it would block the worker until a writer came
        pool.submit(str(fifo))
        with pytest.raises(NotRegularFile, match="a FIFO"):
            pool.drain()
    finally:
        pool.close()
    assert in_worker == ("mmap", True, path.read_bytes()[:5])
    assert _source_kind(str(path))[:2] == ("BufferedReader", False)  # the caller's process: untouched


def test_a_source_a_worker_cannot_map_is_read_there(tmp_path):
    empty = tmp_path / "empty.parquet"
    empty.write_bytes(b"")  # mmap refuses an empty file: the reader then says what is wrong with it
    pool = ForkPool(1, _source_kind)
    try:
        (in_worker,) = pool.submit(str(empty)) + pool.drain()
    finally:
        pool.close()
    assert in_worker == ("BufferedReader", False, b"")


def _read_past_a_truncation(path):
    import faulthandler

    from tfrecorder.io import storage

    faulthandler.disable()  # this child only: pytest's handler would print its stack to the test log
    with storage.open_source(path) as source:
        os.truncate(path, 0)  # another process rewriting the file in place, as the child reads it
        return source[-1]


def test_a_source_file_truncated_while_a_child_reads_it_ends_only_that_child(tmp_path):
    path = tmp_path / "table.parquet"
    path.write_bytes(os.urandom(64 * 1024))
    pool = ForkPool(1, _read_past_a_truncation)
    pool.submit(str(path))
    with pytest.raises(ChildFailed, match="SIGBUS: a file it had mapped, such as a local Parquet source, shrank"):
        pool.drain()
    assert multiprocessing.active_children() == []


def test_bundle_tasks_return_every_result_and_stop_their_children_at_the_bundle_end():
    tasks = BundleTasks(2, _pid_and)
    tasks.start_bundle()
    returned = [result for task in range(7) for result in tasks.submit(task)]
    returned += tasks.finish()
    assert sorted(task for _, task in returned) == list(range(7)) and len({pid for pid, _ in returned}) == 2
    assert multiprocessing.active_children() == []  # finish stopped them: no teardown needed
    assert tasks.finish() == []


def test_bundle_tasks_go_to_the_child_that_is_free(tmp_path):
    """A part's output depends on the part alone, so a child that finishes early takes the next part: here
    the first task holds its child until the last one has run, which only the other child can do (dealt
    in turn, the last task would wait behind the first, which waits for it: the pool would hang)."""
    released = tmp_path / "released"

    def run(task):
        if task == "first":
            deadline = time.monotonic() + 60
            while not released.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        elif task == "last":
            released.touch()
        return os.getpid(), task

    tasks = BundleTasks(2, run)
    tasks.start_bundle()
    returned = [result for task in ("first", "a", "b", "c", "last") for result in tasks.submit(task)]
    returned += tasks.finish()
    by_child: dict[int, list[str]] = {}
    for pid, task in returned:
        by_child.setdefault(pid, []).append(task)
    assert sorted(by_child.values()) == [["a", "b", "c", "last"], ["first"]]


def test_a_bundle_after_a_failed_one_never_sees_the_failed_attempts_results():
    tasks = BundleTasks(2, _pid_and)
    tasks.start_bundle()
    tasks.submit("first attempt")  # the bundle fails before finish: its task stays outstanding
    tasks.start_bundle()  # the retry
    assert multiprocessing.active_children() == []
    assert [task for _, task in tasks.submit("retry") + tasks.finish()] == ["retry"]
    tasks.start_bundle()
    with pytest.raises(FileNotFoundError):
        tasks.submit("fail")
        tasks.finish()
    assert multiprocessing.active_children() == []


def test_large_local_header_jobs_get_a_process_per_core():
    rows = 100_000
    assert runners.encode_processes(rows, None, cores=2) == 2
    assert runners.encode_processes(rows, None, cores=1) == 1
    assert runners.encode_processes(200, None, cores=2) == 1  # forking costs more than it saves
    assert runners.encode_processes(rows, None, cores=2, threads_use_every_core=True) == 1
    assert runners.encode_processes(rows, None, cores=2, local_files=False) == 1  # no shared network clients
    assert runners.encode_processes(rows, {"direct_num_workers": 1}, cores=2) == 1  # the caller decides
    assert runners.local_options(10 ** 7, None, cores=2, encode_processes=2) == {}  # no Beam workers on top


@pytest.fixture
def pooled(monkeypatch, tmp_path) -> Path:
    """Every local header-mode job on two forked encoding processes; returns the log of piece writers:
    one "pid path" line per piece file opened (a file, so that the children's writes show)."""
    monkeypatch.setattr(runners, "POOL_START_SECONDS", 0.0)
    monkeypatch.setattr(runners, "usable_cores", lambda: 2)
    monkeypatch.setattr(piece_units, "MIN_UNIT_BATCHES", 1)  # 200 rows: units of 64 rows reach both children
    return log_piece_writers(monkeypatch, tmp_path / "piece-writers.log")


@pytest.fixture
def mixed_table(image_files) -> pd.DataFrame:
    names = ["rgb.jpg", "gray.png", "anim.gif", "truncated.jpg", "text.jpg"] * 40
    return pd.DataFrame({"split": ["TRAIN", "VALIDATION", "TEST", "TRAIN"] * 50,
                         "image_uri": [str(image_files[n]) for n in names],
                         "label": [n.split(".")[0] for n in names]})


def _records(result) -> dict:
    return {split: sorted((e["image_uri"], e["label"], e["image_height"]) for e in examples)
            for split, examples in read_job(result["tfrecord_dir"]).items()}


def test_pooled_conversion_writes_what_the_in_process_one_writes(mixed_table, tmp_path, pooled):
    single = tfrecorder.convert(mixed_table, tmp_path / "single", validate="header", progress=False,
                                dataflow_options={"direct_num_workers": 1})
    assert piece_writers(pooled) == {os.getpid()}  # direct_num_workers=1 keeps the job in this process
    pooled.unlink()
    multi = tfrecorder.convert(mixed_table, tmp_path / "multi", validate="header", progress=False)
    writers = piece_writers(pooled)
    assert len(writers) == 2 and os.getpid() not in writers  # two forked children wrote every piece
    for key in ("rows_in", "written", "discarded", "discard_reasons"):
        assert single[key] == multi[key], key
    assert multi["discarded"] == 80
    assert _records(single) == _records(multi)
    assert multi.metadata["images"] == single.metadata["images"]
    assert multiprocessing.active_children() == []


def test_replaying_every_bundle_of_a_pooled_job_gives_the_same_job(mixed_table, tmp_path, pooled):
    normal = tfrecorder.convert(mixed_table, tmp_path / "normal", job_label="retry", validate="header",
                                progress=False, num_shards=3)
    pieces = len(pooled.read_text().splitlines())
    replayed = tfrecorder.convert(mixed_table, tmp_path / "replayed", job_label="retry", validate="header",
                                  progress=False, num_shards=3, dataflow_options=REPLAY)
    # the writing bundles ran twice: the second attempt of each part found it committed (issue 27)
    assert len(pooled.read_text().splitlines()) == 2 * pieces > 0
    assert snapshot(replayed["tfrecord_dir"]) == snapshot(normal["tfrecord_dir"])


def test_a_pool_dropped_without_close_stops_its_children():
    pool = ForkPool(2, _pid_and)
    pids = pool.pids
    assert all(Path(f"/proc/{pid}").exists() for pid in pids)
    del pool
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)  # stopped and reaped


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie waits for whoever adopted it to reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_children_of_a_killed_parent_stop(tmp_path):
    """SIGKILL runs no exit handler in the parent, so the idle children notice on their own."""
    parent = subprocess.Popen(
        [sys.executable, "-c", "import time; from beam_pipelines.workers.fork_pool import ForkPool; pool = ForkPool(2, abs); "
                               "print(*pool.pids, flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, text=True)
    children = [int(pid) for pid in parent.stdout.readline().split()]
    assert len(children) == 2 and all(_running(pid) for pid in children)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 15
    while any(_running(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_running(pid) for pid in children)


ORPHANS = """
import os, sys, time
from beam_pipelines.workers.fork_pool import ForkPool

def handle(task):
    if task == "handler":
        with open(sys.argv[2], "a") as marks:  # a file of its own: the parent's stdout carries only the pids
            marks.write("blocking\\n")
        time.sleep(600)
    return b"x" * (8 << 20)  # far larger than a pipe's buffer: the child blocks writing it

pool = ForkPool(2, handle)
pool.submit(sys.argv[1])
pool.submit(sys.argv[1])  # one task per child, whose answers are never read
print(*pool.pids, flush=True)
time.sleep(600)
"""


def _writing_to_a_full_pipe(pid: int) -> bool:
    """Whether a thread of the process is blocked in a pipe write (the kernel's wait channel)."""
    return any((task / "wchan").read_text().endswith("pipe_write") for task in Path(f"/proc/{pid}/task").iterdir())


@pytest.mark.parametrize("blocked_in", ["answer", "handler"])
def test_no_child_outlives_a_killed_parent_whatever_it_is_blocked_on(blocked_in, tmp_path):
    """Children blocked writing an answer larger than the pipe buffer, or inside a handler that does not
    return, stop once their parent is SIGKILLed (no exit handler of the parent runs)."""
    marks = tmp_path / "marks"
    parent = subprocess.Popen([sys.executable, "-c", ORPHANS, blocked_in, str(marks)], stdout=subprocess.PIPE,
                              text=True)
    children: list[int] = []
    try:
        children = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(children) == 2 and all(_running(pid) for pid in children)
        if blocked_in == "handler":  # wait until each child is inside the handler
            deadline = time.monotonic() + 60
            while (not marks.exists() or marks.read_text().count("blocking") < 2) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert marks.read_text().count("blocking") == 2
        if blocked_in == "answer":  # wait until both children are stuck writing their answers
            deadline = time.monotonic() + 60
            while not all(map(_writing_to_a_full_pipe, children)) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert all(map(_writing_to_a_full_pipe, children))
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while any(_running(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_running(pid) for pid in children)
    finally:
        parent.kill()
        for pid in filter(_running, children):  # a failed run leaves none behind
            os.kill(pid, signal.SIGKILL)


def test_a_pool_forked_by_a_thread_that_ended_keeps_working():
    """The kernel's parent-death signal also fires when the forking *thread* exits (Beam may run a
    bundle on a worker thread); children only stop when the parent process is gone."""
    import threading

    made = []
    forker = threading.Thread(target=lambda: made.append(ForkPool(2, _pid_and)))
    forker.start()
    forker.join()
    (pool,) = made
    try:
        assert sorted(task for _, task in pool.submit(1) + pool.submit(2) + pool.drain()) == [1, 2]
    finally:
        pool.close()


def test_a_storage_failure_in_a_child_fails_the_job_as_it_does_in_process(mixed_table, tmp_path, pooled, monkeypatch):
    """An outage while a child reads an image fails the run with the same error, publishes nothing and
    leaves no process behind; the next conversion forks a fresh pool."""
    from beam_pipelines.steps import encode_rows
    from tfrecorder.errors import StorageReadError

    def outage(uri, max_bytes=None):
        raise StorageReadError(5, f"could not read {uri}: outage")

    with monkeypatch.context() as patched:
        patched.setattr(encode_rows, "read_image", outage)
        with pytest.raises(StorageReadError, match="outage; the conversion stopped and nothing was published; "
                                                   "its committed work is kept"):
            tfrecorder.convert(mixed_table, tmp_path / "out", validate="header", progress=False)
    (kept,) = (tmp_path / "out").glob(".incomplete-*")  # issue 27: kept for the same call to continue
    assert multiprocessing.active_children() == []
    result = tfrecorder.convert(mixed_table, tmp_path / "out", validate="header", progress=False)
    assert sum(result["written"].values()) == 120 and result["discarded"] == 80 and result["resumed"] is True
