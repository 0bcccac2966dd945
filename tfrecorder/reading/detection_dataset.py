"""`load()` for detection jobs and multi-label columns.

Detection elements are dicts: `image` (decoded uint8 [H, W, C], or resized with `image_size`; boxes are
normalised, so resizing keeps them valid), `boxes` float32 [N, 4] in TensorFlow's [ymin, xmin, ymax, xmax]
order (tf.image.draw_bounding_boxes, tf.image.crop_and_resize), `classes` int64 [N] (label_map.pbtxt
ids, from 1), `class_text`, `source_id` (decimal id text), `uri` (the image URI), `image_height`,
`image_width`. Batched, `boxes` and `classes` are ragged. `as_supervised=True` gives (image, {"boxes",
"classes"}). Dataset jobs (COCO, VOC, YOLO) add `masks` uint8 [N, H, W] (one 0/1 mask per object, at
the record's image size; [0, H, W] when the dataset has no masks), `is_crowd`, `area`, `difficult`, and
`segmentation`: the semantic mask uint8 [H, W] of class ids ([0, 0] when the image has none); batched,
masks are ragged. Jobs written before `image/uri` existed held the URI in `image/source_id`: their `uri` is that.
"""
from __future__ import annotations

from typing import Any, Mapping

from tfrecorder.format import detection_keys
from tfrecorder.reading.dataset_images import decode_image, rebatch
from tfrecorder.reading.pipeline_options import pipeline_options
from tfrecorder.format.finished_job import JobInfo


def is_detection_job(job: JobInfo) -> bool:
    return job.metadata.get("task") == detection_keys.TASK


def uri_key(job: JobInfo) -> str:
    """The record key holding the image URI: `image/uri`, or `image/source_id` in jobs written before it existed."""
    return detection_keys.URI if detection_keys.URI in job.features else detection_keys.SOURCE_ID


def _parse_spec(tf, job: JobInfo) -> dict[str, Any]:
    scalars = {detection_keys.ENCODED: tf.string, detection_keys.FORMAT: tf.string, detection_keys.HEIGHT: tf.int64,
               detection_keys.WIDTH: tf.int64, detection_keys.SOURCE_ID: tf.string, uri_key(job): tf.string}
    lists = {detection_keys.XMIN: tf.float32, detection_keys.YMIN: tf.float32, detection_keys.XMAX: tf.float32,
             detection_keys.YMAX: tf.float32, detection_keys.CLASS_LABEL: tf.int64, detection_keys.CLASS_TEXT: tf.string}
    if has_masks(job):
        lists.update({detection_keys.MASK: tf.string, detection_keys.IS_CROWD: tf.int64,
                      detection_keys.AREA: tf.float32, detection_keys.DIFFICULT: tf.int64})
    spec = {name: tf.io.FixedLenFeature([], dtype) for name, dtype in scalars.items()}
    spec.update({name: tf.io.VarLenFeature(dtype) for name, dtype in lists.items()})
    if has_masks(job):
        spec[detection_keys.SEGMENTATION] = tf.io.FixedLenFeature([], tf.string, default_value="")
    return spec


def has_masks(job: JobInfo) -> bool:
    """Whether a detection job is a dataset job, whose records hold masks (COCO, VOC, YOLO)."""
    return detection_keys.MASK in job.features


def decode_masks(tf, pngs, height, width):
    """PNG instance masks → uint8 [N, H, W] (N may be 0)."""
    def decode(data):
        return tf.io.decode_png(data, channels=1)[..., 0]

    count = tf.shape(pngs)[0]
    return tf.cond(count > 0,
                   lambda: tf.reshape(tf.map_fn(decode, pngs, fn_output_signature=tf.TensorSpec([None, None], tf.uint8)),
                                      tf.stack([count, tf.cast(height, tf.int32), tf.cast(width, tf.int32)])),
                   lambda: tf.zeros(tf.stack([0, tf.cast(height, tf.int32), tf.cast(width, tf.int32)]), tf.uint8))


