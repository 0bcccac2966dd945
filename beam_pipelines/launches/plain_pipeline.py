"""A Beam Pipeline that is built and run inside IPython/Jupyter exactly as in a script.

Inside an IPython kernel, Beam's `Pipeline.apply` calls `alter_label_if_ipython` for every top-level
transform. That function imports Interactive Beam, which imports Beam's DataFrame layer, which fails
under pandas 3 (Beam supports pandas < 2.4 there) and only serves to prefix labels with the cell
number for Interactive Beam, which tfrecorder does not use.

`PlainPipeline` skips that call for its own `apply` and `run` calls only: while one of them runs in
this thread (a context variable), the module-level name Beam's `Pipeline.apply` looks up is a wrapper
that does nothing; any other call — another thread, the user's own pipelines — goes to Beam's function
unchanged. The wrapper is installed only while such a call is in progress and removed afterwards, so
Beam is left as it was found. `run` also removes the pipeline's local temp directory, which Beam only
deletes outside IPython (inside, it leaves that to Interactive Beam).

The same way, bundles that `run` executes in this thread get a state sampler with a short period:
Beam's bundle processor stops its sampling thread at the end of every bundle and waits for it, and
that thread sleeps up to its period (a fixed 200 ms once a bundle has run for about a second), so
every long bundle ended ~100 ms late on average (measured on a 20,000-image conversion). At 10 ms the
sampler still attributes time to steps; it only wakes more often.

And Beam's search of a DoFn for state and timer parameters (`userstate.get_dofn_specs`: a signature of
every method a DoFn has, ~30 of them) answers once per kind of DoFn in a pipeline's calls: Beam asks
about six times per DoFn while the graph is built, translated and its bundle processors made, which
took ~0.1 s of a 100-row job's ~0.45 s. The answer depends only on the DoFn's methods: its class, and
the methods an instance sets on itself (`_specs_key`), so it is kept per pipeline by that key.
"""
from __future__ import annotations

import contextlib
import contextvars
import shutil
import threading
import types
from typing import Any, Callable, Hashable, Iterator, Optional

import apache_beam as beam
from apache_beam import pipeline as beam_pipeline
from apache_beam.runners.worker import statesampler
from apache_beam.transforms import userstate

_running_pipeline: contextvars.ContextVar[Optional["PlainPipeline"]] = contextvars.ContextVar(
    "tfrecorder_running_plain_pipeline", default=None)  # the PlainPipeline whose call runs in this thread
_install_lock = threading.Lock()
_active_calls = 0
_beams_alter_label: Optional[Callable[[Any, Any], None]] = None
_BeamsStateSampler = statesampler.StateSampler
_beams_dofn_specs: Optional[Callable[[Any], tuple[set, set]]] = None  # Beam's, while ours is installed
SAMPLING_PERIOD_MS = 10  # what a long bundle's end may wait for the sampling thread (Beam's: 200)


class _StateSamplerUnlessPlain(_BeamsStateSampler):
    """Beam's StateSampler, with a period of at most SAMPLING_PERIOD_MS inside a PlainPipeline run."""

    def __init__(self, prefix: str, counter_factory: Any,
                 sampling_period_ms: int = statesampler.DEFAULT_SAMPLING_PERIOD_MS) -> None:
        if _running_pipeline.get() is not None:
            sampling_period_ms = min(sampling_period_ms, SAMPLING_PERIOD_MS)
        super().__init__(prefix, counter_factory, sampling_period_ms)


def _alter_label_unless_plain(transform: Any, pvalueish: Any) -> None:
    """Beam's alter_label_if_ipython, except inside a PlainPipeline call of this thread."""
    if _running_pipeline.get() is None:
        _beams_alter_label(transform, pvalueish)


def _specs_key(dofn: Any) -> Optional[Hashable]:
    """What Beam's get_dofn_specs answer depends on: the DoFn's class and the methods bound on the
    instance itself (Map's wrapper sets `process`); None when the instance has no attribute dict."""
    try:
        own = vars(dofn)
    except TypeError:
        return None
    bound = tuple(sorted(((name, value.__func__) for name, value in own.items() if isinstance(value, types.MethodType)),
                         key=lambda item: item[0]))
    return type(dofn), bound


def _dofn_specs_unless_plain(dofn: Any) -> tuple[set, set]:
    """Beam's get_dofn_specs, answered once per `_specs_key` inside a PlainPipeline call of this thread."""
    pipeline = _running_pipeline.get()
    key = _specs_key(dofn) if pipeline is not None else None
    if key is None:
        return _beams_dofn_specs(dofn)
    found = pipeline.dofn_specs
    if key not in found:
        found[key] = _beams_dofn_specs(dofn)
    state_specs, timer_specs = found[key]
    return set(state_specs), set(timer_specs)  # the caller's own sets, as Beam's function returns


@contextlib.contextmanager
def _plain_calls(pipeline: "PlainPipeline") -> Iterator[None]:
    global _active_calls, _beams_alter_label, _beams_dofn_specs
    token = _running_pipeline.set(pipeline)
    with _install_lock:
        if _active_calls == 0 and beam_pipeline.alter_label_if_ipython is not _alter_label_unless_plain:
            _beams_alter_label = beam_pipeline.alter_label_if_ipython
            beam_pipeline.alter_label_if_ipython = _alter_label_unless_plain
        if _active_calls == 0 and statesampler.StateSampler is _BeamsStateSampler:
            statesampler.StateSampler = _StateSamplerUnlessPlain
        if _active_calls == 0 and userstate.get_dofn_specs is not _dofn_specs_unless_plain:
            _beams_dofn_specs = userstate.get_dofn_specs
            userstate.get_dofn_specs = _dofn_specs_unless_plain
        _active_calls += 1
    try:
        yield
    finally:
        with _install_lock:
            _active_calls -= 1
            if _active_calls == 0 and beam_pipeline.alter_label_if_ipython is _alter_label_unless_plain:
                beam_pipeline.alter_label_if_ipython = _beams_alter_label
            if _active_calls == 0 and statesampler.StateSampler is _StateSamplerUnlessPlain:
                statesampler.StateSampler = _BeamsStateSampler
            if _active_calls == 0 and userstate.get_dofn_specs is _dofn_specs_unless_plain:
                userstate.get_dofn_specs = _beams_dofn_specs
        _running_pipeline.reset(token)


class PlainPipeline(beam.Pipeline):
    """beam.Pipeline without Interactive Beam's label rewriting (see the module docstring)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.dofn_specs: dict = {}  # Beam's get_dofn_specs answers, by _specs_key

    def apply(self, transform, pvalueish=None, label=None):
        with _plain_calls(self):
            return super().apply(transform, pvalueish, label)

    def run(self, test_runner_api="AUTO"):
        with _plain_calls(self):
            try:
                return super().run(test_runner_api)
            finally:
                shutil.rmtree(self.local_tempdir, ignore_errors=True)
