"""Pipeline runners: which Beam runner executes a conversion, with which options.

Locally we pin the in-process FnApiRunner: Beam's default DirectRunner first tries to download the
Prism runner binary from the internet.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

KNOWN_RUNNERS = ("DirectRunner", "DataflowRunner")


def check_runner(runner: str) -> str:
    if runner not in KNOWN_RUNNERS:
        raise ValueError(f"unknown runner {runner!r}; expected one of {list(KNOWN_RUNNERS)}")
    return runner


def make_pipeline(runner: str, options: Optional[Mapping[str, Any]] = None) -> beam.Pipeline:
    """A Beam Pipeline for `runner` with `options` (Beam option names → values)."""
    check_runner(runner)
    pipeline_options = PipelineOptions.from_dictionary(dict(options or {})) if options else PipelineOptions([])
    if runner == "DirectRunner":
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        return beam.Pipeline(runner=FnApiRunner(), options=pipeline_options)
    return beam.Pipeline(runner=runner, options=pipeline_options)
