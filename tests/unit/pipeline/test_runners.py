"""Local execution: in-process for small jobs, a worker process per core for large ones."""
from __future__ import annotations

import pandas as pd

import tfrecorder
from support.readers import read_job
from beam_pipelines.launches import runners

MULTI = {"direct_running_mode": "multi_processing", "direct_num_workers": 2}


def test_large_jobs_on_several_cores_get_a_worker_process_per_core():
    rows = 10 ** 6
    assert runners.local_options(rows, None, cores=4) == {"direct_running_mode": "multi_processing",
                                                           "direct_num_workers": 4}
    assert runners.local_options(rows, {"direct_runner_bundle_repeat": 1}, cores=2) == {
        "direct_runner_bundle_repeat": 1, **MULTI}


def test_small_jobs_and_single_cores_stay_in_process():
    assert runners.local_options(10_000, None, cores=8) == {}  # start-up would cost more than it saves
    assert runners.local_options(10 ** 6, None, cores=1) == {}


def test_decode_mode_stays_in_process_its_threads_use_every_core():
    assert runners.local_options(10 ** 7, None, cores=8, threads_use_every_core=True) == {}


def test_image_free_tables_pay_for_worker_processes_only_at_millions_of_rows():
    assert runners.local_options(10 ** 6, None, cores=2, tabular=True) == {}  # columnar rows cost a few µs
    assert runners.local_options(10 ** 7, None, cores=2, tabular=True) == MULTI


def test_more_cores_pay_off_sooner():
    smallest = {cores: next(rows for rows in range(1000, 10 ** 6, 1000) if runners.worker_processes_pay_off(rows, cores))
                for cores in (2, 4, 16)}
    assert smallest[2] > smallest[4] > smallest[16]


def test_beams_own_options_override_the_choice():
    rows = 10 ** 6
    assert runners.local_options(rows, {"direct_num_workers": 1}, cores=8) == {"direct_num_workers": 1}
    assert runners.local_options(rows, {"direct_running_mode": "in_memory"}, cores=8) == {
        "direct_running_mode": "in_memory"}


def test_multi_process_conversion_writes_what_the_in_process_one_writes(tmp_path, image_files):
    names = ["rgb.jpg", "gray.png", "anim.gif", "truncated.jpg", "text.jpg"] * 30
    table = pd.DataFrame({"split": ["TRAIN", "VALIDATION", "TEST"] * 50,
                          "image_uri": [str(image_files[n]) for n in names],
                          "label": [n.split(".")[0] for n in names]})
    single = tfrecorder.convert(table, tmp_path / "single", progress=False)
    multi = tfrecorder.convert(table, tmp_path / "multi", progress=False, dataflow_options=MULTI)
    for key in ("rows_in", "written", "discarded", "discard_reasons"):
        assert single[key] == multi[key], key

    def records(result):
        return {split: sorted(e["image_uri"] for e in examples) for split, examples in read_job(result["tfrecord_dir"]).items()}

    assert records(single) == records(multi)


def test_a_local_pipeline_runs_in_process_with_the_options_given():
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    pipeline = runners.local_pipeline({"direct_num_workers": 3})
    assert isinstance(pipeline.runner, FnApiRunner)
    assert pipeline.options.get_all_options()["direct_num_workers"] == 3


def test_local_pipeline_options_make_each_view_once_and_views_share_values():
    from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions, TypeOptions
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    from beam_pipelines.launches.plain_pipeline import PlainPipeline

    options = runners.local_pipeline({"direct_num_workers": 3}).options
    assert options.view_as(TypeOptions) is options.view_as(TypeOptions)
    assert options.view_as(DirectOptions).direct_num_workers == 3
    options.view_as(StandardOptions).runner = "SomeRunner"  # written through one view ...
    assert options.get_all_options()["runner"] == "SomeRunner"  # ... seen by the options
    options.view_as(DirectOptions).direct_num_workers = 1
    assert options.view_as(DirectOptions).direct_num_workers == 1
    plain = PlainPipeline(runner=FnApiRunner(),
                          options=PipelineOptions([], direct_num_workers=3, pipeline_type_check=False)).options
    assert plain.view_as(TypeOptions) is not plain.view_as(TypeOptions)  # Beam's class: a new view each time
    plain.view_as(StandardOptions).runner = "SomeRunner"
    plain.view_as(DirectOptions).direct_num_workers = 1
    assert plain.get_all_options() == options.get_all_options()


def test_local_pipelines_skip_beams_construction_type_check_unless_asked():
    """Inferring every step's output type from its bytecode cost ~0.13 s of a 100-row job."""
    from apache_beam.options.pipeline_options import TypeOptions

    assert runners.local_pipeline().options.view_as(TypeOptions).pipeline_type_check is False
    assert runners.local_pipeline({"pipeline_type_check": True}).options.view_as(TypeOptions).pipeline_type_check
