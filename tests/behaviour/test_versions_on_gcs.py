"""Versioned append on gs:// (issue 28): the base's shards are copied server-side, the base is left as it was."""
from __future__ import annotations

import json

import pandas as pd

import tfrecorder
from support import imagegen


def test_append_on_gcs_carries_shards_and_readers_agree(gcs, tmp_path):
    gcs.bucket("tfr-versions")
    rgb = imagegen.odd_images()["rgb.jpg"][0]
    gray = imagegen.odd_images()["gray.png"][0]
    imagegen.write_files(tmp_path, {"a.jpg": rgb, "b.png": gray, "c.jpg": rgb + b"", "d.png": gray})
    base_rows = pd.DataFrame({"image_uri": [str(tmp_path / "a.jpg"), str(tmp_path / "b.png")],
                              "label": ["cat", "dog"], "split": ["TRAIN", "TEST"]})
    base = tfrecorder.convert(base_rows, "gs://tfr-versions/out", job_label="pets", validate="header",
                              progress=False)["tfrecord_dir"]
    before = sorted(gcs.list(base + "/"))
    new_rows = pd.DataFrame({"image_uri": [str(tmp_path / "c.jpg"), str(tmp_path / "d.png")],
                             "label": ["emu", "cat"], "split": ["TRAIN", "TRAIN"]})
    version = tfrecorder.append(base, new_rows, progress=False)
    job = version["tfrecord_dir"]
    assert job.startswith("gs://tfr-versions/out/pets-") and "-v2-" in job
    assert sorted(gcs.list(base + "/")) == before
    metadata = json.loads(gcs.download(job + "/metadata.json"))
    # c.jpg holds a.jpg's bytes and d.png b.png's: both are already in the base
    assert metadata["discard_reasons"] == {"already in base": 2}
    assert f"already in base: {base.rsplit('/', 1)[1]}" in gcs.download(job + "/discarded.csv").decode()
    kept = tfrecorder.append(base, new_rows, duplicates="keep", progress=False)["tfrecord_dir"]
    kept_metadata = json.loads(gcs.download(kept + "/metadata.json"))
    assert kept_metadata["splits"]["TRAIN"]["records"] == 3
    assert kept_metadata["vocabularies"] == {"label": ["cat", "emu"]}  # dog is only in TEST
    assert [c["file"] for c in kept_metadata["lineage"]["carried_shards"]] == [
        "train-00000-of-00002.tfrecord", "test-00000-of-00001.tfrecord"]
    assert tfrecorder.verify(kept).ok
    assert len(tfrecorder.data_source(kept, "TRAIN")) == 3
    assert [v["version"] for v in tfrecorder.versions("gs://tfr-versions/out")] == [1, 2, 2]
    local = tfrecorder.append(kept, new_rows, output_dir=str(tmp_path / "local"), progress=False)  # gs:// → here
    assert local["discarded"] == 2 and tfrecorder.verify(local["tfrecord_dir"]).ok


def test_append_on_dataflow(gcs, tmp_path):
    """The Dataflow runner (Beam's DataflowRunner against the local Dataflow service): the job's
    configuration, base included, travels to the workers; the version is the one a local run makes."""
    from support.dataflow_stub import DataflowStub

    gcs.bucket("tfr-versions-dataflow")
    rgb, gray = imagegen.odd_images()["rgb.jpg"][0], imagegen.odd_images()["gray.png"][0]
    uris = {}
    for name, data in (("a.jpg", rgb), ("b.png", gray), ("c.png", imagegen.png_of_one_grey(7, 5))):
        uris[name] = f"gs://tfr-versions-dataflow/images/{name}"
        gcs.upload(uris[name], data)
    base = tfrecorder.convert(pd.DataFrame({"image_uri": [uris["a.jpg"], uris["b.png"]], "label": ["cat", "dog"],
                                            "split": ["TRAIN", "TRAIN"]}),
                              "gs://tfr-versions-dataflow/out", validate="header", progress=False)["tfrecord_dir"]
    new_rows = pd.DataFrame({"image_uri": [uris["c.png"], uris["a.jpg"]], "label": ["emu", "cat"],
                             "split": ["TRAIN", "TRAIN"]})
    service = DataflowStub()
    try:
        result = tfrecorder.append(base, new_rows, runner="DataflowRunner", project="tfrecorder-test",
                                   region="europe-west4",
                                   beam_options={"no_auth": True, "dataflow_endpoint": service.endpoint})
        assert result["job_id"] in service.jobs
        result.wait(poll_seconds=0.2, progress=False)
    finally:
        service.stop()
    assert result["written"] == {"TRAIN": 3} and result["discarded"] == 1
    metadata = json.loads(gcs.download(result["tfrecord_dir"] + "/metadata.json"))
    assert metadata["lineage"]["version"] == 2 and metadata["vocabularies"] == {"label": ["cat", "dog", "emu"]}
    assert tfrecorder.verify(result["tfrecord_dir"]).ok
