"""statistics.json and statistics.pb (tensorflow-metadata's DatasetFeatureStatisticsList) written and read back."""
import pyarrow as pa
from tensorflow_metadata.proto.v0 import statistics_pb2

from tfrecorder.core import types
from tfrecorder.core.schema import Schema
from tfrecorder.format.statistics_files import STATISTICS_PROTO_FILE, read_statistics, to_proto, write_statistics
from tfrecorder.rows.dataset_statistics import DatasetStatistics


def _document():
    schema = Schema({"image_uri": types.ImageUri, "label": types.StringLabel, "x": types.FloatInput,
                     "s": types.StringInput})
    stats = DatasetStatistics(schema)
    stats.add_rows("TRAIN", [{"image_uri": "a", "label": "cat", "x": 1.5, "s": "hi"}],
                   {"image_uri": [("jpeg", 10, 20, 3, 400)]})
    stats.add_batch("TEST", pa.RecordBatch.from_pydict({"label": ["dog"], "x": [2.0], "s": ["yo"]}))
    return stats.to_json({"label": ["cat", "dog"]})


def test_written_files_read_back_and_parse_as_tfdv_statistics(tmp_path):
    document = _document()
    write_statistics(str(tmp_path), document)
    assert read_statistics(str(tmp_path)) == document
    parsed = statistics_pb2.DatasetFeatureStatisticsList.FromString((tmp_path / STATISTICS_PROTO_FILE).read_bytes())
    assert [d.name for d in parsed.datasets] == ["TRAIN", "TEST"]
    train = {f.path.step[0]: f for f in parsed.datasets[0].features}
    assert train["x"].num_stats.mean == 1.5 and train["x"].num_stats.common_stats.num_non_missing == 1
    assert train["label"].string_stats.top_values[0].value == "cat"
    assert train["image_uri"].bytes_stats.max_num_bytes == 400 and train["image_uri/width"].num_stats.max == 20
    assert parsed.datasets[0].num_examples == 1


def test_jobs_without_statistics_read_none(tmp_path):
    assert read_statistics(str(tmp_path)) is None
    assert to_proto({}) == b""


def test_values_beyond_float_range_leave_their_moments_out():
    from tfrecorder.rows.data_sketches import NumericSketch

    summary = NumericSketch().add([-1.7e308, 1.7e308, 0.0]).summary()
    document = {"splits": {"TRAIN": {"rows": 3, "features": {"x": {"kind": "numeric", "count": 3, "missing": 0,
                                                                   "numeric": summary}}}}}
    parsed = statistics_pb2.DatasetFeatureStatisticsList.FromString(to_proto(document))
    stats = parsed.datasets[0].features[0].num_stats
    assert stats.max == 1.7e308 and stats.common_stats.num_non_missing == 3
