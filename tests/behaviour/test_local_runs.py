"""Local runs: a worker process's error (Beam's worker processes, or a portable runner's SDK worker) is the
same tfrecorder error as an in-process one, and local Beam options (`beam_options=` without another runner)
are checked before anything is written."""
from __future__ import annotations

import logging
import os

import pytest

import tfrecorder
from beam_pipelines.launches import runners
from tfrecorder import errors
from support.portable import SUBPROCESS_WORKERS

MULTI = {"direct_running_mode": "multi_processing", "direct_num_workers": 2}
MODES = {"in-process": {}, "multi-process": {"dataflow_options": MULTI},
         "portable": {"runner": "PortableRunner", "beam_options": SUBPROCESS_WORKERS}}
NO_TRAIN = "no rows are assigned to TRAIN (check the split column and split_ratios)"


@pytest.mark.parametrize("mode", MODES)
def test_a_whole_table_error_is_a_table_error_in_every_running_mode(tmp_path, mode):
    source = tmp_path / "rows.csv"
    source.write_text("x,split\n1,TEST\n2,VALIDATION\n3,TEST\n")  # a CSV's TRAIN check runs in the pipeline
    with pytest.raises(errors.TableError) as raised:
        tfrecorder.convert(str(source), tmp_path / "out", schema={"x": "IntegerInput", "split": "SplitKey"},
                           progress=False, **MODES[mode])
    assert str(raised.value) == NO_TRAIN
    assert os.listdir(tmp_path / "out") == []


@pytest.mark.parametrize("mode", MODES)
def test_a_storage_failure_is_a_storage_read_error_in_every_running_mode(gcs, proxy, tmp_path, image_files, mode):
    """A storage error no retry helps (HTTP 501 from the store) fails the job the same way whether the
    worker runs in this process or in another one, which only sends back its traceback's text."""
    url = "gs://tfr-local-runs/a.jpg"
    gcs.upload(url, image_files["rgb.jpg"].read_bytes())
    proxy.fail("a.jpg", 501, times=10**6)
    source = tmp_path / "rows.csv"
    source.write_text(f"image_uri,label\n{url},a\n")
    with pytest.raises(errors.StorageReadError) as raised:
        tfrecorder.convert(str(source), tmp_path / "out", progress=False, **MODES[mode])
    stopped = f"could not read {url}: HTTP 501 MethodNotImplemented; the conversion stopped and nothing was published"
    if mode == "portable":  # not resumable: nothing is left
        assert raised.value.strerror == stopped and os.listdir(tmp_path / "out") == []
        return
    (kept,) = (name for name in os.listdir(tmp_path / "out") if name.startswith(".incomplete-"))  # issue 27: kept
    assert raised.value.strerror == (f"{stopped}; its committed work is kept in {tmp_path / 'out' / kept}: "
                                     "the same call continues it")


def test_worker_errors_are_recognised_by_class_name_and_by_traceback_text():
    class TableError(Exception):  # the same class name, as a copy of the module in another process would give
        pass

    named = errors.translate_pipeline_error(TableError(NO_TRAIN + " [while running 'CheckTable']"), "out/")
    assert type(named) is errors.TableError and str(named) == NO_TRAIN
    text = ("Traceback (most recent call last):\n  File \"table_stats.py\", line 55, in check\n"
            f"tfrecorder.errors.TableError: {NO_TRAIN}\n\nDuring handling of the above exception, another exception "
            f"occurred:\n...\nRuntimeError: tfrecorder.errors.TableError: {NO_TRAIN} [while running 'CheckTable']\n")
    translated = errors.translate_pipeline_error(RuntimeError(text), "out/")
    assert type(translated) is errors.TableError and str(translated) == NO_TRAIN
    unrelated = RuntimeError("ValueError: MyTableError: not ours")
    assert errors.translate_pipeline_error(unrelated, "out/") is unrelated


@pytest.mark.parametrize("options, message", [
    ({"direct_num_worker": 2}, r"\['direct_num_worker'\] are not Beam/Dataflow pipeline options \("
                               r"'direct_num_worker': did you mean 'direct_num_workers'"),
    ({"runner": "PortableRunner", "no_such_option": 1}, r"\['no_such_option'\] are not Beam"),
    ({"runner": "PortableRunner"}, r"\['runner'\] would choose another runner .* runner= "),
    ({"job_endpoint": "localhost:8099", "environment_type": "DOCKER"},
     r"\['environment_type', 'job_endpoint'\] would choose another runner"),
    ({"flink_master": "localhost:8081"}, r"\['flink_master'\] would choose another runner"),
    (["direct_num_workers"], "must be a dict"),
])
def test_local_beam_options_are_checked_before_anything_is_written(tmp_path, options, message):
    source = tmp_path / "rows.csv"
    source.write_text("x,split\n1,TRAIN\n")
    with pytest.raises(ValueError, match=message):
        tfrecorder.convert(str(source), tmp_path / "out", schema={"x": "IntegerInput", "split": "SplitKey"},
                           dataflow_options=options, progress=False)
    assert not (tmp_path / "out").exists()


def test_beams_own_local_options_pass_unchanged():
    options = {"direct_num_workers": 2, "direct_running_mode": "multi_threading", "direct_runner_bundle_repeat": 1,
               "pickle_library": "cloudpickle"}
    assert runners.check_local_options(options) == options
    assert runners.check_local_options(None) == {}


def test_checking_options_leaves_the_callers_logging_alone():
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers[:] = []  # a caller who has not configured logging: Beam's PipelineOptions() would
    try:
        runners.check_local_options({"direct_num_workers": 2})
        with pytest.raises(ValueError):
            runners.check_option_names(["nope"], "dataflow_options")
        assert root.handlers == []
    finally:
        root.handlers[:] = saved


def test_a_dataframe_staged_before_its_job_leaves_no_scratch_file_whatever_happens(tmp_path, monkeypatch):
    """A DataFrame is staged beside the output before the job's directory is chosen (its fingerprint is the
    staged rows' digest): a finished job took the file into its work dir and removed that; a run
    interrupted before its job started removes it."""
    import importlib

    import pandas as pd

    convert_module = importlib.import_module("tfrecorder.convert")  # the module, not the function

    frame = pd.DataFrame({"split": ["TRAIN", "TEST"] * 20, "n": range(40), "label": ["a", "b"] * 20})
    output = tmp_path / "out"
    original = convert_module.choose_job_dir

    def interrupted(*args, **kwargs):
        assert [name for name in os.listdir(output) if name.startswith(".staging-")]  # staged already
        raise KeyboardInterrupt

    monkeypatch.setattr(convert_module, "choose_job_dir", interrupted)
    with pytest.raises(KeyboardInterrupt):
        tfrecorder.convert(frame, output, progress=False)
    assert os.listdir(output) == []
    monkeypatch.setattr(convert_module, "choose_job_dir", original)
    result = tfrecorder.convert(frame, output, progress=False)
    assert os.listdir(output) == [os.path.basename(result["tfrecord_dir"])]
    assert sum(result["written"].values()) == 40
