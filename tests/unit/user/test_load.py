"""tfrecorder.load on real converted jobs and on hand-built records covering the features contract."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from support import imagegen
from support import jobbuilder
import tfrecorder
from tfrecorder.format.example_encoder import bytes_feature, float_feature, int64_feature
from tfrecorder.load import Splits
from tfrecorder.sample_data import encode_image, photo_array


def metadata_of(tfrecord_dir) -> dict:
    return json.loads((Path(tfrecord_dir) / "metadata.json").read_text())


def test_every_split_loads_with_its_count_and_lookup_ignores_case(converted, tf):
    tfrecord_dir = converted["tfrecord_dir"]
    datasets = tfrecorder.load(tfrecord_dir)
    splits = metadata_of(tfrecord_dir)["splits"]
    assert isinstance(datasets, Splits) and sorted(datasets) == sorted(splits) == ["TEST", "TRAIN", "VALIDATION"]
    for split, info in splits.items():
        assert sum(1 for _ in datasets[split.lower()]) == info["records"]
    assert "train" in datasets and datasets.get("Test") is datasets["TEST"]
    single = tfrecorder.load(tfrecord_dir, "validation")
    assert sum(1 for _ in single) == splits["VALIDATION"]["records"]
    with pytest.raises(ValueError, match="split 'holdout' is not in"):
        tfrecorder.load(tfrecord_dir, "holdout")


def test_decoded_images_keep_their_stored_channels(converted, tf, image_files):
    """Gray → 1, RGBA → 4, palette → 3, GIF/WebP/BMP/CMYK decoded; lossless ones equal PIL's pixels."""
    expected = {name: (fmt, channels) for name, (_data, fmt, channels) in imagegen.odd_images().items()}
    seen = {}
    for split, dataset in tfrecorder.load(converted["tfrecord_dir"]).items():
        for example in dataset:
            name = os.path.basename(example["image_uri"].numpy().decode())
            image = example["image"].numpy()
            assert image.dtype == np.uint8
            assert image.shape == (example["image_height"], example["image_width"], example["image_channels"])
            seen[name] = (example["image_format"].numpy().decode(), image.shape[2])
            if name in ("rgba.png", "rgb.png", "gray.png"):
                assert np.array_equal(np.atleast_3d(np.asarray(Image.open(image_files[name]))), image)
            if name == "palette.png":
                assert np.array_equal(np.asarray(Image.open(image_files[name]).convert("RGB")), image)
    for name in ("gray.jpg", "rgba.png", "palette.png", "anim.gif", "rgb.webp", "rgba.webp", "rgb.bmp", "cmyk.jpg",
                 "gray16.png"):
        assert seen[name] == expected[name], name


def test_gzip_job_loads(tmp_path, tf, image_files):
    table = [{"split": "TRAIN", "image_uri": str(image_files[n]), "label": lab}
             for n, lab in (("rgb.jpg", "cat"), ("gray.png", "dog"), ("rgba.webp", "cat"))]
    import pandas as pd

    result = tfrecorder.convert(pd.DataFrame(table), tmp_path, compression="gzip")
    assert metadata_of(result["tfrecord_dir"])["compression"] == "gzip"
    examples = list(tfrecorder.load(result["tfrecord_dir"], "train", deterministic=True))
    assert sorted(int(e["image_channels"]) for e in examples) == [1, 3, 4]
    assert all(tuple(e["image"].shape) == (24, 32, int(e["image_channels"])) for e in examples)


def test_batches_have_static_shapes_with_image_size(converted, tf):
    dataset = tfrecorder.load(converted["tfrecord_dir"], "train", batch_size=4, image_size=(16, 20), channels=3,
                              drop_remainder=True)
    assert dataset.element_spec["image"].shape.as_list() == [4, 16, 20, 3]
    assert dataset.element_spec["label"].shape.as_list() == [4]
    batches = list(dataset)
    assert batches and all(b["image"].shape == (4, 16, 20, 3) and b["image"].dtype == tf.uint8 for b in batches)
    loose = tfrecorder.load(converted["tfrecord_dir"], "train", batch_size=4, image_size=(16, 20))
    assert loose.element_spec["image"].shape.as_list() == [None, 16, 20, 4]  # the widest of the 1, 3, 4 stored
    assert all(b["image"].shape[1:] == (16, 20, 4) for b in loose)


