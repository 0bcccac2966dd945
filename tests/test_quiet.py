"""A conversion leaves the user's logging configuration alone and keeps library noise out."""
from __future__ import annotations

import logging

import pytest

import tfrecorder


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def logging_state() -> dict:
    names = ["", "apache_beam", "absl", "tensorflow", "tfrecorder"]
    return {name: (logging.getLogger(name).level, list(logging.getLogger(name).handlers)) for name in names}


@pytest.fixture
def root_capture():
    handler = Capture()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    root.setLevel(old_level)


def failing_conversion(table, output_dir, monkeypatch, **options):
    from beam_pipelines import transforms

    def broken_read(uri):
        raise RuntimeError("injected failure")

    monkeypatch.setattr(transforms, "read_image", broken_read)
    with pytest.raises(Exception, match="injected failure"):
        tfrecorder.convert(table, output_dir, **options)


def test_configuration_is_unchanged_by_a_conversion(root_capture, image_table, tmp_path):
    before = logging_state()
    tfrecorder.convert(image_table.head(3), tmp_path / "out")
    assert logging_state() == before


def test_beam_noise_is_hidden_unless_verbose(root_capture, image_table, tmp_path, monkeypatch):
    failing_conversion(image_table, tmp_path / "quiet", monkeypatch)
    assert not [r for r in root_capture.records if r.name.startswith("apache_beam")]
    failing_conversion(image_table, tmp_path / "loud", monkeypatch, verbose=True)
    assert [r for r in root_capture.records if r.name.startswith("apache_beam") and r.levelno >= logging.ERROR]
