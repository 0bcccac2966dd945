"""beam_pipelines.launches.portable_launch: PortableRunner, FlinkRunner and SparkRunner requests checked by name
before anything is written, where their workers may read files, and the options Beam's own runners and
job servers get from them (no cluster needed). Whole jobs on Beam's embedded job service:
tests/behaviour/test_portable_runs.py."""
from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from apache_beam.options.pipeline_options import FlinkRunnerOptions, PortableOptions, SparkRunnerOptions
from apache_beam.runners.portability.flink_runner import FlinkJarJobServer, FlinkRunner
from apache_beam.runners.portability.spark_runner import SparkJarJobServer, SparkRunner
from apache_beam.transforms.environments import Environment, ExternalEnvironment

from beam_pipelines.launches import runners
from beam_pipelines.launches.launch import launch_for
from beam_pipelines.launches.portable_launch import SUBPROCESS_ENVIRONMENT, PortableLaunch, check_request
from tfrecorder.core.schema import Schema
from tfrecorder.options.conversion_options import OutputLocation
from tfrecorder.options.job_config import JobConfig
from tfrecorder.sources.source_registry import open_table
from support.portable import SUBPROCESS_WORKERS

GCS_OUT = OutputLocation.of("gs://bucket/out")


def config(temp_dir: str) -> JobConfig:
    schema = Schema({"x": "IntegerInput"})
    return JobConfig(source=None, schema=schema, columns=("x",), base_dir="", final_dir=temp_dir + "-final",
                     temp_dir=temp_dir, job_name="job-1", runner="FlinkRunner", split_ratios=(0.8, 0.1, 0.1),
                     num_shards=0, max_shard_bytes=1 << 20, compression=None, image_size=None, validate="header")


@pytest.mark.parametrize("runner, options, message", [
    ("PortableRunner", {}, r"needs beam_options\['job_endpoint'\]"),
    ("PortableRunner", {"job_endpoint": "embed", "direct_num_workers": 2},
     r"\['direct_num_workers'\] belong to another runner"),
    ("FlinkRunner", {"spark_master_url": "spark://host:7077"}, r"\['spark_master_url'\] belong to another runner"),
    ("SparkRunner", {"flink_master": "host:8081"}, r"\['flink_master'\] belong to another runner"),
    ("FlinkRunner", {"flink_mastr": "host:8081"}, r"did you mean 'flink_master'"),
    ("FlinkRunner", {"runner": "SparkRunner"}, "contradicts runner='FlinkRunner'"),
    ("FlinkRunner", {"environment_type": "KUBERNETES"}, "environment_type 'KUBERNETES' is none of"),
    ("FlinkRunner", {"environment_type": "EXTERNAL"}, "needs environment_config"),
    ("PortableRunner", {"job_endpoint": "embed", "environment_type": SUBPROCESS_ENVIRONMENT}, "needs environment_config"),
    ("FlinkRunner", {"flink_job_server_jar": "no/such/job-server.jar"}, "no file no/such/job-server.jar"),
])
def test_options_are_checked_by_name_before_anything_starts(runner, options, message):
    with pytest.raises(ValueError, match=message):
        check_request(runner, GCS_OUT, options, shared_filesystem=False)


def test_workers_of_their_own_write_to_cloud_storage_unless_the_files_are_shared(tmp_path):
    local = OutputLocation.of(str(tmp_path))
    with pytest.raises(ValueError, match="with workers of their own .*DOCKER.*output_dir must be gs://"):
        check_request("PortableRunner", local, {"job_endpoint": "localhost:8099"}, shared_filesystem=False)
    with pytest.raises(ValueError, match="EXTERNAL"):
        check_request("FlinkRunner", local, {"environment_type": "EXTERNAL", "environment_config": "localhost:50000"},
                      shared_filesystem=False)
    assert check_request("FlinkRunner", local, {"environment_type": "EXTERNAL", "environment_config": "localhost:50000"},
                         shared_filesystem=True).workers_share_files
    for environment in ("LOOPBACK", SUBPROCESS_ENVIRONMENT):  # workers on this machine
        options = {"job_endpoint": "embed", "environment_type": environment, "environment_config": "python"}
        assert check_request("PortableRunner", local, options, shared_filesystem=False).workers_share_files
    with pytest.raises(ValueError, match="shared_filesystem must be True or False"):
        check_request("SparkRunner", GCS_OUT, {}, shared_filesystem="yes")
    with pytest.raises(ValueError, match="shared_filesystem=True is for workers of a portable runner"):
        launch_for("DirectRunner", local, None, None, None, None, None, shared_filesystem=True)


