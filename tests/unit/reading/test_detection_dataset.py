"""tfrecorder.reading.detection_dataset: load() of detection jobs (images, boxes, classes) and multi-hot label columns."""
from __future__ import annotations

import numpy as np

import tfrecorder
from tfrecorder.format import detection_keys
from tfrecorder.reading.detection_dataset import is_detection_job, multi_hot_columns, to_multi_hot
from tfrecorder.format.finished_job import JobInfo


def test_load_gives_images_boxes_and_classes(detection_job, photos, tf):
    tfrecord_dir = detection_job["tfrecord_dir"]
    [a] = [e for e in tfrecorder.load(tfrecord_dir, "train") if e["uri"].numpy().decode() == str(photos["a.jpg"])]
    assert a["source_id"].numpy().decode() == detection_keys.source_id(str(photos["a.jpg"]))
    assert a["image"].dtype == tf.uint8 and tuple(a["image"].shape) == (40, 60, 3)
    assert a["boxes"].dtype == tf.float32 and a["classes"].dtype == tf.int64
    boxes = {int(c): tuple(b) for c, b in zip(a["classes"].numpy(), a["boxes"].numpy())}
    np.testing.assert_allclose(boxes[2], [0.2, 0.1, 0.6, 0.5])  # dog: ymin, xmin, ymax, xmax
    np.testing.assert_allclose(boxes[1], [0.0, 0.0, 1.0, 1.0])
    [c] = list(tfrecorder.load(tfrecord_dir, "validation"))
    assert tuple(c["boxes"].shape) == (0, 4) and tuple(c["classes"].shape) == (0,)


def test_load_batches_boxes_ragged_and_resizes_images(detection_job, tf):
    tfrecord_dir = detection_job["tfrecord_dir"]
    [batch] = list(tfrecorder.load(tfrecord_dir, "train", batch_size=8, image_size=(32, 32), channels=3))
    assert tuple(batch["image"].shape) == (2, 32, 32, 3) and isinstance(batch["image"], tf.Tensor)
    assert isinstance(batch["boxes"], tf.RaggedTensor) and isinstance(batch["classes"], tf.RaggedTensor)
    assert sorted(batch["classes"].row_lengths().numpy().tolist()) == [1, 2]
    assert batch["boxes"].shape.as_list()[-1] == 4
    drawn = tf.image.draw_bounding_boxes(tf.cast(batch["image"], tf.float32), batch["boxes"].to_tensor(),
                                         tf.constant([[1.0, 0.0, 0.0]]))
    assert tuple(drawn.shape) == (2, 32, 32, 3)
    image, target = next(iter(tfrecorder.load(tfrecord_dir, "train", as_supervised=True)))
    assert image.dtype == tf.uint8 and set(target) == {"boxes", "classes"}


def test_detection_jobs_are_told_by_their_task(detection_job, converted):
    assert is_detection_job(JobInfo.read(detection_job["tfrecord_dir"]))
    assert not is_detection_job(JobInfo.read(converted["tfrecord_dir"]))


def test_multi_hot_columns_and_vectors(tf):
    job = JobInfo("unused", {"features": {"tags": {"dtype": "int64", "shape": None, "multi_label": True},
                                          "label": {"dtype": "int64", "shape": []}},
                             "vocabularies": {"tags": ["a", "b", "c", "d"], "label": ["x", "y"]}})
    columns = multi_hot_columns(job)
    assert columns == {"tags": 4}
    batch = {"tags": tf.ragged.constant([[0, 2, 2], [], [3]], dtype=tf.int64), "label": tf.constant([1, 0, 1])}
    hot = to_multi_hot(batch, columns)
    np.testing.assert_array_equal(hot["tags"].numpy(), [[1, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 1]])
    assert hot["tags"].dtype == tf.float32 and hot["label"].numpy().tolist() == [1, 0, 1]
