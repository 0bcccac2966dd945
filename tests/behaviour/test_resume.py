"""Issue 27: a conversion killed at any moment is continued by the next run with the same source and
options, which publishes exactly what an uninterrupted run publishes (apart from timing fields)."""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

import tfrecorder
from beam_pipelines.steps.collect_statistics import NEAR_OFFSET
from beam_pipelines.steps.part_commits import committed_quality
from tfrecorder.errors import JobBusyError
from tfrecorder.format import resume_files
from support.resume_runs import (convert_code, detection_csv, fingerprint_file, image_parquet, incomplete, job_contents, manifests,
                                 published, run_killed, small_parts, tabular_csv)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    folder = tmp_path_factory.mktemp("resume")
    return {"image": image_parquet(folder / "images"), "tabular": tabular_csv(folder / "table"),
            "detection": detection_csv(folder / "boxes")}


@pytest.fixture(scope="module", autouse=True)
def several_parts():
    """Small CSV ranges and detection buckets in this process too (as in every run's: PARTS_PATCH)."""
    import sys

    import tfrecorder.sources.csv_slicing as slicing

    converting = sys.modules["tfrecorder.convert"]
    saved = slicing.RANGE_BYTES, converting.DETECTION_BUCKET_ROWS
    small_parts()
    yield
    slicing.RANGE_BYTES, converting.DETECTION_BUCKET_ROWS = saved


@pytest.fixture(scope="module")
def references(sources, tmp_path_factory):
    """Each kind's uninterrupted job, converted in this process."""
    found = {}
    for kind, source in sources.items():
        output = tmp_path_factory.mktemp(f"reference-{kind}")
        result = tfrecorder.convert(str(source), str(output), num_shards=3, progress=False,
                                    beam_options={"direct_num_workers": 1})
        assert result["resumed"] is False
        found[kind] = job_contents(Path(result["tfrecord_dir"]))
    return found


def _moments(output: Path):
    """Moments to kill a run at: after some parts are committed, while shards are assembled, once
    discarded.csv or metadata.json is in the temporary directory, while scratch files are removed."""
    def parts(count):
        return lambda: manifests(output) >= count

    def in_temp(pattern):
        return lambda: any(any(job.glob(pattern)) for job in incomplete(output))

    def scratch_going():  # finalizing: discarded.csv written, _parts/ removed, the fingerprint not yet (not a job starting)
        return any((job / "discarded.csv").exists() and not (job / "_parts").exists()
                   and fingerprint_file(job).exists() for job in incomplete(output))

    return [parts(1), parts(3), parts(6), in_temp("*.tfrecord"), in_temp("discarded.csv"), scratch_going,
            in_temp("metadata.json"), parts(2)]


@pytest.mark.parametrize("kind", ["image", "tabular", "detection"])
def test_killed_at_random_moments_then_resumed_publishes_the_identical_job(kind, sources, references, tmp_path):
    """Runs one after another, each killed at a moment drawn (seeded) from _moments, each continuing
    what the killed one left; then one run to the end. Every published job is the reference job."""
    source = sources[kind]
    output = tmp_path / "out"
    code = convert_code(source, output, num_shards=3)
    moments = _moments(output)
    random.Random(sorted(sources).index(kind) + 27).shuffle(moments)
    kills, resumed = 0, 0
    for moment in moments[:7] + [lambda: False]:
        if run_killed(code, moment) is None:
            kills += 1
        for job in published(output):  # a published job is whole and identical; it is not continued
            assert job_contents(job) == references[kind]
            resumed += "resumed" in json.loads((job / "metadata.json").read_text())
            shutil.rmtree(job)
        assert len(incomplete(output)) <= 1  # a killed job is continued, never started again beside it
    assert kills >= 3 and resumed >= 1
    assert incomplete(output) == [] and list(output.glob(".resume-*")) == []


def test_a_resumed_job_reads_only_the_parts_not_committed(sources, references, tmp_path):
    source = sources["image"]
    output = tmp_path / "out"
    run_killed(convert_code(source, output, num_shards=3), lambda: manifests(output) >= 4)
    (job,) = incomplete(output)
    done = resume_files.committed_parts(str(job))
    assert 4 <= len(done) < 12
    result = tfrecorder.convert(str(source), str(output), num_shards=3, progress=False,
                                beam_options={"direct_num_workers": 1})
    assert result["resumed"] is True
    assert result["parts_carried_over"] == len(done)
    assert result["rows_carried_over"] == sum(m["rows"] for m in done)
    assert Path(result["tfrecord_dir"]).name == job.name[len(".incomplete-"):]
    assert job_contents(Path(result["tfrecord_dir"])) == references["image"]
    assert incomplete(output) == []


def test_bundle_replay_of_a_resumed_job_gives_the_identical_job(sources, references, tmp_path):
    source = sources["image"]
    output = tmp_path / "out"
    run_killed(convert_code(source, output, num_shards=3), lambda: manifests(output) >= 3)
    result = tfrecorder.convert(str(source), str(output), num_shards=3, progress=False,
                                beam_options={"direct_num_workers": 1, "direct_runner_bundle_repeat": 1})
    assert result["resumed"] is True
    assert job_contents(Path(result["tfrecord_dir"])) == references["image"]


