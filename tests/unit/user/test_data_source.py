"""tfrecorder.data_source: random access without TensorFlow, checked against TensorFlow's own readers."""
from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from support import jobbuilder
import tfrecorder
from support.readers import read_job
from tfrecorder.format.example_encoder import bytes_feature, float_feature, int64_feature
from tfrecorder.errors import CorruptRecordError
from support.paths import REPO

ROOT = REPO


def same(value, expected) -> bool:
    if isinstance(expected, list):
        return [v.item() if isinstance(v, np.generic) else v for v in np.asarray(value, dtype=object).tolist()] == expected
    if isinstance(expected, float):
        return float(value) == pytest.approx(expected, nan_ok=True) or (value != value and expected != expected)
    return value == expected


def assert_matches(job_dir: str, source_of=tfrecorder.data_source):
    """Every record of every split, by index, equals TensorFlow's sequential read of the shards."""
    for split, examples in read_job(job_dir).items():
        ds = source_of(job_dir, split)
        assert len(ds) == len(examples)
        for i, expected in enumerate(examples):
            record = ds[i]
            assert sorted(record) == sorted(expected)
            for name, value in expected.items():
                assert same(record[name], value), (split, i, name, record[name], value)


def test_records_in_shard_order_match_tensorflow(converted):
    assert_matches(converted["tfrecord_dir"])


def test_indexing_slices_lists_and_errors(converted):
    ds = tfrecorder.data_source(converted["tfrecord_dir"], "train")
    uris = [ds[i]["image_uri"] for i in range(len(ds))]
    assert [r["image_uri"] for r in ds[1:5]] == uris[1:5]
    assert [r["image_uri"] for r in ds[::-2]] == uris[::-2]
    assert [r["image_uri"] for r in ds[[3, 0, 3]]] == [uris[3], uris[0], uris[3]]
    assert [r["image_uri"] for r in ds[np.array([2, 1])]] == [uris[2], uris[1]]
    assert [r["image_uri"] for r in ds.__getitems__([4, 1])] == [uris[4], uris[1]]
    assert ds[-1]["image_uri"] == uris[-1] and [r["image_uri"] for r in ds] == uris
    with pytest.raises(IndexError):
        ds[len(ds)]
    with pytest.raises(TypeError):
        ds["0"]
    with pytest.raises(ValueError, match="split 'holdout' is not in"):
        tfrecorder.data_source(converted["tfrecord_dir"], "holdout")
    assert f"{len(ds)} records" in repr(ds) and "image" in ds.features


def test_decoded_images_equal_load_channels_and_pixels(converted, tf):
    """Pillow decodes to the channel count TensorFlow gives; lossless formats pixel for pixel."""
    job = converted["tfrecord_dir"]
    ds = tfrecorder.data_source(job, "train", decode_images=True)
    loaded = {ex["image_uri"]: ex["image"] for ex in tfrecorder.load(job, "train").as_numpy_iterator()}
    for record in ds:
        expected = loaded[record["image_uri"]]
        image = record["image"]
        assert image.dtype == np.uint8 and image.shape == expected.shape, record["image_uri"]
        if record["image_format"] in (b"png", b"bmp", b"gif"):
            assert np.array_equal(image, expected), record["image_uri"]
        else:  # JPEG / WebP: two decoders, nearly the same pixels
            assert np.abs(image.astype(int) - expected.astype(int)).mean() < 2, record["image_uri"]
    rgb = tfrecorder.data_source(job, "train", decode_images=True, channels=3)
    assert all(r["image"].shape[2] == 3 for r in rgb)


def test_structured_values_and_missing_like_load(tmp_path, tf):
    features = {
        "d": {"dtype": "float64", "shape": [], "allow_missing": True, "default": 0.5, "stored_as": "float64_bits"},
        "v": {"dtype": "float32", "shape": [2], "allow_missing": False},
        "s": {"dtype": "string", "shape": None, "allow_missing": True, "default": ["x"]},
        "n": {"dtype": "int64", "shape": [], "allow_missing": False},
    }
    rows = [{"d": int64_feature(jobbuilder.float64_bits(1e-300)), "v": float_feature(1.5, -2.0),
             "s": bytes_feature(b"a", b"b"), "n": int64_feature(-(2**63))},
            {"v": float_feature(0.0, 3.0), "n": int64_feature(7)}]
    job = str(jobbuilder.write_job(tmp_path / "job", features, rows, {}))
    ds = tfrecorder.data_source(job, "train")
    first, second = ds[0], ds[1]
    assert first["d"] == 1e-300 and isinstance(first["d"], np.float64) and first["d_missing"] is False
    assert first["v"].dtype == np.float32 and first["v"].tolist() == [1.5, -2.0]
    assert first["s"].tolist() == [b"a", b"b"] and first["n"] == -(2**63)
    assert second["d"] == 0.5 and second["d_missing"] is True
    assert second["s"].tolist() == [b"x"] and second["s_missing"] is True
    (batch,) = tfrecorder.load(job, "train", batch_size=2, deterministic=True).as_numpy_iterator()
    assert batch["d"].tolist() == [first["d"], second["d"]] and batch["d_missing"].tolist() == [False, True]
    assert [list(row) for row in batch["s"]] == [first["s"].tolist(), second["s"].tolist()]


