"""tfrecorder.result: the value a conversion returns (dict-like, attributes, repr) and a Dataflow job's wait()."""
from __future__ import annotations

import os

import pytest

from tfrecorder.errors import DataflowJobError
from tfrecorder.result import ConversionResult, DataflowConversionResult, print_progress


def test_result_is_dict_like_with_attributes_and_repr(converted):
    assert converted["job_id"] == "DirectRunner" == converted.job_id
    assert converted.tfrecord_dir == converted["tfrecord_dir"]
    assert os.path.basename(converted.tfrecord_dir).startswith("tfrecorder-")
    text = repr(converted)
    assert converted.tfrecord_dir in text and "discarded: 6" in text and "TRAIN=" in text


METADATA = {"rows_in": 5, "discarded": 1, "discard_reasons": {"missing image": 1}, "validate": "header",
            "splits": {"TEST": {"records": 1, "bytes": 10}, "TRAIN": {"records": 3, "bytes": 30}}}


def test_from_metadata_counts_splits_in_order_and_bytes():
    result = ConversionResult.from_metadata("/out/job", "DirectRunner", METADATA, elapsed=1.23456)
    assert list(result["written"].items()) == [("TRAIN", 3), ("TEST", 1)]  # TRAIN, VALIDATION, TEST order
    assert (result.bytes_written, result.elapsed_seconds, result.discarded) == (40, 1.235, 1)
    assert dict(result)["metadata"] == METADATA and len(result) == len(dict(result))
    assert "input_bytes" not in result
    upgraded = ConversionResult.from_metadata("/out/job", "x", {**METADATA, "upgraded_from": {"input_bytes": 160}}, 0)
    assert (upgraded.input_bytes, upgraded.output_bytes) == (160, 40)
    assert "upgraded from TFRecorder 2.0: 160 bytes -> 40 bytes (4.0x smaller)" in repr(upgraded)
    text = repr(result)
    assert "written: TRAIN=3, TEST=1" in text and "discard reasons: missing image (1)" in text
    assert "validate='header'" in text
    with pytest.raises(AttributeError):
        result.no_such_field
    with pytest.raises(KeyError):
        result["no_such_field"]


def test_print_progress_is_one_line_on_stderr(capsys):
    print_progress("RUNNING", 250, 1000)
    print_progress("PENDING", None, 1000)
    assert capsys.readouterr().err.splitlines() == ["Dataflow job RUNNING: 250 / 1,000 rows processed (25%)",
                                                    "Dataflow job PENDING: ? / 1,000 rows processed"]


def submitted(states, tfrecord_dir) -> DataflowConversionResult:
    """A submitted job whose state polls return `states` one by one (Dataflow itself is not reachable here)."""
    polls = iter(states)
    return DataflowConversionResult(lambda: next(polls), None, job_id="2026-11-23_abc", job_name="j",
                                    console_url="https://console/j", tfrecord_dir=tfrecord_dir, state="PENDING",
                                    rows_in=12, rows_in_estimated=True)


def test_wait_reports_each_change_then_adds_the_final_counts(converted):
    result = submitted([("PENDING", None), ("RUNNING", 4), ("RUNNING", 4), ("DONE", 12)], converted.tfrecord_dir)
    assert "~12 rows in" in repr(result)
    reports = []
    assert result.wait(poll_seconds=0.01, progress=lambda *report: reports.append(report)) is result
    assert reports == [("PENDING", None, 12), ("RUNNING", 4, 12), ("DONE", 12, 12)]
    assert result.written == converted.written and result.rows_in == converted.rows_in
    assert result.rows_in_estimated is False and result.state == "DONE"
    assert repr(result).endswith("Dataflow job j: DONE  https://console/j")


def test_wait_raises_unless_the_job_is_done():
    with pytest.raises(DataflowJobError, match="ended FAILED; its logs: https://console/j"):
        submitted([("RUNNING", 1), ("FAILED", 1)], "/nowhere").wait(poll_seconds=0.01, progress=False)
    dry = DataflowConversionResult(None, "the request", job_id="dry", job_name="j", tfrecord_dir="gs://b/o",
                                   state="DRY_RUN", rows_in=3)
    assert dry.pipeline_result == "the request"
    with pytest.raises(DataflowJobError, match=r"no Dataflow job was submitted \(DRY_RUN\)"):
        dry.wait()
