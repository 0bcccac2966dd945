"""A Dataflow service on 127.0.0.1 for tests: Beam's DataflowRunner talks REST to it (`dataflow_endpoint`).

It speaks the v1b3 REST API that Beam's client uses (create job, get job, job metrics, job messages).
A created job really runs: the service fetches the pipeline proto that Beam staged in (emulated) Cloud
Storage, swaps the Docker worker environment for an in-process one and executes it with Beam's
FnApiRunner. While it runs the job is RUNNING; afterwards DONE (or FAILED), and the job's metrics
report the pipeline's committed user counters. `fail_jobs=True` makes every job fail instead of running.
`stop_after_parts=N` stops the next job mid-way, like a worker lost for good or a cancelled job: the
job fails right after its N-th source part is committed (the commit itself is kept, as on gs://).
Each job records `parts_committed`: the source parts it encoded and committed itself.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

JOB_PATH = re.compile(r"/v1b3/projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/jobs(/(?P<job>[^/?]+))?(/(?P<sub>[a-zA-Z]+))?")


@dataclasses.dataclass
class StubJob:
    request: dict[str, Any]  # the Job JSON Beam sent
    state: str = "JOB_STATE_QUEUED"
    counters: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    error: Optional[BaseException] = None
    polls: int = 0
    parts_committed: int = 0  # source parts this job encoded and committed (part_commits.commit calls)


class StoppedMidway(RuntimeError):
    """The stub stopping a job after a number of committed parts (stop_after_parts)."""


class DataflowStub:
    def __init__(self, fail_jobs: bool = False, stop_after_parts: Optional[int] = None) -> None:
        from beam_pipelines.launches.runners import connect_anonymously

        connect_anonymously()  # the simulated workers read and write the emulator anonymously
        self.fail_jobs = fail_jobs
        self.stop_after_parts = stop_after_parts  # the next job only
        self.jobs: dict[str, StubJob] = {}
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def _reply(self, body: dict[str, Any], status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                match = JOB_PATH.match(self.path)
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if not match or match["job"]:
                    return self._reply({"error": {"code": 404, "message": self.path}}, 404)
                self._reply(stub.create(match["project"], match["region"], request))

            def do_GET(self) -> None:
                match = JOB_PATH.match(self.path)
                job = stub.jobs.get(match["job"]) if match else None
                if job is None:
                    return self._reply({"error": {"code": 404, "message": self.path}}, 404)
                if match["sub"] == "metrics":
                    return self._reply({"metrics": job.counters})
                if match["sub"] == "messages":
                    return self._reply({"jobMessages": []})
                job.polls += 1
                self._reply({"id": match["job"], "projectId": match["project"], "location": match["region"],
                             "name": job.request["name"], "currentState": job.state})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://localhost:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def create(self, project: str, region: str, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            job_id = f"2026-11-21_12_00_{len(self.jobs):02d}-{abs(hash(request['name'])) % 10**12}"
            job = self.jobs[job_id] = StubJob(request)
        threading.Thread(target=self._execute, args=(job,), daemon=True).start()
        return {"id": job_id, "projectId": project, "location": region, "name": request["name"],
                "clientRequestId": request.get("clientRequestId", ""), "currentState": job.state}

    def _execute(self, job: StubJob) -> None:
        job.state = "JOB_STATE_RUNNING"
        if self.fail_jobs:
            job.state = "JOB_STATE_FAILED"
            return
        stop_after, self.stop_after_parts = self.stop_after_parts, None
        try:
            with _counting_commits(job, stop_after):
                result = run_staged_pipeline(job.request)
            job.counters = [
                {"name": {"origin": "user", "name": c.key.metric.name,
                          "context": {"namespace": c.key.metric.namespace, "step": c.key.step}},
                 "scalar": c.committed, "kind": "Sum"}
                for c in result.metrics().query()["counters"]
            ]
            self._until_seen_running(job)
            job.state = "JOB_STATE_DONE"
        except BaseException as exc:  # the job failed: report it like Dataflow does
            job.error = exc
            job.state = "JOB_STATE_FAILED"

    @staticmethod
    def _until_seen_running(job: StubJob, timeout: float = 30.0) -> None:
        """Like a real job, stay RUNNING long enough for a client to observe it at least once."""
        seen = job.polls
        deadline = time.monotonic() + timeout
        while job.polls == seen and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def _counting_commits(job: StubJob, stop_after: Optional[int]):
    """Count the parts the job commits (its simulated workers run in this process), and stop the job
    once `stop_after` are committed."""
    from beam_pipelines.steps import part_commits

    commit = part_commits.commit

    def counted(*args, **kwargs):
        manifest = commit(*args, **kwargs)
        job.parts_committed += 1
        if stop_after is not None and job.parts_committed >= stop_after:
            raise StoppedMidway(f"the job was stopped after {job.parts_committed} committed part(s)")
        return manifest

    part_commits.commit = counted
    try:
        yield
    finally:
        part_commits.commit = commit


def run_staged_pipeline(request: dict[str, Any]):
    """Run the pipeline proto a job request points at, in process (Dataflow's workers, simulated)."""
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.portability import python_urns
    from apache_beam.portability.api import beam_runner_api_pb2
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    url = request["environment"]["sdkPipelineOptions"]["options"]["pipelineUrl"]
    with FileSystems.open(url) as stream:
        proto = beam_runner_api_pb2.Pipeline.FromString(stream.read())
    for environment in proto.components.environments.values():
        environment.urn = python_urns.EMBEDDED_PYTHON
        environment.payload = b""
        del environment.dependencies[:]
    return FnApiRunner().run_via_runner_api(proto, PipelineOptions([]))
