"""Pipeline runners: which Beam runner executes a conversion, with which options.

Locally we pin the in-process FnApiRunner: Beam's default DirectRunner first tries to download the
Prism runner binary from the internet.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping, Optional

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


@contextlib.contextmanager
def outside_interactive_beam() -> Iterator[None]:
    """Build and run our pipelines as in a plain Python process, even inside Jupyter/IPython.

    In an IPython kernel Beam relabels every transform through its interactive module, which imports
    apache_beam.dataframe — broken with pandas 3 (AttributeError: DataFrame has no attribute 'first'),
    so `convert()` would fail in every notebook. Conversion pipelines are internal; the interactive
    labels have no use for them.
    """
    import apache_beam.pipeline as beam_pipeline

    saved = beam_pipeline.alter_label_if_ipython, beam_pipeline.is_in_ipython
    beam_pipeline.alter_label_if_ipython = lambda transform, pvalueish: None
    beam_pipeline.is_in_ipython = lambda: False
    try:
        yield
    finally:
        beam_pipeline.alter_label_if_ipython, beam_pipeline.is_in_ipython = saved