def test_changed_options_or_source_start_a_new_job_and_say_why(sources, tmp_path, caplog):
    source = sources["image"]
    output = tmp_path / "out"
    run_killed(convert_code(source, output, num_shards=3), lambda: manifests(output) >= 2)
    (old,) = incomplete(output)
    with caplog.at_level("WARNING", logger="tfrecorder"):
        result = tfrecorder.convert(str(source), str(output), num_shards=2, progress=False,
                                    beam_options={"direct_num_workers": 1})
    assert result["resumed"] is False
    assert any("option num_shards differs (3 then, 2 now)" in r.getMessage() for r in caplog.records)
    assert incomplete(output) == [old]  # left alone
    with pytest.raises(ValueError, match="resume=True: no incomplete job .* matches"):
        tfrecorder.convert(str(source), str(output), num_shards=4, resume=True, progress=False)


def test_resume_false_starts_a_new_job_and_a_held_lock_stops_a_second_run(sources, tmp_path):
    source = sources["image"]
    output = tmp_path / "out"
    run_killed(convert_code(source, output, num_shards=3), lambda: manifests(output) >= 2)
    (old,) = incomplete(output)
    result = tfrecorder.convert(str(source), str(output), num_shards=3, resume=False, progress=False,
                                beam_options={"direct_num_workers": 1})
    assert result["resumed"] is False and incomplete(output) == [old]
    lock = resume_files.JobLock(str(old)).acquire()  # another run is continuing it
    try:
        with pytest.raises(JobBusyError, match="another run .* is continuing the incomplete job"):
            tfrecorder.convert(str(source), str(output), num_shards=3, resume=True, progress=False)
    finally:
        lock.release()
    assert incomplete(output) == [old] and len(resume_files.committed_parts(str(old))) >= 2


def test_a_killed_job_writing_to_gcs_is_continued_there(sources, references, gcs, monkeypatch, tmp_path):
    """gs:// output (the emulator, behind a proxy that honours ifGenerationMatch=0 as Cloud Storage
    does): part manifests and the lock are objects created with a generation precondition."""
    from support.gcs_proxy import FaultProxy

    gcs.bucket("tfr-resume")
    proxy = FaultProxy(gcs.host, preconditions=True).start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
    output = "gs://tfr-resume/out"
    source = sources["image"]

    def parts_on_gcs(count):
        return lambda: sum(1 for url in gcs.list(output + "/") if "/_parts/" in url and url.endswith(".json")
                           and not url.endswith(".stats.json")) >= count  # manifests, not quality files

    try:
        run_killed(convert_code(source, output, num_shards=3), parts_on_gcs(3))
        (job,) = [job for job in resume_files.incomplete_jobs(output)]
        assert job.resumable and job.parts_done >= 3
        result = tfrecorder.convert(str(source), output, num_shards=3, progress=False,
                                    beam_options={"direct_num_workers": 1})
        assert result["resumed"] is True and result["parts_carried_over"] >= 3
        local = tmp_path / result["tfrecord_dir"].rstrip("/").rsplit("/", 1)[1]  # the job's own name
        for url in gcs.list(result["tfrecord_dir"] + "/"):
            path = local / url[len(result["tfrecord_dir"]) + 1:]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(gcs.download(url))
        assert job_contents(local) == references["image"]
        assert resume_files.incomplete_jobs(output) == []
    finally:
        proxy.stop()


def test_a_resumed_job_publishes_the_statistics_and_duplicates_of_an_uninterrupted_one(sources, tmp_path):
    """Issue 29 on the resumable path: a committed part's statistics, digests and band keys are committed
    with it (its manifest's quality file) and emitted from there when the job is continued, merged in
    part order: statistics.json/.pb, duplicates.csv and the duplicate counts equal an uninterrupted run's."""
    source = image_parquet(tmp_path / "images", images=39)  # an image's rows span splits: 39 leaking groups
    options = {"num_shards": 3, "near_duplicate_distance": 7}
    reference = tfrecorder.convert(str(source), str(tmp_path / "reference"), progress=False,
                                   beam_options={"direct_num_workers": 1}, **options)
    output = tmp_path / "out"
    run_killed(convert_code(source, output, **options), lambda: manifests(output) >= 3)
    (job,) = incomplete(output)
    done = resume_files.committed_parts(str(job))
    assert 3 <= len(done) < 12 and all((job / manifest["quality"]).is_file() for manifest in done)
    # a small job's band keys go to 16 LSH buckets (near_duplicates.bucket_shift), committed so and fingerprinted
    assert json.loads(fingerprint_file(job).read_text())["options"]["near_bucket_shift"] == 14
    near_keys = {key for manifest in done for key, _value in committed_quality(str(job / manifest["quality"]))
                 if key >= NEAR_OFFSET}
    assert near_keys and max(near_keys) < NEAR_OFFSET + 16
    result = tfrecorder.convert(str(source), str(output), progress=False, beam_options={"direct_num_workers": 1},
                                **options)
    assert result["resumed"] is True and result["parts_carried_over"] == len(done)
    expected, found = Path(reference["tfrecord_dir"]), Path(result["tfrecord_dir"])
    for name in ("statistics.json", "statistics.pb", "duplicates.csv"):
        assert (found / name).read_bytes() == (expected / name).read_bytes(), name
    counts = json.loads((expected / "metadata.json").read_text())["duplicates"]
    assert json.loads((found / "metadata.json").read_text())["duplicates"] == counts
    assert counts["groups"] == counts["leaking_groups"] == 39 and counts["rows"] == 39 * 3
    assert job_contents(found) == job_contents(expected)
