"""Pipeline runners: which Beam runner executes a conversion, with which options.

Locally we pin the in-process FnApiRunner: Beam's default DirectRunner first tries to download the
Prism runner binary from the internet. DataflowRunner pipelines get Beam's Dataflow runner; with the
`no_auth` option, Cloud Storage is accessed anonymously too (emulators, public buckets). Both are
PlainPipelines, built the same way inside Jupyter as in a script (tfrecorder.plain_pipeline).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import apache_beam as beam
from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions

from tfrecorder.plain_pipeline import PlainPipeline

KNOWN_RUNNERS = ("DirectRunner", "DataflowRunner")


def check_runner(runner: str) -> str:
    if runner not in KNOWN_RUNNERS:
        raise ValueError(f"unknown runner {runner!r}; expected one of {list(KNOWN_RUNNERS)}")
    return runner


def make_pipeline(runner: str, options: Optional[Mapping[str, Any]] = None) -> beam.Pipeline:
    """A Beam Pipeline for `runner` with `options` (Beam option names (dests) → Python values)."""
    check_runner(runner)
    pipeline_options = PipelineOptions([], **dict(options or {}))  # typed values, used as given
    if runner == "DirectRunner":
        from apache_beam.runners.portability.fn_api_runner import FnApiRunner

        return PlainPipeline(runner=FnApiRunner(), options=pipeline_options)
    if pipeline_options.view_as(GoogleCloudOptions).no_auth:
        connect_anonymously()
    from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner

    return PlainPipeline(runner=DataflowRunner(), options=pipeline_options)


def connect_anonymously() -> None:
    """Make Beam's GCS client anonymous, as `no_auth` asks, instead of looking credentials up.

    Beam caches the credential lookup per process; without credentials that lookup retries for ~26 s
    before it gives up and connects anonymously anyway, so we record the anonymous outcome up front.
    """
    from apache_beam.internal.gcp import auth

    with auth._Credentials._credentials_lock:
        auth._Credentials._credentials = None
        auth._Credentials._credentials_init = True