def test_shuffle_with_seed_is_a_reproducible_permutation(converted, tf):
    def uris(seed):
        ds = tfrecorder.load(converted["tfrecord_dir"], "train", shuffle_buffer=100, seed=seed, deterministic=True,
                             decode_images=False)
        return [e["image_uri"].numpy() for e in ds]

    plain = [e["image_uri"].numpy() for e in tfrecorder.load(converted["tfrecord_dir"], "train", decode_images=False)]
    first, again = uris(1), uris(1)
    assert first == again and sorted(first) == sorted(plain)
    assert any(uris(seed) != first for seed in (2, 3, 4))


def test_repeat_and_no_decode(converted, tf):
    test_count = metadata_of(converted["tfrecord_dir"])["splits"]["TEST"]["records"]
    raw = list(tfrecorder.load(converted["tfrecord_dir"], "test", decode_images=False, repeat=True).take(3 * test_count))
    assert len(raw) == 3 * test_count and raw[0]["image"].dtype == tf.string


def test_as_supervised_fits_a_tiny_keras_model(converted, tf):
    dataset = tfrecorder.load(converted["tfrecord_dir"], "train", batch_size=4, image_size=(16, 16), channels=3,
                              as_supervised=True, shuffle_buffer=32, repeat=True)
    image_spec, label_spec = dataset.element_spec
    assert image_spec.shape.as_list() == [None, 16, 16, 3] and label_spec.dtype == tf.int64
    keras = tf.keras
    model = keras.Sequential([
        keras.Input((16, 16, 3)), keras.layers.Rescaling(1 / 255), keras.layers.Conv2D(4, 3, activation="relu"),
        keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(3),
    ])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(dataset, steps_per_epoch=3, epochs=1, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"][0])


FEATURES = {
    "image": {"dtype": "string", "shape": [], "allow_missing": False},
    "image_format": {"dtype": "string", "shape": [], "allow_missing": False},
    "image_height": {"dtype": "int64", "shape": [], "allow_missing": False},
    "image_width": {"dtype": "int64", "shape": [], "allow_missing": False},
    "image_channels": {"dtype": "int64", "shape": [], "allow_missing": False},
    "image_uri": {"dtype": "string", "shape": [], "allow_missing": False},
    "label": {"dtype": "int64", "shape": [], "allow_missing": False},
    "price": {"dtype": "float64", "shape": [], "allow_missing": True, "default": 1.5, "stored_as": "float64_bits"},
    "count": {"dtype": "int64", "shape": [], "allow_missing": True},
    "name": {"dtype": "string", "shape": [], "allow_missing": True},
    "vec": {"dtype": "float32", "shape": [3], "allow_missing": True, "default": [0.0, 0.0, -1.0]},
    "tags": {"dtype": "string", "shape": None, "allow_missing": True},
    "hist": {"dtype": "int64", "shape": None, "allow_missing": True, "default": [7, 7]},
    "seq": {"dtype": "int64", "shape": None, "allow_missing": False},
    "exact": {"dtype": "float64", "shape": [2], "allow_missing": False, "stored_as": "float64_bits"},
}


def contract_rows() -> list[dict]:
    bits = jobbuilder.float64_bits
    rows = []
    for i, (h, w) in enumerate(((20, 30), (12, 16), (24, 10))):
        image = encode_image(Image.fromarray(photo_array(h, w, i)), "PNG")
        rows.append({"image": bytes_feature(image), "image_format": bytes_feature(b"png"),
                     "image_height": int64_feature(h), "image_width": int64_feature(w),
                     "image_channels": int64_feature(3), "image_uri": bytes_feature(f"img{i}.png".encode()),
                     "label": int64_feature(i), "seq": int64_feature(*range(i + 1)),
                     "exact": int64_feature(bits(0.1 * (i + 1)), bits(1e300))})
    rows[0].update(price=int64_feature(bits(0.1)), count=int64_feature(5), name=bytes_feature(b"first"),
                   vec=float_feature(1.0, 2.0, 3.0), tags=bytes_feature(b"a", b"b"), hist=int64_feature(1, 2, 3))
    rows[2].update(price=int64_feature(bits(-2.25)), tags=bytes_feature(b"c"))
    return rows


@pytest.fixture(scope="module")
def contract_job(tmp_path_factory) -> str:
    directory = tmp_path_factory.mktemp("contract") / "hand-built"
    schema = {"image_uri": "ImageUri", "label": "IntegerLabel"}
    return str(jobbuilder.write_job(directory, FEATURES, contract_rows(), schema))


def test_missing_values_ragged_lists_and_float64_bits(contract_job, tf):
    examples = list(tfrecorder.load(contract_job, "train", deterministic=True))
    assert [int(e["label"]) for e in examples] == [0, 1, 2]
    price = [float(e["price"]) for e in examples]
    assert examples[0]["price"].dtype == tf.float64 and price == [0.1, 1.5, -2.25]  # exact float64, default 1.5
    assert [bool(e["price_missing"]) for e in examples] == [False, True, False]
    assert [int(e["count"]) for e in examples] == [5, 0, 0]
    assert [bool(e["count_missing"]) for e in examples] == [False, True, True]
    assert [e["name"].numpy() for e in examples] == [b"first", b"", b""]
    assert [bool(e["name_missing"]) for e in examples] == [False, True, True]
    assert [e["vec"].numpy().tolist() for e in examples] == [[1, 2, 3], [0, 0, -1], [0, 0, -1]]
    assert [e["tags"].numpy().tolist() for e in examples] == [[b"a", b"b"], [], [b"c"]]
    assert [bool(e["tags_missing"]) for e in examples] == [False, True, False]
    assert [e["hist"].numpy().tolist() for e in examples] == [[1, 2, 3], [7, 7], [7, 7]]
    assert [e["seq"].numpy().tolist() for e in examples] == [[0], [0, 1], [0, 1, 2]]
    assert "seq_missing" not in examples[0] and "label_missing" not in examples[0]
    assert [e["exact"].numpy().tolist() for e in examples] == [[0.1 * (i + 1), 1e300] for i in range(3)]
    assert [tuple(e["image"].shape) for e in examples] == [(20, 30, 3), (12, 16, 3), (24, 10, 3)]


def test_contract_batched_ragged_and_dense(contract_job, tf):
    (batch,) = list(tfrecorder.load(contract_job, "train", batch_size=3, deterministic=True))
    assert batch["price"].numpy().tolist() == [0.1, 1.5, -2.25]
    assert batch["vec"].shape == (3, 3) and batch["vec_missing"].numpy().tolist() == [False, True, True]
    assert isinstance(batch["tags"], tf.RaggedTensor) and batch["tags"].to_list() == [[b"a", b"b"], [], [b"c"]]
    assert batch["hist"].to_list() == [[1, 2, 3], [7, 7], [7, 7]]
    assert batch["exact"].shape == (3, 2) and batch["exact"].dtype == tf.float64
    images = batch["image"]  # three sizes: a ragged batch [3, (H), (W), 3]
    assert isinstance(images, tf.RaggedTensor)
    assert [tuple(images[i].to_tensor().shape) for i in range(3)] == [(20, 30, 3), (12, 16, 3), (24, 10, 3)]
    (resized,) = list(tfrecorder.load(contract_job, "train", batch_size=3, image_size=(8, 8)))
    assert resized["image"].shape == (3, 8, 8, 3)


def test_unknown_feature_dtype_is_a_clear_error(tmp_path, tf):
    features = {"x": {"dtype": "complex64", "shape": [], "allow_missing": False}}
    job = jobbuilder.write_job(tmp_path / "job", features, [{"x": float_feature(1.0)}], {})
    with pytest.raises(ValueError, match="feature 'x': unknown dtype 'complex64'"):
        tfrecorder.load(str(job))


def test_not_a_job_directory(tmp_path):
    with pytest.raises(ValueError, match="not a finished tfrecorder job directory"):
        tfrecorder.load(str(tmp_path))


def test_as_supervised_needs_image_and_label(tmp_path, tf):
    features = {"x": {"dtype": "float32", "shape": [], "allow_missing": False}}
    job = jobbuilder.write_job(tmp_path / "job", features, [{"x": float_feature(1.0)}], {"x": "FloatInput"})
    with pytest.raises(ValueError, match="as_supervised needs an image and a label"):
        tfrecorder.load(str(job), as_supervised=True)
    assert [float(e["x"]) for e in tfrecorder.load(str(job), "train")] == [1.0]


def test_bad_options(converted):
    with pytest.raises(ValueError, match="image_size"):
        tfrecorder.load(converted["tfrecord_dir"], image_size=(0, 3))
    with pytest.raises(ValueError, match="channels"):
        tfrecorder.load(converted["tfrecord_dir"], channels=2)
    with pytest.raises(ValueError, match="batch_size"):
        tfrecorder.load(converted["tfrecord_dir"], batch_size=0)


def test_resized_split_mixing_gray_rgb_and_rgba_converts_to_the_widest(tmp_path, tf):
    """metadata.json records the channel counts seen per image column; load() decodes to the widest."""
    images = imagegen.odd_images()
    names = ["gray.png", "rgb.jpg", "rgba.png", "gray.jpg", "anim.gif", "palette.png"]
    paths = imagegen.write_files(tmp_path / "images", {n: images[n][0] for n in names})
    table = pd.DataFrame({"split": "TRAIN", "image_uri": [str(paths[n]) for n in names] * 2, "label": "a"})
    job = tfrecorder.convert(table, tmp_path / "out")["tfrecord_dir"]
    assert metadata_of(job)["images"] == {"image": {"channels": [1, 3, 4], "formats": ["gif", "jpeg", "png"]}}
    batches = list(tfrecorder.load(job, "train", image_size=(16, 16), batch_size=4).as_numpy_iterator())
    assert [b["image"].shape for b in batches] == [(4, 16, 16, 4)] * 3
    stored = {int(c) for b in batches for c in b["image_channels"]}
    assert stored == {1, 3, 4}  # the records are unchanged
    gray = tfrecorder.load(job, "train", image_size=(16, 16), batch_size=4, channels=1)
    assert {b["image"].shape[3] for b in gray.as_numpy_iterator()} == {1}


def test_largest_stored_sizes_come_from_statistics_and_leave_the_pixels_alone(converted, tf, tmp_path):
    """statistics.json's maxima bound each split's stored images; a job without statistics (or a version,
    whose statistics describe only its new rows) assumes nothing, and both load the same pixels."""
    import shutil

    from tfrecorder.format.finished_job import JobInfo
    from tfrecorder.load import largest_stored_sizes

    job = JobInfo.read(converted["tfrecord_dir"])
    sizes = largest_stored_sizes(job)
    for split in job.splits:
        raw = list(tfrecorder.load(converted["tfrecord_dir"], split, decode_images=False))
        assert sizes[(split, "image")] == (max(int(e["image_height"]) for e in raw),
                                           max(int(e["image_width"]) for e in raw))
    assert largest_stored_sizes(JobInfo(job.tfrecord_dir, {**job.metadata, "lineage": {"version": 2}})) == {}
    bare = tmp_path / "no-statistics"
    shutil.copytree(converted["tfrecord_dir"], bare)
    (bare / "statistics.json").unlink()
    assert largest_stored_sizes(JobInfo.read(str(bare))) == {}

    def images(tfrecord_dir):
        ds = tfrecorder.load(tfrecord_dir, "train", image_size=(12, 10), channels=3, deterministic=True)
        return [e["image"].numpy() for e in ds]

    with_bound, without = images(converted["tfrecord_dir"]), images(str(bare))
    assert len(with_bound) == len(without) and all(np.array_equal(a, b) for a, b in zip(with_bound, without))
