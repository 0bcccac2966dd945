"""beam_pipelines.steps.bundle_outputs: finish_bundle outputs placed in the global window reach later steps."""
from __future__ import annotations

import apache_beam as beam
from apache_beam.pvalue import TaggedOutput
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP

from beam_pipelines.steps.bundle_outputs import in_global_window


def test_the_value_is_in_the_global_window_at_the_earliest_timestamp():
    windowed = in_global_window({"piece": 1})
    assert (windowed.value, windowed.timestamp, list(windowed.windows)) == ({"piece": 1}, MIN_TIMESTAMP, [GlobalWindow()])


def test_a_tagged_output_keeps_its_tag_and_its_value_is_windowed():
    tagged = in_global_window(TaggedOutput("discard", ("row", "reason")))
    assert isinstance(tagged, TaggedOutput) and tagged.tag == "discard"
    assert (tagged.value.value, list(tagged.value.windows)) == (("row", "reason"), [GlobalWindow()])


class _CountPerBundle(beam.DoFn):
    """Emits nothing per element, one count per bundle (as the encode steps emit their open pieces)."""

    def start_bundle(self) -> None:
        self.count = 0

    def process(self, element):
        self.count += 1
        return []

    def finish_bundle(self):
        yield in_global_window(self.count)


def test_finish_bundle_outputs_reach_the_next_steps():
    with beam.Pipeline("DirectRunner") as pipeline:
        counts = pipeline | beam.Create(range(25)) | beam.ParDo(_CountPerBundle())
        assert_that(counts | beam.CombineGlobally(sum), equal_to([25]))
