"""gs:// jobs end to end against a real GCS emulator on loopback (tfrecorder.io.gcs itself: tests/unit/io/test_gcs.py).

Sources, images, output, publishing, errors and retries.

TensorFlow's own GCS reader cannot be pointed at an emulator, so finished jobs are downloaded with
google-cloud-storage and read back with plain tf.data from local files.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pandas as pd
import pytest

import tfrecorder
from support.readers import read_job
from tfrecorder.format import job_directory
from tfrecorder.format.metadata_file import JobMetadata
from tfrecorder.format import file_names
from tfrecorder.io import storage
from tfrecorder.sample_data import make_sample_dataset


def download_job(gcs, tfrecord_dir: str, local: Path) -> str:
    """Copy a finished gs:// job directory to `local`; returns the local directory."""
    for url in gcs.list(tfrecord_dir.rstrip("/") + "/"):
        target = local / url[len(tfrecord_dir.rstrip("/")) + 1:]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(gcs.download(url))
    return str(local)


def by_uri(job: dict) -> dict[str, dict]:
    return {ex["image_uri"].decode(): ex for examples in job.values() for ex in examples}


def discards(directory: str) -> list[dict]:
    with open(os.path.join(directory, file_names.DISCARD_FILE), newline="") as stream:
        return list(csv.DictReader(stream))


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> pd.DataFrame:
    """The 60-image sample dataset (local files) as a DataFrame."""
    return pd.read_csv(make_sample_dataset(tmp_path_factory.mktemp("sample")))


@pytest.fixture(scope="module")
def gs_images(gcs, sample) -> dict[str, bytes]:
    """The sample images uploaded to gs://tfr-images/photos/; gs:// URL → bytes."""
    uploaded = {}
    for path in sample["image_uri"]:
        url = f"gs://tfr-images/photos/{Path(path).name}"
        data = Path(path).read_bytes()
        gcs.upload(url, data)
        uploaded[url] = data
    return uploaded


@pytest.fixture(scope="module")
def gs_to_gs(gcs, sample, gs_images, tmp_path_factory, monkeypatch_module):
    """A 60-row gs:// CSV (gs:// URLs, some relative, one missing object) → gs:// output.

    google.auth.default is watched: on an emulator no credential lookup may happen at all.
    """
    import google.auth

    lookups = []
    real_default = google.auth.default

    def watched_default(*args, **kwargs):
        lookups.append(args)
        return real_default(*args, **kwargs)

    monkeypatch_module.setattr(google.auth, "default", watched_default)
    rows = sample.copy()
    names = [Path(p).name for p in rows["image_uri"]]
    rows["image_uri"] = [f"gs://tfr-images/photos/{n}" if i % 3 else f"photos/{n}" for i, n in enumerate(names)]
    rows.loc[7, "image_uri"] = "gs://tfr-images/photos/no-such-object.jpg"
    gcs.upload("gs://tfr-images/data.csv", rows.to_csv(index=False).encode())
    gcs.bucket("tfr-out")
    result = tfrecorder.convert("gs://tfr-images/data.csv", "gs://tfr-out/jobs", job_label="gcs", num_shards=2)
    local = download_job(gcs, result["tfrecord_dir"], tmp_path_factory.mktemp("gs_to_gs"))
    return result, local, rows, lookups


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_gs_csv_with_gs_images_converts_to_gs_output(gs_to_gs, gs_images, tf):
    result, local, rows, _lookups = gs_to_gs
    assert result["tfrecord_dir"].startswith("gs://tfr-out/jobs/gcs-")
    assert (result["rows_in"], sum(result["written"].values()), result["discarded"]) == (60, 59, 1)
    # image_uri keeps the table's value; relative ones were read from the CSV's gs:// folder
    written = {uri if uri.startswith("gs://") else f"gs://tfr-images/{uri}": ex for uri, ex in by_uri(read_job(local)).items()}
    assert set(written) == {url for url in gs_images if not url.endswith("_0007.jpg")}
    for url, example in written.items():
        assert example["image"] == gs_images[url]
        decoded = tf.io.decode_image(example["image"], expand_animations=False)
        assert (example["image_height"], example["image_width"], example["image_channels"]) == tuple(decoded.shape)
    metadata = json.loads(Path(local, file_names.METADATA_FILE).read_text())
    assert [s["file"] for s in metadata["splits"]["TRAIN"]["shards"]] == ["train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"]


