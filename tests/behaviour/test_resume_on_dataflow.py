"""Issue 27 on Dataflow, offline (Beam's DataflowRunner, the Dataflow stub, the GCS emulator): a job
stopped mid-way is continued by the same call resubmitted, which encodes only the parts the stopped
job did not commit and publishes exactly what an uninterrupted job publishes. The job's lock belongs
to the Dataflow job: a resubmit waits for no process, it asks Dataflow whether that job ended."""
from __future__ import annotations

import hashlib
import io
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from support.dataflow_stub import DataflowStub
from support.resume_runs import NAMED_FIELDS, TIMING_FIELDS

import tfrecorder
from tfrecorder.errors import DataflowJobError, JobBusyError
from tfrecorder.format import resume_files
from tfrecorder.io import storage

PROJECT, REGION, BUCKET = "tfrecorder-test", "europe-west4", "tfrecorder-resume-dataflow"
ROWS, ROW_GROUP = 120, 15  # 8 source parts (Parquet row groups)


@pytest.fixture(scope="module")
def source(gcs):
    gcs.bucket(BUCKET)
    rng = np.random.default_rng(27)
    for i in range(12):
        data = io.BytesIO()
        Image.fromarray(rng.integers(0, 255, (8 + i % 5, 9, 3), dtype=np.uint8)).save(data, format="PNG")
        gcs.upload(f"gs://{BUCKET}/images/img{i}.png", data.getvalue())
    frame = pd.DataFrame({
        "split": [("TRAIN", "TRAIN", "VALIDATION", "TEST")[i % 4] for i in range(ROWS)],
        "image_uri": [f"gs://{BUCKET}/images/img{i % 12}.png" if i % 37 else f"gs://{BUCKET}/images/missing.png"
                      for i in range(ROWS)],
        "label": [("cat", "dog", "owl")[i % 3] for i in range(ROWS)],
    })
    data = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), data, row_group_size=ROW_GROUP)
    url = f"gs://{BUCKET}/table/images.parquet"
    gcs.upload(url, data.getvalue())
    return url


@pytest.fixture
def preconditions(gcs, monkeypatch):
    """Cloud Storage's generation preconditions (the emulator ignores them): part manifests and the
    lock are created only if absent, as on gs://."""
    from support.gcs_proxy import FaultProxy

    proxy = FaultProxy(gcs.host, preconditions=True).start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
    yield proxy
    proxy.stop()


def submit(source, output, endpoint, **options):
    return tfrecorder.convert(source, output, runner="DataflowRunner", project=PROJECT, region=REGION,
                              job_label="pets", num_shards=3,
                              beam_options={"no_auth": True, "dataflow_endpoint": endpoint}, **options)


def contents(gcs, job_dir: str) -> dict[str, str]:
    """Every file of a published job on gs:// by digest; metadata.json without its timing fields, the job's
    own name (in its keys sidecars' names) replaced."""
    found = {}
    job_name = job_dir.rstrip("/").rsplit("/", 1)[-1]
    for url in sorted(gcs.list(job_dir.rstrip("/") + "/")):
        data = gcs.download(url)
        name = url[len(job_dir.rstrip("/")) + 1:].replace(job_name, "<job>")
        if name.rsplit("/", 1)[-1] in ("metadata.json", "dataset_info.json"):
            document = json.loads(data.replace(job_name.encode(), b"<job>"))
            for field in TIMING_FIELDS if name.endswith("metadata.json") else NAMED_FIELDS:
                document.pop(field, None)
            data = json.dumps(document, sort_keys=True).encode()
        found[name] = hashlib.sha256(data).hexdigest()
    return found


def incomplete(output: str) -> list[str]:
    return resume_files.incomplete_dirs(output)


def test_a_stopped_dataflow_job_is_continued_by_the_resubmitted_call(gcs, source, preconditions):
    stub = DataflowStub()
    try:
        reference = submit(source, f"gs://{BUCKET}/reference", stub.endpoint).wait(poll_seconds=0.1, progress=False)
        expected = contents(gcs, reference["tfrecord_dir"])
        total_parts = stub.jobs[reference["job_id"]].parts_committed
        assert total_parts == ROWS // ROW_GROUP

        output = f"gs://{BUCKET}/out"
        stub.stop_after_parts = 3
        first = submit(source, output, stub.endpoint)
        with pytest.raises(DataflowJobError, match="ended FAILED"):
            first.wait(poll_seconds=0.1, progress=False)
        [temp_dir] = incomplete(output)
        holder = json.loads(storage.read_bytes(storage.join(resume_files.resume_dir(temp_dir), "lock")))
        assert holder["dataflow_job"] == first["job_id"]  # the lock is the Dataflow job's, not the submitter's
        committed = len(resume_files.committed_parts(temp_dir))
        assert 3 <= committed < total_parts

        second = submit(source, output, stub.endpoint, resume=True).wait(poll_seconds=0.1, progress=False)
        assert second["tfrecord_dir"] == first["tfrecord_dir"]
        assert stub.jobs[second["job_id"]].parts_committed == total_parts - committed  # only the remaining parts
        assert second["resumed"] is True
        metadata = json.loads(gcs.download(f"{second['tfrecord_dir']}/metadata.json"))
        assert metadata["resumed"]["parts_carried_over"] == committed
        assert contents(gcs, second["tfrecord_dir"]) == expected
        assert incomplete(output) == []
    finally:
        stub.stop()


def test_a_running_dataflow_job_keeps_its_job_from_a_resubmit(gcs, source, preconditions):
    """Until Dataflow reports the job holding the lock ended, a resubmit cannot take its job."""
    stub = DataflowStub(fail_jobs=True)
    try:
        output = f"gs://{BUCKET}/busy"
        first = submit(source, output, stub.endpoint)
        with pytest.raises(DataflowJobError):
            first.wait(poll_seconds=0.1, progress=False)
        [temp_dir] = incomplete(output)
        stub.jobs[first["job_id"]].state = "JOB_STATE_RUNNING"  # as if the job still ran
        with pytest.raises(JobBusyError, match=f"Dataflow job {first['job_id']}"):
            submit(source, output, stub.endpoint, resume=True)
        stub.jobs[first["job_id"]].state = "JOB_STATE_CANCELLED"
        stub.fail_jobs = False
        second = submit(source, output, stub.endpoint, resume=True).wait(poll_seconds=0.1, progress=False)
        assert second["tfrecord_dir"] == first["tfrecord_dir"] and incomplete(output) == []
        assert temp_dir not in incomplete(output)
    finally:
        stub.stop()
