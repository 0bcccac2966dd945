"""Hand-built job directories: records written with tfrecorder.format.example_encoder + tfrecord_format and a
hand-written metadata.json, for feature-spec cases the converter does not (yet) produce."""
from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Mapping, Sequence

from tfrecorder.format.example_encoder import Feature, encode_example
from tfrecorder.format.framing import write_record


def float64_bits(value: float) -> int:
    """The IEEE-754 bit pattern of a float64 as a signed int64 (how "float64_bits" stores it)."""
    return struct.unpack("<q", struct.pack("<d", value))[0]


def write_job(directory: Path, features: Mapping[str, dict], rows: Sequence[Mapping[str, Feature]],
              schema: Mapping[str, str], vocabularies: Mapping[str, list] | None = None) -> Path:
    """One TRAIN shard holding `rows` (feature name → Feature; absent names are left out)."""
    directory.mkdir(parents=True, exist_ok=True)
    shard = "train-00000-of-00001.tfrecord"
    with open(directory / shard, "wb") as stream:
        for row in rows:
            write_record(stream, encode_example(row))
    size = (directory / shard).stat().st_size
    metadata = {
        "format_version": 1, "compression": None, "schema": dict(schema), "features": dict(features),
        "vocabularies": dict(vocabularies or {}), "rows_in": len(rows), "records_written": len(rows),
        "discarded": 0, "discard_reasons": {},
        "splits": {"TRAIN": {"records": len(rows), "bytes": size, "unknown_labels": 0,
                             "shards": [{"file": shard, "records": len(rows), "bytes": size}]}},
    }
    (directory / "metadata.json").write_text(json.dumps(metadata, indent=2))
    return directory


def shard_files(job: Path) -> list[Path]:
    """Every shard file metadata.json lists, in split order."""
    metadata = json.loads((job / "metadata.json").read_text())
    return [job / s["file"] for info in metadata["splits"].values() for s in info["shards"]]


def largest_shard(job: Path) -> Path:
    """The biggest listed shard: the one to damage, as it holds several records."""
    return max(shard_files(job), key=lambda p: p.stat().st_size)


def index_of(job: Path, shard: Path) -> Path:
    """The index file of a shard (index/<shard name>.index)."""
    return job / "index" / (shard.name + ".index")