def decode_segmentation(tf, png):
    """The semantic mask PNG → uint8 [H, W] of class ids; [0, 0] when the record has none."""
    return tf.cond(tf.strings.length(png) > 0, lambda: tf.io.decode_png(png, channels=1)[..., 0],
                   lambda: tf.zeros([0, 0], tf.uint8))


def detection_dataset(job: JobInfo, split: str, *, batch_size, shuffle_buffer, repeat, decode_images, image_size,
                      as_supervised, deterministic, channels, drop_remainder, seed):
    """The tf.data pipeline of one split of a detection job (see the module docstring for elements)."""
    import tensorflow as tf

    autotune = tf.data.AUTOTUNE
    spec = _parse_spec(tf, job)
    uri = uri_key(job)
    with_masks = has_masks(job)

    def parse(record):
        parsed = tf.io.parse_single_example(record, spec)
        dense = {name: tf.sparse.to_dense(value) if isinstance(value, tf.SparseTensor) else value
                 for name, value in parsed.items()}
        boxes = tf.stack([dense[detection_keys.YMIN], dense[detection_keys.XMIN], dense[detection_keys.YMAX], dense[detection_keys.XMAX]],
                         axis=-1)
        image = dense[detection_keys.ENCODED]
        if decode_images:
            image = decode_image(image, dense[detection_keys.FORMAT], dense[detection_keys.HEIGHT], dense[detection_keys.WIDTH],
                                 image_size, channels)
        masks = {}
        if with_masks:
            masks = {"masks": decode_masks(tf, dense[detection_keys.MASK], dense[detection_keys.HEIGHT],
                                           dense[detection_keys.WIDTH])}
        if as_supervised:
            return image, {"boxes": boxes, "classes": dense[detection_keys.CLASS_LABEL], **masks}
        element = {"image": image, "boxes": boxes, "classes": dense[detection_keys.CLASS_LABEL],
                   "class_text": dense[detection_keys.CLASS_TEXT], "source_id": dense[detection_keys.SOURCE_ID],
                   "uri": dense[uri], "image_height": dense[detection_keys.HEIGHT],
                   "image_width": dense[detection_keys.WIDTH], **masks}
        if with_masks:
            element.update(is_crowd=dense[detection_keys.IS_CROWD], area=dense[detection_keys.AREA],
                           difficult=dense[detection_keys.DIFFICULT],
                           segmentation=decode_segmentation(tf, dense[detection_keys.SEGMENTATION]))
        return element

    files = job.shard_paths(split)
    paths = tf.data.Dataset.from_tensor_slices(files)
    if shuffle_buffer:
        paths = paths.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    compression = "GZIP" if job.compression == "gzip" else None
    ds = tf.data.TFRecordDataset(paths, compression_type=compression, num_parallel_reads=autotune)
    if shuffle_buffer:
        ds = ds.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    if repeat:
        ds = ds.repeat()
    ds = ds.map(parse, num_parallel_calls=autotune, deterministic=deterministic)
    if batch_size:
        dense_images = ("image",) if decode_images and image_size and not as_supervised else ()
        ds = rebatch(tf, ds, batch_size, drop_remainder, ragged=True, image_keys=dense_images)
    return ds.prefetch(autotune).with_options(pipeline_options(tf, deterministic))


def multi_hot_columns(job: JobInfo) -> dict[str, int]:
    """MultiLabel columns of a job → number of classes (its vocabulary size)."""
    vocabularies: Mapping[str, list] = job.metadata.get("vocabularies", {})
    return {name: len(vocabularies.get(name, [])) for name, feature in job.features.items()
            if feature.get("multi_label")}


def to_multi_hot(features: dict, columns: Mapping[str, int]) -> dict:
    """Replace each multi-label index list ([batch, (n)] ragged) by a float32 [batch, num_classes] vector."""
    import tensorflow as tf

    for name, depth in columns.items():
        indices = features[name]
        dense = indices.to_tensor(default_value=-1) if isinstance(indices, tf.RaggedTensor) else indices
        features[name] = tf.minimum(tf.reduce_sum(tf.one_hot(dense, depth, dtype=tf.float32), axis=-2), 1.0)
    return features
