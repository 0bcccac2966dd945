"""The tf.data options of load()'s pipelines: autotuning off, order as asked, a caller's later options win."""
from __future__ import annotations

import pytest

import tfrecorder
from tfrecorder.reading.pipeline_options import pipeline_options


@pytest.mark.parametrize("deterministic", [False, True])
def test_options_turn_autotuning_off_and_keep_the_order_asked(tf, deterministic):
    options = pipeline_options(tf, deterministic)
    assert options.autotune.enabled is False and options.deterministic is deterministic


def test_a_loaded_dataset_runs_untuned_unless_its_caller_turns_tuning_back_on(converted, tf):
    for decode_images in (True, False):
        dataset = tfrecorder.load(converted["tfrecord_dir"], "train", batch_size=4, decode_images=decode_images)
        assert dataset.options().autotune.enabled is False and dataset.options().deterministic is False
    tuned = tf.data.Options()
    tuned.autotune.enabled = True
    retuned = dataset.map(lambda batch: batch, num_parallel_calls=tf.data.AUTOTUNE).with_options(tuned)
    assert retuned.options().autotune.enabled is True  # the later options win
    assert sum(1 for _ in retuned) == sum(1 for _ in dataset)
