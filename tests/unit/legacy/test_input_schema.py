"""tfrecorder.legacy.input_schema: TFRecorder 2.0's Schema class and IMAGE_CSV_SCHEMA."""
from __future__ import annotations

import pytest

import tfrecorder
from tfrecorder.legacy import input_schema
from tfrecorder.core import types


def test_input_schema_module():
    schema = input_schema.Schema({
        'split': types.SplitKey,
        'x': types.FloatInput,
        'y': types.IntegerInput,
        'label': types.IntegerLabel,
    })
    assert schema.split_key == 'split' and schema.label_key == 'label' and schema.image_uri_key is None
    assert list(schema.get_input_keys()) == ['split', 'x', 'y', 'label']
    assert schema.input_schema_map['x'] is types.FloatInput
    image = input_schema.IMAGE_CSV_SCHEMA
    assert (image.split_key, image.image_uri_key, image.label_key) == ('split', 'image_uri', 'label')
    assert isinstance(image, tfrecorder.Schema)
    with pytest.raises(AttributeError, match="tf.Transform"):
        image.get_input_coder()
    hint: dict[str, types.SupportedType] = {'split': types.SplitKey}  # 2.0 annotated schema maps so
    assert input_schema.Schema(hint).split_key == 'split'


def test_last_image_and_label_columns_are_the_keys_and_unknown_attributes_fail_plainly():
    schema = input_schema.Schema({"a": types.ImageUri, "b": types.ImageUri, "l1": types.StringLabel,
                                  "l2": types.IntegerLabel, "x": types.FloatInput})
    assert (schema.image_uri_key, schema.label_key, schema.split_key) == ("b", "l2", None)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        schema.nope
