"""beam_pipelines.launches.launch: one launch per runner, each owning its checks, options and run; one cleanup path."""
from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from tfrecorder.options.job_config import JobConfig
from tfrecorder.options.conversion_options import OutputLocation
from beam_pipelines.launches.launch import DataflowLaunch, LocalLaunch, fail_job, launch_for
from tfrecorder.errors import OutputWriteError
from tfrecorder.core.schema import Schema
from tfrecorder.sources.csv_source import CsvRows


def config(temp_dir: str, schema: Schema) -> JobConfig:
    return JobConfig(source=CsvRows("data.csv", 100, 10), schema=schema, columns=tuple(schema),
                     base_dir="", final_dir=temp_dir + "-final", temp_dir=temp_dir, job_name="job",
                     runner="DirectRunner", split_ratios=(0.8, 0.1, 0.1), num_shards=0, max_shard_bytes=1 << 20,
                     compression=None, image_size=None, validate="header")


def test_the_runner_picks_the_launch_and_its_checks_run_before_anything_is_written(tmp_path):
    local = launch_for("DirectRunner", OutputLocation.of(str(tmp_path)), None, None, None, {"direct_num_workers": 1}, None)
    assert isinstance(local, LocalLaunch) and local.beam_options == {"direct_num_workers": 1}
    with pytest.raises(ValueError, match="unknown runner 'Spark'"):
        launch_for("Spark", OutputLocation.of(str(tmp_path)), None, None, None, None, None)
    with pytest.raises(ValueError, match="needs project="):
        launch_for("DataflowRunner", OutputLocation.of("gs://bucket/out"), None, "us-central1", None, None, None)
    remote = launch_for("DataflowRunner", OutputLocation.of("gs://bucket/out"), "my-project", "us-central1", "daily run", None, None)
    assert isinstance(remote, DataflowLaunch) and remote.request.output_dir == "gs://bucket/out"
    assert not remote.shows_progress(True)
    options = remote.job_options(config("gs://bucket/out/.incomplete-job", Schema({"x": "IntegerInput"})))
    assert options["temp_location"] == "gs://bucket/out/.tfrecorder-dataflow/temp" and options["job_name"] == "job"
    assert not list(tmp_path.iterdir())


def test_a_local_image_free_job_keeps_the_in_process_encoder(tmp_path):
    launch = LocalLaunch(None)
    planned, options = launch.plan(config(str(tmp_path / "t"), Schema({"x": "IntegerInput"})), 10, False)
    assert planned.encode_processes == 1 and options == {}


PRELOAD = """
import sys, threading
from beam_pipelines.launches.launch import LocalLaunch
from tfrecorder.core.schema import Schema
from tfrecorder.io import tensorflow_kernels

RUNNER = "apache_beam.runners.portability.fn_api_runner"

def loaders():
    return sum(thread.name == "tfrecorder-load-kernels" for thread in threading.enumerate())

images, numbers = Schema({"image_uri": "ImageUri"}), Schema({"x": "IntegerInput"})
launch = LocalLaunch(None)
launch.preload_decoder("header", images)
launch.preload_decoder("decode", numbers)
print("none needed:", loaders(), RUNNER in sys.modules)
launch.preload_decoder("decode", images)
runner_first = RUNNER in sys.modules
launch.preload_decoder("decode", images)
tensorflow_kernels.load_in_background()  # what run() asks again
print("decoding:", loaders(), runner_first)
tensorflow_kernels._loader.join()
print("loaded:", tensorflow_kernels._loaded is not None)
"""


def test_a_local_decoding_job_loads_its_kernels_once_from_when_the_table_is_known():
    """Only a table with images and validate="decode" starts loading TensorFlow's kernels early; Beam's
    runner module is imported first (its compiled modules would wait for the loader's lock); the load
    starts once, whoever asks again (a fresh process: loading is once per process)."""
    done = subprocess.run([sys.executable, "-c", PRELOAD], capture_output=True, text=True, timeout=300)
    assert done.stdout.splitlines() == ["none needed: 0 False", "decoding: 1 True", "loaded: True"], done.stderr


def test_a_failed_job_leaves_nothing_and_raises_the_translated_error(tmp_path):
    temp_dir = tmp_path / ".incomplete-job"
    temp_dir.mkdir()
    (temp_dir / "piece").write_bytes(b"x")
    full = OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(OutputWriteError, match="could not write the output under OUT") as raised:
        try:
            raise full
        except BaseException as exc:
            fail_job(exc, str(temp_dir), str(tmp_path / "job"), "OUT")
    assert raised.value.__cause__ is full and not temp_dir.exists()


def test_an_untranslated_error_is_raised_as_is_and_an_own_error_without_its_chain(tmp_path):
    original = RuntimeError("boom")
    with pytest.raises(RuntimeError) as raised:
        try:
            raise original
        except BaseException as exc:
            fail_job(exc, str(tmp_path / "t1"), str(tmp_path / "j1"), str(tmp_path))
    assert raised.value is original
    own = ValueError("corrupt shard")
    with pytest.raises(ValueError) as raised:
        try:
            raise original
        except BaseException as exc:
            fail_job(exc, str(tmp_path / "t2"), str(tmp_path / "j2"), str(tmp_path), own_error=own)
    assert raised.value is own and raised.value.__cause__ is None and raised.value.__suppress_context__
    assert not os.path.exists(tmp_path / "t2")


def test_a_resumable_job_stopped_by_an_outage_or_ctrl_c_keeps_its_work(tmp_path):
    from tfrecorder.errors import StorageReadError

    outage = RuntimeError("tfrecorder.errors.StorageReadError: [Errno 5] could not read gs://b/x.jpg: gave up")
    for number, (exc, expected) in enumerate(((outage, StorageReadError), (KeyboardInterrupt(), KeyboardInterrupt))):
        temp_dir = tmp_path / f".incomplete-{number}"
        temp_dir.mkdir()
        with pytest.raises(expected) as raised:
            try:
                raise exc
            except BaseException as caught:
                fail_job(caught, str(temp_dir), str(tmp_path / str(number)), str(tmp_path), keep_resumable=True)
        assert temp_dir.exists()
        if expected is StorageReadError:
            assert raised.value.strerror.endswith(f"its committed work is kept in {temp_dir}: the same call continues it")
        else:
            assert raised.value.kept_job == str(temp_dir)
    temp_dir = tmp_path / ".incomplete-bad"  # bad input: nothing to continue
    temp_dir.mkdir()
    with pytest.raises(ValueError):
        try:
            raise ValueError("the table is empty")
        except ValueError as caught:
            fail_job(caught, str(temp_dir), str(tmp_path / "bad"), str(tmp_path), keep_resumable=True)
    assert not temp_dir.exists()
