"""TFRecorder 2.0 on Dataflow, offline: its `to_tfr(runner='DataflowRunner', …, tfrecorder_wheel=…)` call,
and `upgrade()` of a gs:// legacy directory, run by Beam's DataflowRunner against the GCS emulator and
the local Dataflow service (tests/support/dataflow_stub.py)."""
from __future__ import annotations

import pandas as pd
import pytest

import tfrecorder
from support.dataflow_stub import DataflowStub
from beam_pipelines.launches import dataflow_job
from support.tfrecorder2_writer import sample_image_table, write_tfrecorder2_dir

PROJECT, REGION, BUCKET = "tfrecorder-test", "europe-west4", "tfrecorder-legacy-test"


@pytest.fixture(scope="module")
def emulator(gcs):
    gcs.bucket(BUCKET)
    return gcs


@pytest.fixture(scope="module")
def service():
    stub = DataflowStub()
    yield stub
    stub.stop()


def test_to_tfr_on_dataflow_as_tfrecorder2_wrote_it(emulator, service, tmp_path):
    table = sample_image_table(tmp_path / "images")
    table = table[table.split.isin(["TRAIN", "VALIDATION", "TEST"]) & ~table.image_uri.str.contains("missing")]
    rows = []
    for row in table.itertuples():
        uri = f"gs://{BUCKET}/images/{row.image_uri.rsplit('/', 1)[-1]}"
        emulator.upload(uri, open(row.image_uri, "rb").read())
        rows.append({"split": row.split, "image_uri": uri, "label": row.label})
    df = pd.DataFrame(rows)
    wheel = dataflow_job.build_worker_wheel(str(tmp_path))
    results = df.tensorflow.to_tfr(output_dir=f"gs://{BUCKET}/out",
                                   runner="DataflowRunner",
                                   project=PROJECT,
                                   region=REGION,
                                   tfrecorder_wheel=wheel,
                                   dataflow_options={"no_auth": True, "dataflow_endpoint": service.endpoint})
    assert results["job_id"] in service.jobs
    assert results["dataflow_url"] == results["console_url"] and results["job_id"] in results["dataflow_url"]
    with pytest.raises(KeyError, match="call result.wait"):
        results["metrics"]
    results.wait(poll_seconds=0.2, progress=False)
    assert results["metrics"]["rows"] == len(df) and results["metrics"]["good_images"] == len(df)


def test_upgrade_on_dataflow(emulator, service, tmp_path):
    legacy = write_tfrecorder2_dir(tmp_path / "legacy", sample_image_table(tmp_path / "images"))
    legacy_uri = f"gs://{BUCKET}/legacy/{legacy.name}"
    for path in legacy.rglob("*"):
        if path.is_file():
            emulator.upload(f"{legacy_uri}/{path.relative_to(legacy).as_posix()}", path.read_bytes())
    remote_report, local_report = tfrecorder.verify(legacy_uri), tfrecorder.verify(str(legacy))  # found on gs:// too
    assert [s.records for s in remote_report.shards] == [s.records for s in local_report.shards]
    assert len(remote_report.all_problems) == len(local_report.all_problems) == 1  # the RGBA record
    local = tfrecorder.upgrade(str(legacy), str(tmp_path / "local"))
    result = tfrecorder.upgrade(legacy_uri, f"gs://{BUCKET}/upgraded", runner="DataflowRunner", project=PROJECT,
                                region=REGION, dataflow_options={"no_auth": True, "dataflow_endpoint": service.endpoint})
    assert result["job_id"] in service.jobs and result["input_bytes"] == local["input_bytes"]
    result.wait(poll_seconds=0.2, progress=False)
    assert result["written"] == local["written"] and result["discarded"] == local["discarded"]
    assert result["output_bytes"] == local["output_bytes"]
    assert tfrecorder.verify(result["tfrecord_dir"]).ok
    with pytest.raises(ValueError, match="cannot read the local directory"):
        tfrecorder.upgrade(str(legacy), f"gs://{BUCKET}/upgraded", runner="DataflowRunner", project=PROJECT,
                           region=REGION, dataflow_options={"no_auth": True, "dry_run": True})
