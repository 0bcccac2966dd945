"""Beam options of a portable run that needs no cluster and no network: Beam's embedded job service, and an
SDK worker in a process of its own, started with this interpreter (it inherits the test's environment);
and what a job publishes, for comparing a portable run with the in-process one."""
from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import tfrecorder
from beam_pipelines.launches.portable_launch import SUBPROCESS_ENVIRONMENT, subprocess_worker_command
from tfrecorder.format import file_names, tfds_files
from support.replay import snapshot

SUBPROCESS_WORKERS = {"job_endpoint": "embed", "environment_type": SUBPROCESS_ENVIRONMENT,
                      "environment_config": subprocess_worker_command(), "sdk_worker_parallelism": 1}


def published(job: str, runner: str) -> dict:
    """A job's files, records and metadata, without what names the run (its name, time and `runner`), and
    the bytes of every other file it publishes (shard indexes, TFDS files, a detection job's label map;
    dataset_info.json without its name and description, which name the job and its time)."""
    found = snapshot(job)
    assert found["metadata"].pop("runner") == runner
    compared = {shard["file"] for split in found["metadata"]["splits"].values() for shard in split["shards"]}
    compared |= {file_names.METADATA_FILE, file_names.DISCARD_FILE, tfds_files.DATASET_INFO_FILE}
    found["other_files"] = {str(path.relative_to(job)).replace(Path(job).name, "<job>"): path.read_bytes()
                            for path in sorted(Path(job).rglob("*"))
                            if path.is_file() and str(path.relative_to(job)) not in compared}
    statistics = found["other_files"].pop("statistics.json", None)  # issue 29: floats rounded, as below
    found["other_files"].pop("statistics.pb", None)  # the same figures as statistics.json, in protobuf
    if statistics is not None:
        found["statistics"] = _rounded(json.loads(statistics))
    info_file = Path(job, tfds_files.DATASET_INFO_FILE)
    if info_file.exists():  # every job but a detection job's
        info = json.loads(info_file.read_text())
        found["dataset_info"] = {key: value for key, value in info.items() if key not in ("name", "description")}
    return found


def _rounded(value):
    """statistics.json with every float to 9 significant digits: the in-process run merges its sketches
    per part, portable workers per bundle, and a float sum (a mean, a variance) taken in another order
    differs in its last bits."""
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


def free_port() -> int:
    """A loopback port nothing listens on now (the OS's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def wait_listening(port: int, process: subprocess.Popen, seconds: float = 60) -> None:
    """Until something accepts connections on `port` (RuntimeError if `process` exits or `seconds` pass)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode} before listening on {port}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            if probe.connect_ex(("localhost", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {seconds} s")


def stop_group(process: subprocess.Popen) -> None:
    """Kill `process` and every process it started (its own session's group), and reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=30)


@contextlib.contextmanager
def job_service_and_worker_pool(directory: Path, python: str = sys.executable,
                                deadline: float = 120) -> Iterator[dict]:
    """Beam's job service (local_job_service_main) and Beam's worker pool (worker_pool_main), each a
    process of its own run by this interpreter on a free loopback port, with a private TMPDIR under
    `directory`; yields the Beam options of a job submitted to them with EXTERNAL workers. The pool
    starts each worker with a bare `python` from its PATH: a `python` there runs this interpreter, which
    imports the tfrecorder the driver imports (PYTHONPATH). Logs: `directory`/job-service.log and
    worker-pool.log. Both processes and the workers they started are killed on exit, or after `deadline`
    seconds (a job waiting for workers that never come then fails instead of hanging). `python`: what
    the pool's `python` runs."""
    bin_dir, pool_tmp, service_tmp = (directory / name for name in ("bin", "pool-tmp", "service-tmp"))
    for made in (bin_dir, pool_tmp, service_tmp):
        made.mkdir(parents=True)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec {shlex.quote(python)} "$@"\n')
    (bin_dir / "python").chmod(0o755)
    job_port, pool_port = free_port(), free_port()
    commands = {
        "job-service": ([sys.executable, "-m", "apache_beam.runners.portability.local_job_service_main",
                         f"--port={job_port}", f"--staging_dir={directory / 'staging'}"], service_tmp, job_port),
        "worker-pool": ([sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
                         f"--service_port={pool_port}"], pool_tmp, pool_port),
    }
    import_root = str(Path(tfrecorder.__file__).resolve().parent.parent)
    python_path = os.pathsep.join(filter(None, [import_root, os.environ.get("PYTHONPATH")]))
    started: list[subprocess.Popen] = []
    watchdog = threading.Timer(deadline, lambda: [stop_group(process) for process in started])
    watchdog.daemon = True
    watchdog.start()
    try:
        for name, (command, tmp, port) in commands.items():
            environment = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": python_path,
                           "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
            with open(directory / f"{name}.log", "wb") as log:
                started.append(subprocess.Popen(command, env=environment, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, start_new_session=True))
            wait_listening(port, started[-1])
        yield {"job_endpoint": f"localhost:{job_port}", "environment_type": "EXTERNAL",
               "environment_config": f"localhost:{pool_port}", "sdk_worker_parallelism": 1}
    finally:
        watchdog.cancel()
        for process in started:
            stop_group(process)
