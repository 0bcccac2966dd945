"""tfrecorder.rows.detection_statistics: a detection job's statistics rows, merged, as statistics.json."""
import pytest

from tfrecorder.format.statistics_files import to_proto
from tfrecorder.rows.dataset_statistics import merge_all
from tfrecorder.rows.detection_statistics import DetectionStatistics, image_row


def test_image_row_gives_labels_areas_and_pixel_aspects():
    row = image_row(["cat", "cat"], [(0.0, 0.0, 0.5, 0.5), (0.1, 0.2, 0.1, 0.6)], height=100, width=200)
    assert row["label"] == ["cat", "cat"]
    assert row["box_area"] == pytest.approx([0.25, 0.0])
    assert row["box_aspect"] == pytest.approx([2.0, 0.0])  # 100x50 px; a zero-width box: 0
    assert image_row([], [(0.1, 0.5, 0.3, 0.5)], 10, 10)["box_aspect"] == []  # zero height: left out


def _statistics(split="TRAIN"):
    found = DetectionStatistics()
    found.add_rows(split, [image_row(["cat", "cat", "dog"], [(0, 0, 1, 1)] * 3, 40, 60), image_row([], [], 30, 30)],
                   {"image": [("jpeg", 40, 60, 3, 1000), ("png", 30, 30, 3, 500)]})
    return found


def test_merged_statistics_count_every_box_and_the_classes_missing_from_a_split():
    merged = merge_all([_statistics(), _statistics(), _statistics("TEST")], schema=None)
    assert isinstance(merged, DetectionStatistics)
    document = merged.to_json({"label": ["bird", "cat", "dog"]})
    assert document["task"] == "object_detection"
    train = document["splits"]["TRAIN"]
    assert (train["images"], train["rows"], train["boxes"]) == (4, 4, 6)
    labels = train["features"]["label"]
    assert labels["labels"]["counts"] == [{"value": "cat", "count": 4}, {"value": "dog", "count": 2}]
    assert labels["labels"]["missing_classes"] == ["bird"]
    assert (labels["list_lengths"]["min"], labels["list_lengths"]["max"]) == (0, 3)
    assert train["features"]["image"]["image"]["bytes"]["max"] == 1000
    assert document["splits"]["TEST"]["boxes"] == 3
    assert to_proto(document)  # statistics.pb takes the same document
