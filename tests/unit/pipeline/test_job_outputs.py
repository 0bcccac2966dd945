"""beam_pipelines.graphs.job_outputs: the common tail assembles shards, writes discarded.csv and finalizes."""
from __future__ import annotations

import csv
import os

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.graphs.job_outputs import write_outputs
from beam_pipelines.steps.finalize_job import finalize_job
from beam_pipelines.steps.piece_files import PieceWriter
from tfrecorder.format import file_names
from tfrecorder.format.metadata_file import JobMetadata
from tfrecorder.format.framing import read_records
from support.job_configs import reserved_job


def test_pieces_and_discards_become_a_published_job(tmp_path):
    config = reserved_job(str(tmp_path / "out"), "tail", num_shards=2)
    final_dir, temp_dir = config.final_dir, config.temp_dir
    pieces = []
    for split, first, count in (("TRAIN", 0, 5), ("TRAIN", 5, 3), ("TEST", 8, 2)):
        writer = PieceWriter(config.pieces_dir, split)
        for n in range(first, first + count):
            writer.write(f"record {n}".encode())
        pieces.append(writer.close())
    read_discards = [({"split": "x", "n": 10, "label": "cat"}, "unknown split: 'x'")]
    encode_discards = [({"split": "TRAIN", "n": 11, "label": ""}, "empty label"),
                       ({"split": "TEST", "n": 12, "label": "cat"}, "missing file: a.jpg")]
    with beam.Pipeline("DirectRunner") as pipeline:
        found = {"Read": pipeline | "ReadDiscards" >> beam.Create(read_discards),
                 "Encode": pipeline | "EncodeDiscards" >> beam.Create(encode_discards)}
        published = write_outputs(pipeline, config, pipeline | "Pieces" >> beam.Create(pieces), found, finalize_job,
                                  {"label": ["cat"]}, 13)
        assert_that(published, equal_to([final_dir]))
    assert not os.path.exists(temp_dir)
    shards = sorted(name for name in os.listdir(final_dir) if name.endswith(".tfrecord"))
    assert shards == ["test-00000-of-00002.tfrecord", "test-00001-of-00002.tfrecord",
                      "train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"]
    records = []
    for name in shards:
        with open(os.path.join(final_dir, name), "rb") as stream:
            records.extend(read_records(stream))
    assert sorted(records) == sorted(f"record {n}".encode() for n in range(10))
    with open(os.path.join(final_dir, file_names.DISCARD_FILE), newline="") as stream:
        discarded = list(csv.DictReader(stream))
    assert sorted((row["n"], row["reason"]) for row in discarded) == [
        ("10", "unknown split: 'x'"), ("11", "empty label"), ("12", "missing file: a.jpg")]
    metadata = JobMetadata.read(final_dir).document
    assert (metadata["rows_in"], metadata["records_written"], metadata["discarded"]) == (13, 10, 3)
    assert metadata["discard_reasons"] == {"unknown split": 1, "empty label": 1, "missing file": 1}