def test_missing_object_ends_in_discard_file(gs_to_gs):
    _result, local, _rows, _lookups = gs_to_gs
    [row] = discards(local)
    assert row["image_uri"] == "gs://tfr-images/photos/no-such-object.jpg"
    assert row["reason"] == "missing file: gs://tfr-images/photos/no-such-object.jpg"


def test_emulator_conversion_never_looks_up_credentials(gs_to_gs):
    assert gs_to_gs[3] == []


def test_gs_job_directory_holds_only_finished_files(gcs, gs_to_gs):
    result = gs_to_gs[0]
    names = {url[len(result["tfrecord_dir"]) + 1:] for url in gcs.list(result["tfrecord_dir"] + "/")}
    shards = {f"{split}-0000{i}-of-00002.tfrecord" for split in ("train", "validation", "test") for i in (0, 1)}
    assert names == {"metadata.json", "discarded.csv", "dataset_info.json", "features.json", "label.labels.txt",
                     "statistics.json", "statistics.pb", "duplicates.csv",  # issue 29
                     *shards, *(f"index/{shard}.index" for shard in shards),
                     *(f"keys/{result['tfrecord_dir'].rsplit('/', 1)[1]}.{shard}.keys" for shard in shards)}  # issue 28
    assert gcs.list("gs://tfr-out/jobs/.incomplete-") == []
    assert JobMetadata.read(result["tfrecord_dir"]).document["records_written"] == 59


def test_mixed_local_and_gs_images_from_a_dataframe(gs_images, sample, tmp_path):
    frame = sample.head(10).copy()
    frame.loc[::2, "image_uri"] = [f"gs://tfr-images/photos/{Path(p).name}" for p in frame["image_uri"][::2]]
    result = tfrecorder.convert(frame, tmp_path, fetch_concurrency=4)
    assert (sum(result["written"].values()), result["discarded"]) == (10, 0)
    written = by_uri(read_job(result["tfrecord_dir"]))
    assert set(written) == set(frame["image_uri"])
    for uri, example in written.items():
        assert example["image"] == (gs_images[uri] if uri.startswith("gs://") else Path(uri).read_bytes())


def test_gs_image_directory_source_to_gzip_gs_output(gcs, gs_images, tmp_path):
    layout = {"TRAIN/cat": 6, "TRAIN/dog": 6, "VALIDATION/cat": 2, "TEST/dog": 2}
    expected = {}
    images = iter(gs_images.values())
    for folder, count in layout.items():
        for i in range(count):
            url = f"gs://tfr-images/folders/{folder}/{i}.img"
            expected[url] = next(images)
            gcs.upload(url, expected[url])
    gcs.bucket("tfr-out")
    result = tfrecorder.convert("gs://tfr-images/folders", "gs://tfr-out/dirs", compression="gzip")
    assert (sum(result["written"].values()), result["discarded"]) == (16, 0)
    job = read_job(download_job(gcs, result["tfrecord_dir"], tmp_path))
    assert {split: len(examples) for split, examples in job.items()} == {"TRAIN": 12, "VALIDATION": 2, "TEST": 2}
    assert {uri: ex["image"] for uri, ex in by_uri(job).items()} == expected


def test_nonexistent_output_bucket_is_a_clear_error(gs_images, sample):
    with pytest.raises(ValueError, match="bucket 'no-such-bucket' does not exist"):
        tfrecorder.convert(sample.head(3), "gs://no-such-bucket/out")


def test_output_bucket_that_refuses_writes_is_a_clear_error(proxy, gcs, sample):
    gcs.bucket("tfr-readonly")
    proxy.fail("/b/tfr-readonly/o", 403, times=10)
    with pytest.raises(ValueError, match="gs://tfr-readonly/out is not writable"):
        tfrecorder.convert(sample.head(3), "gs://tfr-readonly/out")


def test_transient_errors_are_retried_and_forbidden_objects_discarded(proxy, gs_images, tmp_path):
    urls = sorted(gs_images)[:3]
    flaky, forbidden = urls[1], urls[2]
    flaky_name, forbidden_name = flaky[len("gs://tfr-images/"):], forbidden[len("gs://tfr-images/"):]
    proxy.fail(flaky_name, 503, times=2)
    proxy.fail(flaky_name, 429, times=1)
    proxy.fail(flaky_name, None, times=1)  # connection closed without an answer
    proxy.fail(forbidden_name, 403, times=100)
    frame = pd.DataFrame({"split": "TRAIN", "image_uri": urls, "label": ["a", "b", "a"]})
    result = tfrecorder.convert(frame, tmp_path)
    assert proxy.count(flaky_name) == 5  # four failures, then success
    written = by_uri(read_job(result["tfrecord_dir"]))
    assert {uri: ex["image"] for uri, ex in written.items()} == {u: gs_images[u] for u in urls[:2]}
    assert [(r["image_uri"], r["reason"]) for r in discards(result["tfrecord_dir"])] == [
        (forbidden, f"permission denied: {forbidden}")]