def test_a_local_table_is_refused_for_workers_of_their_own_and_read_by_workers_on_this_machine(tmp_path):
    source = tmp_path / "rows.csv"
    source.write_text("x,image_uri\n1,gs://bucket/a.jpg\n")
    table = open_table(str(source), None)
    schema = Schema({"x": "IntegerInput", "image_uri": "ImageUri"})
    remote = PortableLaunch(check_request("SparkRunner", GCS_OUT, {}, shared_filesystem=False))
    with pytest.raises(ValueError, match=f"SparkRunner workers cannot read the local file {source}"):
        remote.check_table(table, schema)
    with pytest.raises(ValueError, match="SparkRunner workers cannot read the local directory /legacy"):
        remote.check_readable_dir("/legacy")
    remote.check_readable_dir("gs://bucket/legacy")
    local = PortableLaunch(check_request("PortableRunner", OutputLocation.of(str(tmp_path)), SUBPROCESS_WORKERS, False))
    local.check_table(table, schema)
    local.check_readable_dir(str(tmp_path))
    frame_table = open_table(pd.DataFrame({"x": [1], "image_uri": ["gs://bucket/a.jpg"]}), None)
    remote.check_table(frame_table, schema)  # a DataFrame is staged under output_dir, on gs://


def test_a_portable_job_runs_the_distributed_graph_without_pool_or_local_progress(tmp_path):
    launch = launch_for("PortableRunner", OutputLocation.of(str(tmp_path)), None, None, None, SUBPROCESS_WORKERS, None)
    assert isinstance(launch, PortableLaunch) and launch.distributed and launch.runner == "PortableRunner"
    assert not launch.shows_progress(True)  # the bar's directory is on this machine only
    job = config(str(tmp_path / ".incomplete-job"))
    planned, options = launch.plan(job, rows_estimate=1_000_000, images_remote=False)
    assert planned == job and planned.encode_processes == 1 and planned.progress_dir is None
    assert options == {"job_name": "job-1", **SUBPROCESS_WORKERS}
    assert not list(tmp_path.iterdir())


def test_beam_options_and_their_old_name_dataflow_options_are_one_argument(tmp_path):
    output = OutputLocation.of(str(tmp_path))
    old = launch_for("DirectRunner", output, None, None, None, None, None, dataflow_options={"direct_num_workers": 1})
    new = launch_for("DirectRunner", output, None, None, None, {"direct_num_workers": 1}, None)
    assert old.beam_options == new.beam_options == {"direct_num_workers": 1}
    with pytest.raises(ValueError, match="not both"):
        launch_for("DirectRunner", output, None, None, None, {}, None, dataflow_options={})


def test_dask_is_refused_with_the_reason(tmp_path):
    with pytest.raises(ValueError, match="DaskRunner.* is not supported: .*finish_bundle .*tagged output"):
        launch_for("DaskRunner", OutputLocation.of(str(tmp_path)), None, None, None, None, None)


def test_flink_options_reach_beams_flink_runner_and_job_server_command(tmp_path):
    jar = tmp_path / "beam-runners-flink-job-server.jar"
    jar.write_bytes(b"PK")
    options = {"flink_master": "flink-host:8081", "flink_job_server_jar": str(jar), "environment_type": "EXTERNAL",
               "environment_config": "localhost:50000", "sdk_worker_parallelism": 2, "parallelism": 4}
    launch = launch_for("FlinkRunner", GCS_OUT, None, None, None, options, None)
    pipeline = runners.portable_pipeline(launch.runner, launch.job_options(config("gs://bucket/out/.incomplete-job")))
    assert isinstance(pipeline.runner, FlinkRunner)
    flink, portable = pipeline.options.view_as(FlinkRunnerOptions), pipeline.options.view_as(PortableOptions)
    assert (flink.flink_master, flink.parallelism, portable.sdk_worker_parallelism) == ("flink-host:8081", 4, 2)
    environment = Environment.from_options(portable)
    assert isinstance(environment, ExternalEnvironment) and environment.url == "localhost:50000"
    server = FlinkJarJobServer(pipeline.options)  # what Beam would start with java -jar (no cluster needed)
    assert server.path_to_jar() == str(jar)
    arguments = server.java_arguments(8099, 8098, 8097, "/artifacts")
    assert arguments[arguments.index("--flink-master") + 1] == "flink-host:8081"


