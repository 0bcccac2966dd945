"""beam_pipelines.graphs.detection_graph: box rows to Object Detection API records, every row accounted for."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import tfrecorder
from tfrecorder.format import detection_keys
from support.boxes import box_table
from support.detection_records import discards_of, read_od_records


def test_detection_job_writes_od_api_records(detection_job, photos, tf):
    tfrecord_dir = detection_job["tfrecord_dir"]
    records = read_od_records(tf, tfrecord_dir)
    assert set(records) == {str(photos["a.jpg"]), str(photos["b.png"]), str(photos["c.jpg"])}
    a = records[str(photos["a.jpg"])]
    assert a["split"] == "TRAIN" and a["image/height"] == 40 and a["image/width"] == 60
    assert a["image/format"] == b"jpeg" and a["image/filename"] == b"a.jpg"
    assert a["image/source_id"] == detection_keys.source_id(str(photos["a.jpg"])).encode()
    assert a["image/encoded"] == photos["a.jpg"].read_bytes()  # original bytes
    order = np.argsort(a["image/object/class/text"])  # box order within an image follows the rows
    assert list(a["image/object/class/text"][order]) == [b"cat", b"dog"]
    assert list(a["image/object/class/label"][order]) == [1, 2]  # cat=1, dog=2: sorted TRAIN names
    np.testing.assert_allclose(a["image/object/bbox/xmin"][order], [0.0, 0.1])
    np.testing.assert_allclose(a["image/object/bbox/ymax"][order], [1.0, 0.6])
    b = records[str(photos["b.png"])]
    assert list(b["image/object/class/label"]) == [1] and b["image/format"] == b"png"
    c = records[str(photos["c.jpg"])]
    assert c["split"] == "VALIDATION" and len(c["image/object/bbox/xmin"]) == 0


def test_detection_job_label_map_metadata_and_accounting(detection_job):
    tfrecord_dir = Path(detection_job["tfrecord_dir"])
    label_map = (tfrecord_dir / "label_map.pbtxt").read_text()
    assert label_map == "item {\n  id: 1\n  name: 'cat'\n}\nitem {\n  id: 2\n  name: 'dog'\n}\n"
    assert detection_keys.parse_label_map(label_map) == {1: "cat", 2: "dog"}
    metadata = json.loads((tfrecord_dir / "metadata.json").read_text())
    assert metadata["task"] == "detection"
    assert metadata["label_map"] == {"1": "cat", "2": "dog"} and metadata["vocabularies"] == {"label": ["cat", "dog"]}
    assert metadata["rows_in"] == 11 and metadata["rows_written"] == 4 and metadata["records_written"] == 3
    assert metadata["discarded"] == 7 and metadata["rows_written"] + metadata["discarded"] == metadata["rows_in"]
    assert metadata["features"]["image/object/bbox/xmin"] == {"dtype": "float32", "shape": None, "allow_missing": False}
    assert metadata["features"]["image/encoded"]["shape"] == []
    reasons = sorted(row["reason"] for row in discards_of(str(tfrecord_dir)))
    assert len(reasons) == 7
    assert sum(r.startswith("conflicting splits: rows of ") for r in reasons) == 2
    assert "invalid box: xmin 0.7 > xmax 0.3" in reasons
    assert "invalid box: xmin is not a number ('n/a')" in reasons
    assert "unknown label: 'owl' is not among the TRAIN labels" in reasons
    assert "box outside the image: xmax 1.5 not in [0, 1]" in reasons
    assert any(r.startswith(("corrupt image", "truncated image", "not an image")) for r in reasons)
    assert metadata["discard_reasons"]["conflicting splits"] == 2
    report = tfrecorder.verify(str(tfrecord_dir))  # every record parses with the job's own feature spec
    assert report.ok, report.all_problems


def test_bundle_replay_writes_each_image_once_and_counts_exactly(photos, tmp_path, tf):
    """Beam re-runs every bundle once (direct_runner_bundle_repeat=1): same records, same accounting."""
    result = tfrecorder.convert(box_table(photos), tmp_path, progress=False,
                                dataflow_options={"direct_runner_bundle_repeat": 1})
    metadata = result.metadata
    assert (metadata["rows_in"], metadata["rows_written"], metadata["records_written"], metadata["discarded"]) == \
        (11, 4, 3, 7)
    assert len(read_od_records(tf, result["tfrecord_dir"])) == 3
    assert len(discards_of(result["tfrecord_dir"])) == 7
    assert tfrecorder.verify(result["tfrecord_dir"]).ok
