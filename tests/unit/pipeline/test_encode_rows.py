"""beam_pipelines.steps.encode_rows: image read problems of a row are discards, storage failures fail the bundle."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from beam_pipelines.steps import encode_rows
from tfrecorder.errors import RowError


def test_read_image_discards_problems_of_the_path_and_raises_storage_failures(tmp_path):
    image = tmp_path / "a.jpg"
    image.write_bytes(b"bytes")
    assert encode_rows.read_image(str(image)) == b"bytes"
    row_problems = {
        str(tmp_path / "missing.jpg"): "missing file: ",
        str(image / "under-a-file.jpg"): "missing file: ",
        str(tmp_path): "not a file: ",
        str(tmp_path / ("x" * 300)): "invalid path: ",
        "nul\x00byte.jpg": "invalid path: ",
        "/proc/self/mem": r"not a regular file: /proc/self/mem is a kernel interface file",  # EIO if read
        "/dev/zero": "not a regular file: /dev/zero is a character device",  # endless if read
        "https://example.com/a.jpg": "unsupported image location: http\\(s\\) URLs are not read; copy the images",
        "ftp://example.com/a.jpg": "unsupported image location: no installed file system reads ftp:// URLs",
    }
    for uri, reason in row_problems.items():
        with pytest.raises(RowError, match=f"^{reason}"):
            encode_rows.read_image(uri)
    with pytest.raises(RowError, match=r"^file too large: .*a.jpg holds 5 bytes, more than 4 \(max_image_bytes\)"):
        encode_rows.read_image(str(image), max_bytes=4)
    assert encode_rows.read_image(str(image), max_bytes=5) == b"bytes"


EXHAUSTED = """
import os, resource, sys
from beam_pipelines.steps import encode_rows
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
try:
    encode_rows.read_image(sys.argv[1])
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def test_a_failure_of_the_worker_not_of_the_file_raises_storage_read_error(tmp_path):
    """A process out of file descriptors cannot read any image: the job fails (StorageReadError), no
    row is discarded for it."""
    image = tmp_path / "a.jpg"
    image.write_bytes(b"bytes")
    done = subprocess.run([sys.executable, "-c", EXHAUSTED, str(image)], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == f"StorageReadError [Errno 24] could not read {image}: Too many open files", done.stderr


def _encode_bundle(tmp_path, processes: int, batches, **fields):
    from apache_beam.pvalue import TaggedOutput

    from beam_pipelines.steps.collect_statistics import QUALITY, STATISTICS_KEY
    from beam_pipelines.steps.encode_rows import EncodeAndWritePieces
    from support.job_configs import job_config
    from tfrecorder.core.schema import Schema

    fields = {"schema": Schema({"image_uri": "ImageUri", "label": "StringLabel"}), "columns": ("image_uri", "label"),
              **fields}
    config = job_config(temp_dir=str(tmp_path / "job"), encode_processes=processes, near_duplicate_distance=0,
                        **fields)
    encode = EncodeAndWritePieces(config)
    encode.setup()
    try:
        encode.start_bundle()
        processed = [out for batch in batches for out in encode.process(batch, {"label": ["a"]})]
        finished = list(encode.finish_bundle())
    finally:
        encode.teardown()
    tagged = [(out.tag, getattr(out.value, "windows", None) is not None and out.value.value or out.value)
              for out in processed + finished if isinstance(out, TaggedOutput)]  # finish_bundle's carry windows
    quality = [value for tag, value in tagged if tag == QUALITY]
    keys = [entry for key, value in quality if key != STATISTICS_KEY for entry in value]
    statistics = [value for key, value in quality if key == STATISTICS_KEY]
    return keys, statistics


def test_written_rows_feed_statistics_and_digests_in_process_and_in_forked_encoders(tmp_path):
    from support import imagegen

    image = imagegen.odd_images()["rgb.jpg"][0]
    imagegen.write_files(tmp_path, {"a.jpg": image, "b.jpg": image})
    batches = [[("TRAIN", {"image_uri": str(tmp_path / "a.jpg"), "label": "a"})],
               [("TEST", {"image_uri": str(tmp_path / "b.jpg"), "label": "a"}),
                ("TRAIN", {"image_uri": str(tmp_path / "missing.jpg"), "label": "a"})]]
    for processes in (1, 2):
        keys, statistics = _encode_bundle(tmp_path / str(processes), processes, batches)
        assert sorted((split, row.rsplit("/", 1)[-1]) for _digest, split, row in keys) == [("TEST", "b.jpg"), ("TRAIN", "a.jpg")]
        assert len({digest for digest, _s, _r in keys}) == 1  # the same bytes
        rows: dict = {}
        for found in statistics:  # one per bundle, or one per forked child
            for split, count in found.rows.items():
                rows[split] = rows.get(split, 0) + count
        assert rows == {"TRAIN": 1, "TEST": 1}, processes


def test_a_row_whose_image_is_a_base_key_is_discarded_as_already_in_base(tmp_path):
    from beam_pipelines.steps.encode_rows import EncodeAndWritePieces
    from support.job_configs import job_config
    from tfrecorder.format.image_keys import digest_key, key_hash, uri_key

    from tfrecorder.core.schema import Schema

    schema = Schema({"split": "SplitKey", "image_uri": "ImageUri", "label": "StringLabel"})
    step = EncodeAndWritePieces(job_config(temp_dir=str(tmp_path), base_dir=str(tmp_path), schema=schema))
    step.schema = step.config.schema
    column = step.schema.image_columns[0]
    step.base_keys = {key_hash(uri_key("old.png")): "pets-1", key_hash(digest_key(b"same bytes")): "pets-1"}
    fetched = {str(tmp_path / "new.png"): b"same bytes", str(tmp_path / "other.png"): b"other"}
    assert step._base_duplicate({column: "old.png"}, {}) == "already in base: pets-1"
    assert step._base_duplicate({column: str(tmp_path / "new.png")}, fetched) == "already in base: pets-1"
    assert step._base_duplicate({column: str(tmp_path / "other.png")}, fetched) is None
    assert step._base_duplicate({column: None}, fetched) is None


def test_unassigned_rows_take_the_split_of_their_image_bytes_and_drop_mode_keeps_their_places(tmp_path):
    """Issue 29: byte-identical images under different URIs get one split (chosen from their digest, not
    the URI the prepare step hashed); with duplicates="drop" each digest entry carries the row's place."""
    from support import imagegen
    from tfrecorder.core.schema import Schema
    from tfrecorder.core.splits import split_of_digest

    image = imagegen.odd_images()["rgb.jpg"][0]
    names = [f"copy-{i}.jpg" for i in range(12)]
    imagegen.write_files(tmp_path, {name: image for name in names})
    schema = Schema({"image_uri": "ImageUri", "split": "SplitKey", "label": "StringLabel"})
    rows = [("TRAIN" if i % 3 else "TEST", {"image_uri": str(tmp_path / name), "split": "UNASSIGNED" if i else "TEST",
                                            "label": "a"}) for i, name in enumerate(names)]
    for processes in (1, 2):
        keys, _statistics = _encode_bundle(tmp_path / str(processes), processes, [rows[:6], rows[6:]], schema=schema,
                                           columns=("image_uri", "split", "label"), content_splits=True,
                                           duplicates="drop")
        digest = keys[0][0]
        by_row = {row.rsplit("/", 1)[-1]: (split, place) for _digest, split, row, place in keys}
        assert by_row["copy-0.jpg"][0] == "TEST"  # an assigned split is kept
        assert {split for name, (split, _) in by_row.items() if name != "copy-0.jpg"} == {split_of_digest(digest)}
        assert len(by_row) == 12 and all(place[0] for _s, place in by_row.values())
        assert sorted((place[0], place[1]) for _s, place in by_row.values()) == sorted(set(
            (place[0], place[1]) for _s, place in by_row.values()))  # one record per place
        assert by_row["copy-3.jpg"][1][3] == (str(tmp_path / "copy-3.jpg"), "UNASSIGNED", "a")


def _image_part_step(tmp_path, validate: str, unit_rows: int):
    """An EncodeImageParts step set up in this process over good.jpg / bad.jpg in `tmp_path`, its units
    `unit_rows` rows of one batch each, and a PartWork to collect into."""
    import os

    from beam_pipelines.steps import part_commits
    from support import imagegen
    from support.job_configs import job_config
    from tfrecorder.core.schema import Schema

    good = imagegen.odd_images()["rgb.jpg"][0]
    imagegen.write_files(tmp_path, {"good.jpg": good, "bad.jpg": good[: len(good) // 2] + b"\0" * 64})
    schema = Schema({"split": "SplitKey", "image_uri": "ImageUri", "label": "StringLabel"})
    config = job_config(temp_dir=str(tmp_path), base_dir=str(tmp_path), schema=schema, validate=validate,
                        columns=("split", "image_uri", "label"), statistics=False, batch_size=unit_rows,
                        unit_batches=1)
    for directory in config.scratch_dirs:
        os.makedirs(directory, exist_ok=True)
    step = encode_rows.EncodeImageParts(config)
    step.setup()
    return step, part_commits.PartWork(config)


def test_a_part_decodes_its_next_batch_while_encoding_and_keeps_its_verdicts(tmp_path):
    """validate="decode": each batch of a part is read and decoding before the batch before it is
    encoded (_encode_unit returns the batch still to encode); both kinds of discards (prepare_row's,
    at once; TensorFlow's verdict, as its unit is encoded) are the part's, and every written image is
    one TensorFlow decodes."""
    from beam_pipelines.steps.discard_files import _entries

    step, found = _image_part_step(tmp_path, "decode", unit_rows=2)
    assert step._decoder is not None
    kinds = ["good", "bad", "split", "good", "good", "bad", "missing", "good", "split"]
    rows = [{"split": "NOPE" if kind == "split" else "TRAIN", "image_uri": f"{kind}.jpg", "label": f"r{i}"}
            for i, kind in enumerate(kinds)]
    units = encode_rows.SplitUnits(2)
    ahead, started = None, 0
    for row in rows:
        unit = step._prepared_into(row, units, found)
        if unit:
            ahead = step._encode_unit(unit, {"label": []}, found, ahead)
            assert ahead is not None and ahead.images[1] is not None  # started: decoding meanwhile
            started += 1
    rest = units.rest()
    assert started == 3 and [len(unit) for unit in rest] == [1]  # 7 TRAIN rows: three full units and one row
    ahead = step._encode_unit(rest[0], {"label": []}, found, ahead)
    step._encode_started(ahead, {"label": []}, found)
    step.teardown()
    discarded = {cells[2]: reason.split(":")[0] for reason, _row, cells in _entries(found.discards.close().path)}
    assert discarded.keys() == {"r1", "r2", "r5", "r6", "r8"}
    assert discarded["r2"] == discarded["r8"] == "unknown split" and discarded["r6"] == "missing file"
    assert discarded["r1"] == discarded["r5"] and discarded["r1"] not in ("unknown split", "missing file")
    assert sum(piece.records for piece in found.pieces) == 4  # the four good rows


def test_a_units_rows_are_of_one_split_so_each_split_has_as_few_pieces_as_its_rows_need(tmp_path):
    """Rows of the part's splits interleaved: every piece holds the rows of one unit of one split, so a
    split of few rows is not spread over every unit of the part (its pieces would be copied together at
    the end instead of each becoming a shard by a link)."""
    step, found = _image_part_step(tmp_path, "header", unit_rows=4)
    splits = ["VALIDATION" if i % 10 in (4, 7) else "TEST" if i % 10 == 9 else "TRAIN" for i in range(40)]
    units = encode_rows.SplitUnits(4)
    for i, split in enumerate(splits):
        unit = step._prepared_into({"split": split, "image_uri": "good.jpg", "label": f"r{i}"}, units, found)
        if unit:
            assert len({prepared_split for prepared_split, _row in unit}) == 1
            step._encode_unit(unit, {"label": []}, found)
    for unit in units.rest():
        step._encode_unit(unit, {"label": []}, found)
    step.teardown()
    records = {}
    for piece in found.pieces:
        records.setdefault(piece.split, []).append(piece.records)
    assert {split: sorted(counts, reverse=True) for split, counts in records.items()} == {
        "TRAIN": [4] * 7, "VALIDATION": [4, 4], "TEST": [4]}


def test_split_units_fill_by_key_and_leave_the_rest_in_first_seen_order():
    units = encode_rows.SplitUnits(2)
    assert units.add("TRAIN", ("TRAIN", {"n": 0})) is None
    assert units.add(None, ("TEST", {"n": 1})) is None  # split from the image bytes: a unit of its own
    assert units.add("VALIDATION", ("VALIDATION", {"n": 2})) is None
    assert units.add("TRAIN", ("TRAIN", {"n": 3})) == [("TRAIN", {"n": 0}), ("TRAIN", {"n": 3})]
    assert units.add("TRAIN", ("TRAIN", {"n": 4})) is None
    assert units.rest() == [[("TEST", {"n": 1})], [("VALIDATION", {"n": 2})], [("TRAIN", {"n": 4})]]
    assert units.rest() == []
    assert units.add("TRAIN", ("TRAIN", {"n": 5})) is None and units.add("TEST", ("TEST", {"n": 6})) is None
    assert units.rest() == [[("TRAIN", {"n": 5}), ("TEST", {"n": 6})]]  # they fit in one unit: one
    assert units.add("TRAIN", ("TRAIN", {"n": 7})) is None and units.add("TEST", ("TEST", {"n": 8})) is None
    assert units.rest(merged=False) == [[("TRAIN", {"n": 7})], [("TEST", {"n": 8})]]  # for forked processes


def test_a_small_parts_pieces_are_the_same_whether_its_splits_are_one_unit_or_one_each(tmp_path):
    """The units left when the part ends are encoded as one when they fit in one: each split still gets
    one piece of its rows, in order, byte for byte the pieces of one unit a split."""
    splits = ["TRAIN", "VALIDATION", "TRAIN", "TEST", "TRAIN", "VALIDATION"]
    prepared = [(split, {"split": split, "image_uri": "good.jpg", "label": f"r{i}"}) for i, split in enumerate(splits)]
    one_each = [[row for row in prepared if row[0] == split] for split in ("TRAIN", "VALIDATION", "TEST")]
    units = encode_rows.SplitUnits(8)
    for split, row in prepared:
        assert units.add(split, (split, row)) is None
    together = units.rest()
    assert together == [[row for unit in one_each for row in unit]]
    contents = []
    for name, rest in (("together", together), ("one each", one_each)):
        step, found = _image_part_step(tmp_path / name, "header", unit_rows=8)
        for unit in rest:
            step._encode_unit(unit, {"label": [f"r{i}" for i in range(len(splits))]}, found)  # records differ
        step.teardown()
        contents.append(sorted((piece.split, Path(piece.path).read_bytes()) for piece in found.pieces))
    assert contents[0] == contents[1] and [split for split, _data in contents[0]] == ["TEST", "TRAIN", "VALIDATION"]