def test_spark_options_reach_beams_spark_runner_and_job_server_command(tmp_path):
    jar = tmp_path / "beam-runners-spark-job-server.jar"
    jar.write_bytes(b"PK")
    options = {"spark_master_url": "spark://spark-host:7077", "spark_job_server_jar": str(jar),
               "environment_type": "DOCKER", "environment_config": "registry.example/tfrecorder-worker:1"}
    launch = launch_for("SparkRunner", GCS_OUT, None, None, None, options, None)
    pipeline = runners.portable_pipeline(launch.runner, launch.job_options(config("gs://bucket/out/.incomplete-job")))
    assert isinstance(pipeline.runner, SparkRunner)
    assert pipeline.options.view_as(SparkRunnerOptions).spark_master_url == "spark://spark-host:7077"
    environment = Environment.from_options(pipeline.options.view_as(PortableOptions))
    assert environment.container_image == "registry.example/tfrecorder-worker:1"
    server = SparkJarJobServer(pipeline.options)
    assert server.path_to_jar() == str(jar)
    arguments = server.java_arguments(8099, 8098, 8097, "/artifacts")
    assert arguments[arguments.index("--spark-master-url") + 1] == "spark://spark-host:7077"
    assert dataclasses.asdict(launch.request)["options"] == options


def test_a_portable_job_on_a_terminal_shows_its_rows_processed_counter(tmp_path):
    """The bar follows the job's Beam counter, read from the job service (no progress directory: the
    workers are other processes); Beam's embedded job service reports it when the job is done."""
    from support.cli_runs import run_on_a_terminal

    source = tmp_path / "table.csv"
    source.write_text("id,split\n" + "".join(f"{i},{['TRAIN', 'TEST'][i % 2]}\n" for i in range(300)))
    flags = [flag for name, value in SUBPROCESS_WORKERS.items() for flag in ("--beam_option", f"{name}={value}")]
    code, text = run_on_a_terminal(["convert", "--source", str(source), "--output_dir", "out",
                                    "--runner", "PortableRunner", *flags], tmp_path)
    assert code == 0, text
    assert "converting" in text and "300/300" in text


@pytest.mark.parametrize("environment, stages", [(None, True), ("DOCKER", True), ("PROCESS", True),
                                                 ("EXTERNAL", False), ("LOOPBACK", False), (SUBPROCESS_ENVIRONMENT, False)])
def test_the_worker_wheel_is_staged_for_workers_that_install_packages(environment, stages):
    options = {"job_endpoint": "localhost:8099", **({"environment_type": environment} if environment else {})}
    if environment in ("PROCESS", "EXTERNAL", SUBPROCESS_ENVIRONMENT):
        options["environment_config"] = "x"
    launch = PortableLaunch(check_request("PortableRunner", GCS_OUT, options, shared_filesystem=False))
    assert launch.stages_worker_package is stages


@pytest.mark.parametrize("validate", ["header", "decode"])
def test_the_staged_wheel_holds_tfrecorder_and_the_workers_requirements(tmp_path, validate):
    import zipfile

    from apache_beam.options.pipeline_options import SetupOptions

    from beam_pipelines.launches import dataflow_job

    pipeline = runners.portable_pipeline("PortableRunner", {"job_endpoint": "localhost:8099",
                                                            "extra_packages": ["other.tar.gz"]})
    wheel = dataflow_job.stage_worker_wheel(pipeline, dataclasses.replace(config(str(tmp_path)), validate=validate),
                                            str(tmp_path))
    assert pipeline.options.view_as(SetupOptions).extra_packages == ["other.tar.gz", wheel]
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(next(n for n in names if n.endswith("/METADATA"))).decode()
    assert {"tfrecorder/__init__.py", "beam_pipelines/launches/portable_launch.py"} <= names
    assert ("Requires-Dist: tensorflow" in metadata) == (validate == "decode")
