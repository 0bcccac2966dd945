"""TFRecorder 2.0's `input_schema` module: `Schema` and `IMAGE_CSV_SCHEMA`, as its code used them.

    from tfrecorder.legacy import input_schema

    from tfrecorder.core import types
    schema = input_schema.Schema({"split": types.SplitKey, "x": types.FloatInput, "label": types.IntegerLabel})
    df.tensorflow.to_tfr(output_dir, schema=schema)

`input_schema.Schema` is `tfrecorder.Schema` plus TFRecorder 2.0's attributes (`split_key`,
`image_uri_key`, `label_key`, `input_schema_map`, `get_input_keys()`). Its tf.Transform methods
(`get_input_coder`, `get_pre_tft_metadata`) have no counterpart here: this package does not use
tf.Transform, and calling them says so.
"""
from __future__ import annotations

from typing import Any, KeysView, Mapping, Optional

from tfrecorder.core import schema as _schema, types

_TFT_METHODS = ("get_input_coder", "get_pre_tft_metadata", "pre_tft_schema_map")


class Schema(_schema.Schema):
    """A column → role mapping, usable wherever `tfrecorder.Schema` is, with TFRecorder 2.0's attributes."""

    def __init__(self, schema_map: Mapping[str, Any]) -> None:
        super().__init__(schema_map)
        self.input_schema_map = dict(self.items())

    def _last(self, wanted) -> Optional[str]:
        found = [name for name, role in self.items() if wanted(role)]
        return found[-1] if found else None

    @property
    def split_key(self) -> Optional[str]:
        return self.split_column

    @property
    def image_uri_key(self) -> Optional[str]:
        return self._last(lambda role: role == types.ImageUri)

    @property
    def label_key(self) -> Optional[str]:
        return self._last(lambda role: role.is_label)

    def get_input_keys(self) -> KeysView[str]:
        return self.input_schema_map.keys()

    def __getattr__(self, name: str) -> Any:
        if name in _TFT_METHODS:
            raise AttributeError(
                f"input_schema.Schema.{name} was TFRecorder 2.0's tf.Transform plumbing; this package writes "
                "records without tf.Transform, so there is no coder or transform metadata to return. Read the "
                "records with tfrecorder.load(tfrecord_dir) (feature spec from metadata.json)"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


IMAGE_CSV_SCHEMA = Schema({"split": types.SplitKey, "image_uri": types.ImageUri, "label": types.StringLabel})
"""TFRecorder 2.0's default schema: the AutoML Vision image CSV (split, image_uri, label)."""