def test_images_are_fetched_concurrently_within_the_bound(proxy, gs_images, tmp_path):
    frame = pd.DataFrame({"image_uri": sorted(gs_images)[:40], "label": "a", "split": "TRAIN"})
    tfrecorder.convert(frame, tmp_path / "default")  # gs:// images: default bound 16
    default_peak = proxy.peak_in_flight("/o/photos/")
    proxy.clear()
    tfrecorder.convert(frame, tmp_path / "bounded", fetch_concurrency=3)
    bounded_peak = proxy.peak_in_flight("/o/photos/")
    proxy.clear()
    tfrecorder.convert(frame, tmp_path / "sequential", fetch_concurrency=1)
    assert (bounded_peak, proxy.peak_in_flight("/o/photos/")) == (3, 1)
    assert 3 < default_peak <= 16


def test_finalize_on_gs_moves_everything_and_metadata_last(gcs):
    gcs.bucket("tfr-store")
    final, temp = job_directory.reserve_job_dir("gs://tfr-store/jobs", "same")
    other, _ = job_directory.reserve_job_dir("gs://tfr-store/jobs", "same")
    assert final != other and temp == final.rsplit("/", 1)[0] + "/.incomplete-" + final.rsplit("/", 1)[1]
    storage.write_bytes(f"{temp}/train-00000-of-00001.tfrecord", b"records")
    JobMetadata({"done": True}).write(temp)
    job_directory.finalize(temp, final)
    assert storage.list_files(temp) == []
    assert storage.read_bytes(f"{final}/train-00000-of-00001.tfrecord") == b"records"
    assert JobMetadata.read(final).document == {"done": True}
    storage.delete_tree(final)
    assert storage.list_files(final) == []


def test_publishing_on_gs_is_parallel_constant_requests_per_shard_metadata_last_and_repeatable(gcs, proxy):
    gcs.bucket("tfr-publish")
    final, temp = job_directory.reserve_job_dir("gs://tfr-publish/jobs", "pub")
    shards = [f"train-{i:05d}-of-00060.tfrecord" for i in range(60)]
    for name in [*shards, file_names.DISCARD_FILE]:
        gcs.upload(f"{temp}/{name}", name.encode())
    gcs.upload(f"{temp}/{file_names.METADATA_FILE}", b"{}")
    proxy.clear()
    proxy.delay_seconds = 0.02
    job_directory.finalize(temp, final)
    objects = len(shards) + 2
    assert sum(proxy.requests.values()) <= 2 * objects + 8  # one copy and one delete per object, a few listings
    copies = proxy.answered("/rewriteTo/")
    assert len(copies) == objects and copies[-1][0].split("?")[0].endswith(f"/{file_names.METADATA_FILE}")
    assert copies[-1][1] >= max(end for _path, _start, end in copies[:-1])  # metadata.json after all the rest
    assert proxy.peak_in_flight("/rewriteTo/") > 4  # in parallel
    assert gcs.list(temp + "/") == []
    assert sorted(url.rsplit("/", 1)[1] for url in gcs.list(final + "/")) == sorted(
        [*shards, file_names.DISCARD_FILE, file_names.METADATA_FILE])
    job_directory.finalize(temp, final)  # a retried finalize finds the job published and only cleans up
    assert gcs.download(f"{final}/{shards[7]}") == shards[7].encode()


def test_a_failed_run_removes_its_temporary_objects_and_a_half_published_directory(gcs):
    gcs.bucket("tfr-publish")
    for published in (False, True):
        final, temp = job_directory.reserve_job_dir("gs://tfr-publish/failed", "fail")
        gcs.upload(f"{temp}/_pieces/train-1.part", b"piece")
        gcs.upload(f"{final}/train-00000-of-00001.tfrecord", b"copied before the failure")
        if published:
            gcs.upload(f"{final}/{file_names.METADATA_FILE}", b"{}")
        job_directory.abandon(temp, final)
        assert gcs.list(temp + "/") == []
        assert len(gcs.list(final + "/")) == (2 if published else 0)
