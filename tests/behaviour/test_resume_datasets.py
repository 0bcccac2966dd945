"""Resuming COCO, Pascal VOC and YOLO dataset jobs (issue 27): each join bucket of images is encoded and
committed as one part, so a killed job continues from its committed buckets and publishes what an
uninterrupted run publishes."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import tfrecorder
from support.datasets import scenes, write_coco, write_voc, write_yolo
from support.resume_runs import convert_code, incomplete, job_contents, manifests, run_killed
from tfrecorder.format import resume_files

ONE_WORKER = {"direct_num_workers": 1}


def _convert(source: Path, output: Path, **beam) -> dict:
    return tfrecorder.convert(str(source), str(output), num_shards=2, progress=False,
                              beam_options={**ONE_WORKER, **beam})


@pytest.fixture(scope="module")
def coco(tmp_path_factory) -> tuple[Path, dict]:
    """A COCO file of 60 scenes and the job an uninterrupted run publishes from it."""
    root = tmp_path_factory.mktemp("coco")
    source = write_coco(root / "data", scenes(60, size=(24, 32)))
    result = _convert(source, root / "reference")
    return source, job_contents(Path(result["tfrecord_dir"]))


def test_a_killed_coco_job_continues_from_its_committed_buckets_and_publishes_the_identical_job(coco, tmp_path):
    source, reference = coco
    output = tmp_path / "out"
    assert run_killed(convert_code(source, output, num_shards=2), lambda: manifests(output) >= 5) is None
    (job,) = incomplete(output)
    done = resume_files.committed_parts(str(job))
    assert 5 <= len(done) < 40  # 60 images spread over the join's 64 buckets
    result = _convert(source, output)
    assert result["resumed"] is True
    assert result["parts_carried_over"] == len(done)
    assert result["rows_carried_over"] == sum(m["rows"] for m in done)
    assert job_contents(Path(result["tfrecord_dir"])) == reference
    assert "resumed" in json.loads((Path(result["tfrecord_dir"]) / "metadata.json").read_text())
    assert incomplete(output) == []


def test_bundle_replay_of_a_resumed_coco_job_gives_the_identical_job(coco, tmp_path):
    source, reference = coco
    output = tmp_path / "out"
    run_killed(convert_code(source, output, num_shards=2), lambda: manifests(output) >= 3)
    result = _convert(source, output, direct_runner_bundle_repeat=1)
    assert result["resumed"] is True
    assert job_contents(Path(result["tfrecord_dir"])) == reference


def test_a_changed_annotation_file_or_split_starts_a_new_coco_job(coco, tmp_path):
    source, _reference = coco
    output = tmp_path / "out"
    run_killed(convert_code(source, output, num_shards=2), lambda: manifests(output) >= 2)
    with pytest.raises(ValueError, match="split"):
        tfrecorder.convert(str(source), str(output), num_shards=2, progress=False, beam_options=ONE_WORKER,
                           split="validation", resume=True)
    stat = os.stat(source)
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    with pytest.raises(ValueError, match="changed"):
        tfrecorder.convert(str(source), str(output), num_shards=2, progress=False, beam_options=ONE_WORKER,
                           resume=True)


@pytest.mark.parametrize("kind", ["voc", "yolo"])
def test_a_killed_voc_or_yolo_job_is_resumed_identically(kind, tmp_path):
    items = scenes(24, size=(24, 32))
    source = (write_voc if kind == "voc" else write_yolo)(tmp_path / kind, items)
    reference = job_contents(Path(_convert(source, tmp_path / "reference")["tfrecord_dir"]))
    output = tmp_path / "out"
    assert run_killed(convert_code(source, output, num_shards=2), lambda: manifests(output) >= 3) is None
    result = _convert(source, output)
    assert result["resumed"] is True
    assert job_contents(Path(result["tfrecord_dir"])) == reference
    # a file added to the folder is another source: not continued
    run_killed(convert_code(source, tmp_path / "again", num_shards=2), lambda: manifests(tmp_path / "again") >= 2)
    (Path(source) / "extra.txt").write_text("x")
    with pytest.raises(ValueError, match="changed"):
        tfrecorder.convert(str(source), str(tmp_path / "again"), num_shards=2, progress=False,
                           beam_options=ONE_WORKER, resume=True)


def test_a_stopped_coco_job_on_dataflow_is_continued_by_the_resubmitted_call(gcs, monkeypatch, tmp_path):
    """Offline (the Dataflow stub, the GCS emulator): a COCO job stopped after 3 committed buckets is
    continued by the resubmitted call, which encodes only the other buckets and publishes the
    uninterrupted job."""
    from support.dataflow_stub import DataflowStub
    from support.gcs_proxy import FaultProxy
    from tfrecorder.errors import DataflowJobError

    bucket = "tfrecorder-resume-coco"
    gcs.bucket(bucket)
    local = write_coco(tmp_path / "coco", scenes(16, size=(24, 32)))
    for path in sorted((tmp_path / "coco").rglob("*")):
        if path.is_file():
            gcs.upload(f"gs://{bucket}/{path.relative_to(tmp_path / 'coco')}", path.read_bytes())
    source = f"gs://{bucket}/{local.relative_to(tmp_path / 'coco')}"
    proxy = FaultProxy(gcs.host, preconditions=True).start()  # manifests created only if absent, as on gs://
    stub = DataflowStub()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
    try:
        def submit(output, **options):
            return tfrecorder.convert(source, output, runner="DataflowRunner", project="tfrecorder-test",
                                      region="europe-west4", job_label="coco", num_shards=2,
                                      beam_options={"no_auth": True, "dataflow_endpoint": stub.endpoint}, **options)

        def contents(job_dir):
            name = job_dir.rstrip("/").rsplit("/", 1)[-1]
            found = {}
            for url in sorted(gcs.list(job_dir.rstrip("/") + "/")):
                data = gcs.download(url)
                if url.endswith("metadata.json"):
                    document = json.loads(data.replace(name.encode(), b"<job>"))
                    for field in ("created_utc", "job_name", "resumed"):
                        document.pop(field, None)
                    data = json.dumps(document, sort_keys=True).encode()
                found[url[len(job_dir.rstrip("/")):].replace(name, "<job>")] = data
            return found

        reference = submit(f"gs://{bucket}/reference").wait(poll_seconds=0.1, progress=False)
        expected = contents(reference["tfrecord_dir"])
        total = stub.jobs[reference["job_id"]].parts_committed
        stub.stop_after_parts = 3
        first = submit(f"gs://{bucket}/out")
        with pytest.raises(DataflowJobError):
            first.wait(poll_seconds=0.1, progress=False)
        [temp_dir] = resume_files.incomplete_dirs(f"gs://{bucket}/out")
        committed = len(resume_files.committed_parts(temp_dir))
        assert 3 <= committed < total
        second = submit(f"gs://{bucket}/out", resume=True).wait(poll_seconds=0.1, progress=False)
        assert second["resumed"] is True
        assert stub.jobs[second["job_id"]].parts_committed == total - committed  # only the other buckets
        assert contents(second["tfrecord_dir"]) == expected
    finally:
        stub.stop()
        proxy.stop()
