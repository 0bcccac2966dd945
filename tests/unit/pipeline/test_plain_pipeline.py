"""PlainPipeline: tfrecorder's pipelines skip Interactive Beam's label hook; everybody else's keep it."""
from __future__ import annotations

import threading

import apache_beam as beam
import nbformat
from apache_beam import pipeline as beam_pipeline
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.runners.worker import statesampler
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import userstate
from nbclient import NotebookClient

from beam_pipelines.launches import plain_pipeline
from beam_pipelines.launches.plain_pipeline import SAMPLING_PERIOD_MS, PlainPipeline


def recording_hook(monkeypatch) -> list:
    """Stand in for Beam's alter_label_if_ipython (as IPython would call it); records whose pipeline it saw."""
    seen = []
    monkeypatch.setattr(beam_pipeline, "alter_label_if_ipython", lambda transform, pvalueish: seen.append(pvalueish.pipeline))
    return seen


def test_plain_pipeline_runs_without_the_hook_and_puts_it_back(monkeypatch):
    seen = recording_hook(monkeypatch)
    hook = beam_pipeline.alter_label_if_ipython
    ours = PlainPipeline(runner=FnApiRunner())
    doubled = ours | beam.Create([1, 2, 3]) | beam.Map(lambda x: 2 * x)
    assert_that(doubled, equal_to([2, 4, 6]))
    ours.run().wait_until_finish()
    assert seen == [] and beam_pipeline.alter_label_if_ipython is hook
    theirs = beam.Pipeline(runner=FnApiRunner())
    _ = theirs | beam.Create([1])
    assert seen == [theirs]


class SamplingPeriod(beam.DoFn):
    def process(self, _):
        yield statesampler.get_current_tracker().sampling_period_ms


def test_our_bundles_sample_state_often_and_others_keep_beams_period():
    """A bundle's end waits up to one sampling period for Beam's sampling thread (200 ms by default)."""
    beams_sampler = statesampler.StateSampler
    ours = PlainPipeline(runner=FnApiRunner())
    assert_that(ours | beam.Create([None]) | beam.ParDo(SamplingPeriod()), equal_to([SAMPLING_PERIOD_MS]))
    ours.run().wait_until_finish()
    assert statesampler.StateSampler is beams_sampler
    theirs = beam.Pipeline(runner=FnApiRunner())
    assert_that(theirs | beam.Create([None]) | beam.ParDo(SamplingPeriod()),
                equal_to([statesampler.DEFAULT_SAMPLING_PERIOD_MS]))
    theirs.run().wait_until_finish()


def test_other_pipelines_keep_the_hook_while_ours_is_being_built(monkeypatch):
    """Beam's hook is a module global: while our apply is in progress, another thread's pipeline still gets it."""
    seen = recording_hook(monkeypatch)
    inside, release = threading.Event(), threading.Event()

    class Waits(beam.PTransform):
        def expand(self, pbegin):
            inside.set()
            release.wait(30)
            return pbegin | beam.Create([1])

    ours, theirs = PlainPipeline(runner=FnApiRunner()), beam.Pipeline(runner=FnApiRunner())
    builder = threading.Thread(target=lambda: ours | Waits())
    builder.start()
    try:
        assert inside.wait(30)
        _ = theirs | beam.Create([1])
    finally:
        release.set()
        builder.join()
    assert seen == [theirs]


class KeepsPerKey(beam.DoFn):
    """A stateful DoFn: each element's key with every value seen for it so far."""

    SEEN = userstate.BagStateSpec("seen", beam.coders.VarIntCoder())

    def process(self, element, seen=beam.DoFn.StateParam(SEEN)):
        key, value = element
        seen.add(value)
        yield key, sorted(seen.read())


def test_dofn_specs_are_beams_answers_asked_once_per_kind_of_dofn(monkeypatch):
    """Beam's search of a DoFn for state and timer parameters answers once per kind of DoFn in our
    pipeline's calls; a stateful DoFn still gets its state beside stateless ones, and Beam's function is
    Beam's again afterwards (other pipelines ask it every time)."""
    beams = userstate.get_dofn_specs
    asked = []
    monkeypatch.setattr(userstate, "get_dofn_specs", lambda dofn: asked.append(dofn) or beams(dofn))
    counting = userstate.get_dofn_specs
    ours = PlainPipeline(runner=FnApiRunner())
    kept = (ours | beam.Create([("a", 1), ("a", 2), ("b", 3)]) | beam.Map(lambda item: item)
            | beam.ParDo(KeepsPerKey()) | beam.Map(lambda item: (item[0], len(item[1]))) | beam.CombinePerKey(max))
    assert_that(kept, equal_to([("a", 2), ("b", 1)]))
    asked.clear()  # transforms made before they are applied (ParDo(...) above) are asked about outside our calls
    ours.run().wait_until_finish()
    kinds = [plain_pipeline._specs_key(dofn) for dofn in asked]
    assert len(kinds) == len(set(kinds)) and any(isinstance(dofn, KeepsPerKey) for dofn in asked)
    assert userstate.get_dofn_specs is counting
    assert beams(KeepsPerKey())[0] == {KeepsPerKey.SEEN}
    theirs = beam.Pipeline(runner=FnApiRunner())
    _ = theirs | beam.Create([1]) | beam.Map(len)
    assert len(asked) > len(kinds)  # asked every time outside our pipeline's calls


def test_a_method_bound_on_a_dofn_is_part_of_its_kind():
    """Map's wrapper binds a callable on its instance: a bound method's own defaults (a state parameter)
    make its DoFn another kind than one wrapping a plain function."""
    plain, bound = beam.Map(len).fn, beam.ParDo(KeepsPerKey().process).fn
    assert plain_pipeline._specs_key(plain) != plain_pipeline._specs_key(bound)
    assert plain_pipeline._specs_key(plain) == plain_pipeline._specs_key(beam.Map(len).fn)


KERNEL_CELLS = [
    """
import sys, tempfile
from pathlib import Path
import pandas as pd
import apache_beam.pipeline, apache_beam.utils.interactive_utils
import tfrecorder
from tfrecorder.sample_data import make_sample_dataset
assert get_ipython() is not None  # a real IPython kernel: Beam's hook is live
work = Path(tempfile.mkdtemp())
tempfile.tempdir = str(work / "tmp")  # where Beam puts each pipeline's local temp directory
Path(tempfile.tempdir).mkdir()
frame = pd.read_csv(make_sample_dataset(work / "data", count=12))
""",
    "result = frame.tensorflow.to_tfrecord(output_dir=str(work / 'out'))",
    """
assert result["rows_in"] == 12, result
assert "apache_beam.runners.interactive.interactive_environment" not in sys.modules
assert apache_beam.pipeline.alter_label_if_ipython is apache_beam.utils.interactive_utils.alter_label_if_ipython
assert sorted(p.name for p in Path(tempfile.tempdir).iterdir() if p.name.startswith("beam-pipeline-temp")) == []
print(pd.__version__, frame["image_uri"].dtype)
""",
]


def test_conversion_in_a_jupyter_kernel(tmp_path):
    """Under the suite's pandas (3.x: Beam's DataFrame layer cannot load), in a real kernel: the conversion
    works, Interactive Beam is never imported, Beam's hook is Beam's again afterwards, and no
    beam-pipeline-temp directory is left behind (Beam leaves those to Interactive Beam inside IPython)."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell) for cell in KERNEL_CELLS])
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for cell in notebook.cells for o in cell.outputs]
    assert [o for o in outputs if o.output_type == "error"] == []
    assert any(o.get("name") == "stdout" for o in outputs)
