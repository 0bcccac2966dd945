"""TFRecorder 2.0 calls that run unchanged: its extra `convert()` keywords and the result keys its
code read (`convert_and_load()` is in tfrecorder.round_trip). What deliberately differs is listed in docs/coming-from-tfrecorder.md.
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Optional

import pandas as pd

from tfrecorder.io import storage


def legacy_arguments(source: Any, schema: Any, legacy: Mapping[str, Any]) -> tuple[Any, Any]:
    """Apply TFRecorder 2.0's `convert()` keywords `header=`, `names=` and `schema_map=`; returns (source, schema).

    `names` selects a DataFrame's columns; for a CSV, `header`/`names` are passed to pandas.read_csv
    as 2.0 did (the file is then read by the driver, like a DataFrame: fine for the tables 2.0
    handled, not for 100M rows — give such a CSV a header row instead). `header=None` without names
    means the image CSV columns split,image_uri,label, as in 2.0. Any other keyword is a TypeError,
    as it would be without this.
    """
    options = dict(legacy)
    header = options.pop("header", "infer")
    names = options.pop("names", None)
    schema_map = options.pop("schema_map", None)
    if options:
        raise TypeError(f"convert() got an unexpected keyword argument {next(iter(options))!r}")
    if schema_map is not None:
        if schema is not None:
            raise TypeError("convert() got both schema= and schema_map= (TFRecorder 2.0's README name for it)")
        schema = schema_map
    if isinstance(source, pd.DataFrame):
        return (source[list(names)] if names is not None else source), schema
    if header == "infer" and names is None:
        return source, schema
    path = os.fspath(source)
    if storage.is_dir(path):
        raise ValueError("header= and names= apply to a CSV file or DataFrame, not an image directory")
    if header is None and not names:
        names = ["split", "image_uri", "label"]
    with storage.open_read(path) as stream:
        return pd.read_csv(stream, header=header, names=names), schema


# TFRecorder 2.0's DataFrame.tensorflow.to_tfr(output_dir, …) parameters, in their positional order.
TO_TFR_ORDER = ("schema", "runner", "project", "region", "tfrecorder_wheel", "dataflow_options", "job_label",
                "compression", "num_shards")


def legacy_positional(args: tuple, options: Mapping[str, Any]) -> dict[str, Any]:
    """`options` plus positional `args` named in TFRecorder 2.0's `to_tfr` order."""
    if len(args) > len(TO_TFR_ORDER):
        raise TypeError(f"to_tfr() takes at most {len(TO_TFR_ORDER) + 1} positional arguments after self")
    named = dict(zip(TO_TFR_ORDER, args))
    twice = sorted(set(named) & set(options))
    if twice:
        raise TypeError(f"to_tfr() got multiple values for argument {twice[0]!r}")
    return {**options, **named}


def legacy_result_value(fields: Mapping[str, Any], key: str) -> Any:
    """Result keys TFRecorder 2.0 returned: `metrics` {rows, good_images, bad_images} and `dataflow_url`."""
    if key == "dataflow_url" and "console_url" in fields:
        return fields["console_url"]
    if key == "metrics":
        if "written" not in fields:
            raise KeyError("metrics: the job has not finished; call result.wait() first")
        images = any(role == "ImageUri" for role in fields.get("metadata", {}).get("schema", {}).values())
        return {
            "rows": fields["rows_in"],
            "good_images": sum(fields["written"].values()) if images else None,
            "bad_images": fields["discarded"] if images else None,
        }
    raise KeyError(key)


def legacy_note(command: str) -> Optional[str]:
    """What the command line says when TFRecorder 2.0's `create-tfrecords` name is used."""
    if command != "create-tfrecords":
        return None
    return ("tfrecorder: note: create-tfrecords is TFRecorder 2.0's name for `tfrecorder convert`. Shards are now "
            "uncompressed unless --compression gzip, images keep their original bytes, and the job directory is "
            "named <job_label>-<timestamp>; see docs/coming-from-tfrecorder.md.")
