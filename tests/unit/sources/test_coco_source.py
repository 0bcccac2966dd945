"""tfrecorder.sources.coco_source: a COCO file opened from a sample, read by workers as three streamed parts."""
from __future__ import annotations

import pickle

import pytest

from support.datasets import scenes, write_coco
from tfrecorder.rows.dataset_records import DATASET_COLUMNS, dataset_schema
from tfrecorder.sources import coco_source
from tfrecorder.sources.source_protocol import REASONED


def test_open_and_read_every_part(tmp_path):
    path = write_coco(tmp_path, scenes(4))
    table = coco_source.open_coco(str(path))
    assert table.columns == list(DATASET_COLUMNS) and len(table.sample) == 4 and table.rows_estimated
    assert table.rows_estimate == max(4, path.stat().st_size // coco_source.BYTES_PER_RECORD)
    assert table.base_dir == str(tmp_path / "train")  # annotations/instances_train.json → train/
    assert table.worker_files() == [str(path)]
    rows = pickle.loads(pickle.dumps(table.row_source(dataset_schema(), "")))
    assert rows.known_parts() == ["categories", "images", "annotations"] == rows.plan_parts([])
    counts = {part: len(list(rows.read_part(part, table.columns, dataset_schema()))) for part in rows.known_parts()}
    assert counts == {"categories": 3, "images": 4, "annotations": 6}
    assert not rows.reads_batches
    with pytest.raises(NotImplementedError):
        rows.read_batches("images", table.columns, dataset_schema(), 10)


def test_image_root_and_default_root(tmp_path):
    path = write_coco(tmp_path, scenes(2))
    assert coco_source.open_coco(str(path), image_root=str(tmp_path / "elsewhere")).base_dir == str(tmp_path / "elsewhere")
    loose = tmp_path / "loose.json"
    loose.write_text(path.read_text())
    assert coco_source.default_image_root(str(loose)) == str(tmp_path)


def test_not_coco_and_bad_items(tmp_path):
    other = tmp_path / "table.csv"
    other.write_text("a,b\n")
    assert coco_source.open_coco(str(other)) is None
    path = tmp_path / "instances.json"
    path.write_text('{"images": [{"id": 1, "file_name": "a.jpg"}, {"file_name": "b.jpg"}], "annotations": []}')
    rows = coco_source.open_coco(str(path)).rows
    items = list(rows.read_part("images", [], dataset_schema()))
    assert items[1][0] == REASONED and items[1][1][1] == "invalid image: no id"
