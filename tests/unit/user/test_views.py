"""Results and inspected samples render as HTML in Jupyter, with real thumbnails."""
from __future__ import annotations

import base64
import io
import re

from PIL import Image

import tfrecorder
from tfrecorder.result import ConversionResult


def image_sources(text: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', text)]


def test_result_html_has_counts_reasons_and_thumbnails(converted):
    text = converted._repr_html_()
    for split, records in converted["written"].items():
        assert f"<td>{split}</td><td>{records:,}</td>" in text
    assert f"discarded: {converted['discarded']}" in text
    first_reason = next(iter(converted["discard_reasons"]))
    assert first_reason in text and converted["tfrecord_dir"] in text and "rows/s" in text
    samples, report = text.split('<div class="tfr-report">')  # the statistics report follows (issue 29)
    assert 'class="tfr-chart"' in report
    thumbnails = image_sources(samples)
    assert len(thumbnails) == min(8, converted["written"]["TRAIN"])
    with Image.open(io.BytesIO(thumbnails[0])) as image:
        assert image.format == "PNG" and max(image.size) <= 96
    vocabulary = converted.metadata["vocabularies"]["label"]
    assert re.search(r"<figcaption>(%s)</figcaption>" % "|".join(vocabulary), text)


def test_result_without_metadata_still_renders():
    text = ConversionResult(tfrecord_dir="gs://b/out/job", job_id="2026-11-21_abc", rows_in=10)._repr_html_()
    assert "2026-11-21_abc" in text and "gs://b/out/job" in text


def test_inspect_returns_a_path_that_shows_its_contact_sheet(converted, tmp_path):
    path = tfrecorder.inspect(converted["tfrecord_dir"], num_records=3, output_dir=str(tmp_path / "look"))
    assert path == str(tmp_path / "look") and isinstance(path, str)
    (sheet,) = image_sources(path._repr_html_())
    assert sheet == (tmp_path / "look" / "contact_sheet.png").read_bytes()
