"""tfrecorder.core.quiet: library loggers silenced only during a call, the user's logging configuration left as found."""
from __future__ import annotations

import contextlib
import logging
import subprocess
import sys

import pandas as pd
import pytest

from support import imagegen
import tfrecorder
from tfrecorder.core import quiet


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def logging_state() -> dict:
    names = ["", "apache_beam", "absl", "tensorflow", "tfrecorder"]
    loggers = [logging.getLogger(name) for name in names]
    return {name: (lg.level, list(lg.handlers), lg.propagate, lg.disabled) for name, lg in zip(names, loggers)}


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


def test_quiet_libraries_raises_only_the_noisy_loggers_and_only_for_the_duration():
    beam, own = logging.getLogger("apache_beam"), logging.getLogger("tfrecorder")
    saved = beam.level
    beam.setLevel(logging.INFO)
    try:
        with pytest.raises(RuntimeError, match="inside"):
            with quiet.quiet_libraries():
                assert {name: logging.getLogger(name).level for name in quiet.NOISY_LOGGERS} == dict.fromkeys(
                    quiet.NOISY_LOGGERS, logging.CRITICAL)
                assert own.level == logging.NOTSET  # the library's own logger is not silenced
                raise RuntimeError("inside")
        assert beam.level == logging.INFO  # put back, although the block raised
        with quiet.quiet_libraries(verbose=True):
            assert beam.level == logging.INFO
    finally:
        beam.setLevel(saved)


def test_beams_records_on_the_root_logger_are_dropped_only_while_quiet(root_capture):
    """Beam's portable runner logs every job message (a worker's traceback too) with logging.log, i.e. on
    the root logger; tfrecorder raises its own error for them instead."""
    from apache_beam.runners.portability import portable_runner

    root = logging.getLogger()

    def log_from(path: str, level: int = logging.ERROR) -> None:
        root.handle(root.makeRecord("root", level, path, 1, "job message", (), None))

    beams_file = portable_runner.__file__
    with quiet.quiet_libraries():
        log_from(beams_file)
        log_from(__file__)  # anyone else's root records pass
        log_from(beams_file, logging.CRITICAL)
    log_from(beams_file)  # and Beam's once the call is over
    assert [(record.pathname, record.levelno) for record in root_capture.records] == [
        (__file__, logging.ERROR), (beams_file, logging.CRITICAL), (beams_file, logging.ERROR)]
    assert not root.filters


def test_leaves_logging_alone_undoes_what_the_call_changed_even_when_it_raises():
    tensorflow = logging.getLogger("tensorflow")
    before = quiet.logging_state()
    added = logging.StreamHandler()

    @quiet.leaves_logging_alone
    def meddling(fail: bool) -> str:
        """Configures logging as Beam and TensorFlow do."""
        logging.getLogger().addHandler(added)
        logging.getLogger().setLevel(logging.DEBUG)
        tensorflow.setLevel(logging.ERROR)
        tensorflow.propagate, tensorflow.disabled = False, True
        if fail:
            raise ValueError("failed")
        return "done"

    assert meddling(False) == "done" and meddling.__doc__.startswith("Configures")
    assert quiet.logging_state() == before and added not in logging.getLogger().handlers
    with pytest.raises(ValueError):
        meddling(True)
    assert quiet.logging_state() == before


def test_a_logger_created_during_the_call_is_reset_to_the_defaults():
    name = "tfrecorder-quiet-test-new-logger"
    saved = quiet.logging_state((name,))
    assert saved == {name: None}  # nobody created it yet
    created = logging.getLogger(name)
    created.setLevel(logging.ERROR)
    created.addHandler(logging.NullHandler())
    created.propagate = False
    quiet.restore_logging_state(saved)
    assert quiet.LoggerState.of(created) == quiet.LoggerState()


def failing_conversion(table, output_dir, monkeypatch, **options):
    from beam_pipelines.steps import encode_rows

    def broken_read(uri, max_bytes=None):
        raise RuntimeError("injected failure")

    monkeypatch.setattr(encode_rows, "read_image", broken_read)
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


@contextlib.contextmanager
def unconfigured_root():
    """The root logger as a plain script has it: no handlers (pytest's own are set aside), level WARNING.

    (A context manager, not a fixture: pytest adds its capture handlers again for each test phase.)
    """
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    root.handlers[:] = []
    root.setLevel(logging.WARNING)
    try:
        yield root
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def test_beams_basic_config_does_not_reach_an_unconfigured_root(image_table, tmp_path):
    with unconfigured_root() as root:
        before = logging_state()
        tfrecorder.convert(image_table.head(3), tmp_path / "out")
        assert root.handlers == [] and logging_state() == before


def test_dataflow_submit_leaves_logging_as_found(gcs):
    """A real DataflowRunner submit writing its job template to the GCS emulator (see test_dataflow)."""
    gcs.bucket("tfrecorder-quiet-test")
    uri = "gs://tfrecorder-quiet-test/images/a.jpg"
    gcs.upload(uri, imagegen.odd_images()["rgb.jpg"][0])
    table = pd.DataFrame({"split": ["TRAIN"], "image_uri": [uri], "label": ["cat"]})
    with unconfigured_root() as root:
        before = logging_state()
        result = tfrecorder.convert(
            table, "gs://tfrecorder-quiet-test/out", runner="DataflowRunner", project="tfrecorder-test",
            region="europe-west4",
            dataflow_options={"no_auth": True, "template_location": "gs://tfrecorder-quiet-test/template.json"})
        assert result["state"] == "TEMPLATE_CREATED"
        assert root.handlers == [] and logging_state() == before


FRESH_PROCESS = """
import logging, sys
import tfrecorder
from tfrecorder.sample_data import make_sample_dataset

def state():
    loggers = logging.Logger.manager.loggerDict
    return {name: (lambda lg: (lg.level, list(lg.handlers), lg.propagate, lg.disabled))(logging.getLogger(name))
            if name == "" or isinstance(loggers.get(name), logging.Logger) else (logging.NOTSET, [], True, False)
            for name in ("", "tensorflow", "apache_beam", "absl")}

work, changed = sys.argv[1], []

def call(name, function, *args, **kwargs):
    before = state()
    result = function(*args, **kwargs)
    if state() != before:
        changed.append((name, before, state()))
    return result

csv_path = make_sample_dataset(work + "/sample", count=12)
job = call("convert", tfrecorder.convert, str(csv_path), work + "/out")["tfrecord_dir"]
datasets = call("load", tfrecorder.load, job, batch_size=4)
next(iter(datasets["train"]))  # the user's own use of the datasets: not one of our calls
call("inspect", tfrecorder.inspect, job, output_dir=work + "/look")
assert call("verify", tfrecorder.verify, job).ok
print(changed or "unchanged")
"""


def test_first_calls_in_a_fresh_process_leave_logging_as_found(tmp_path):
    """A new Python process, as a user's script: TensorFlow's first use and Beam's first PipelineOptions
    happen inside these calls, and the root logger starts without handlers."""
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(tmp_path)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "unchanged", done.stdout