def test_picklable_and_usable_from_worker_processes(converted):
    import multiprocessing

    ds = tfrecorder.data_source(converted["tfrecord_dir"], "train", decode_images=True)
    ds[0]  # opens a file and loads an index: neither may travel in the pickle
    copy = pickle.loads(pickle.dumps(ds))
    assert len(copy) == len(ds) and copy[2]["image_uri"] == ds[2]["image_uri"]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        shapes = pool.map(_image_shape, [(ds, i) for i in range(len(ds))])
    assert shapes == [ds[i]["image"].shape for i in range(len(ds))]


def _image_shape(args):
    ds, index = args
    return ds[index]["image"].shape


def test_shards_without_index_files_are_scanned(converted, tmp_path):
    job = Path(shutil.copytree(converted["tfrecord_dir"], tmp_path / "job"))
    shutil.rmtree(job / "index")
    assert_matches(str(job))
    metadata = json.loads((job / "metadata.json").read_text())
    for info in metadata["splits"].values():
        for shard in info["shards"]:
            del shard["index_file"]
    (job / "metadata.json").write_text(json.dumps(metadata))
    assert_matches(str(job))


def test_gzip_jobs_are_read_without_an_index(image_table, tmp_path):
    job = tfrecorder.convert(image_table, tmp_path, compression="gzip")["tfrecord_dir"]
    assert_matches(job)


def test_damaged_record_raises_with_its_offset(converted, tmp_path):
    job = Path(shutil.copytree(converted["tfrecord_dir"], tmp_path / "job"))
    first = json.loads((job / "metadata.json").read_text())["splits"]["TRAIN"]["shards"][0]
    shard = job / first["file"]
    data = bytearray(shard.read_bytes())
    data[-5] ^= 0xFF  # inside the data of the shard's last record
    shard.write_bytes(bytes(data))
    ds = tfrecorder.data_source(str(job), "train")
    assert ds[0]["image"]
    with pytest.raises(CorruptRecordError, match="data checksum mismatch at byte offset"):
        ds[first["records"] - 1]


def test_gs_job_read_by_byte_ranges(gcs, image_table, tmp_path):
    gcs.bucket("tfr-ds")
    job = tfrecorder.convert(image_table, "gs://tfr-ds/jobs", num_shards=2)["tfrecord_dir"]
    local = tmp_path / "copy"
    from tfrecorder.io import storage

    for url in storage.list_files(job):
        target = local / url[len(job.rstrip("/")) + 1:]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(storage.read_bytes(url))
    for split, examples in read_job(str(local)).items():
        remote = tfrecorder.data_source(job, split, decode_images=True)
        assert [remote[i]["image_uri"] for i in range(len(remote))] == [e["image_uri"] for e in examples]
        decoded = pickle.loads(pickle.dumps(remote))[len(remote) - 1]["image"]
        assert decoded.dtype == np.uint8 and decoded.ndim == 3


NO_TENSORFLOW = textwrap.dedent("""
    import importlib.abc, sys

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "tensorflow" or name.startswith("tensorflow."):
                raise ImportError("tensorflow is blocked in this test")
            return None

    sys.meta_path.insert(0, Blocker())
""")


def test_import_and_data_source_never_import_tensorflow(converted, tmp_path):
    (tmp_path / "sitecustomize.py").write_text(NO_TENSORFLOW)
    script = textwrap.dedent(f"""
        import sys
        try:
            import tensorflow
        except ImportError:
            pass
        else:
            raise SystemExit("the blocker did not work")
        import tfrecorder
        ds = tfrecorder.data_source({converted["tfrecord_dir"]!r}, "train", decode_images=True)
        records = ds[:] + [ds[-1]]
        assert all(r["image"].ndim == 3 for r in records)
        assert not [m for m in sys.modules if m.split(".")[0] == "tensorflow"]
        print("ok", len(records))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok ")
