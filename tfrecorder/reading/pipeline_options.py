"""The tf.data options of the pipelines `load()` builds.

tf.data's autotuning is turned off: parallel stages asked for `tf.data.AUTOTUNE` then run at the smaller
of 16 and the schedulable cores (TensorFlow's starting value, kept instead of tuned). With autotuning
on, about half of the passes over the same images ran at ≈1.3 of 2 cores with a third of the CPU idle
on the development machine (2 vCPUs, as many as a standard Colab runtime has), whatever the parallelism
asked, the tuning algorithm or the budgets (2026-11-27: decoding and resizing 2,000 JPEGs, ≈770 against
≈1,150 images/s, no steal time); with it off every pass kept both cores busy, for `load()` with and
without decoding (docs/performance.md, "Input pipeline"). The options apply to the dataset's whole
graph: a caller who chains more stages and wants them tuned passes `tf.data.Options()` with
`autotune.enabled = True` to `with_options` on the result (the later options win).
"""
from __future__ import annotations

from typing import Any


def pipeline_options(tf: Any, deterministic: bool) -> Any:
    """tf.data.Options for a `load()` pipeline: autotuning off, elements in order if `deterministic`."""
    options = tf.data.Options()
    options.deterministic = deterministic
    options.autotune.enabled = False
    return options
