"""Outputs of `finish_bundle`, which has no element whose window they could inherit."""
from __future__ import annotations

from typing import Any

from apache_beam.pvalue import TaggedOutput
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue


def in_global_window(output: Any) -> Any:
    """`output` in the global window, for output from `finish_bundle` (which has no element window to
    inherit); a tagged output keeps its tag, its value windowed."""
    if isinstance(output, TaggedOutput):
        return TaggedOutput(output.tag, in_global_window(output.value))
    return WindowedValue(output, MIN_TIMESTAMP, [GlobalWindow()])
