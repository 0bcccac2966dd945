"""User data is data: never evaluated or unpickled; output stays inside output_dir."""
from __future__ import annotations

import os

from apache_beam.options.pipeline_options import SetupOptions

import tfrecorder
from support.readers import read_job
from beam_pipelines.launches import runners


def test_cells_that_look_like_code_are_stored_verbatim(tmp_path):
    canary = tmp_path / "canary"
    payloads = [
        f"__import__('os').system('touch {canary}')",
        "{{7*7}}", "$(touch " + str(canary) + ")", "=cmd|' /C calc'!A0",
        "cos\nsystem\n(S'touch " + str(canary) + "'\ntR.",  # a pickle program, as text
    ]
    csv_path = tmp_path / "t.csv"
    import csv

    with open(csv_path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["split", "note", "label"])
        writer.writerows(["TRAIN", p, "x"] for p in payloads)
    result = tfrecorder.convert(str(csv_path), tmp_path / "out")
    stored = sorted(ex["note"].decode() for ex in read_job(result["tfrecord_dir"])["TRAIN"])
    assert stored == sorted(payloads)
    assert not canary.exists()


def test_save_main_session_is_off_by_default():
    pipeline = runners.local_pipeline()
    assert pipeline.options.view_as(SetupOptions).save_main_session is False


def test_job_label_cannot_escape_output_dir(image_table, tmp_path):
    output_dir = tmp_path / "out"
    for label in ("../../escape", "/etc/cron.d/x", "..", "a/../../b", "~root"):
        result = tfrecorder.convert(image_table.head(2), output_dir, job_label=label)
        assert os.path.dirname(result["tfrecord_dir"]) == str(output_dir)
    assert sorted(os.listdir(tmp_path)) == ["out"]
