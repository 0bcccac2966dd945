"""The pure parts of the conversion graph's DoFns and CombineFns, without running a pipeline."""
from __future__ import annotations

import pytest

from beam_pipelines import transforms
from beam_pipelines.transforms import DISCARD, PrepareRows, VocabularyFn
from tfrecorder import types
from beam_pipelines.job_config import JobConfig
from tfrecorder.schema import Schema


def _config() -> JobConfig:
    schema = Schema({"split": types.SplitKey, "image_uri": types.ImageUri, "label": types.StringLabel})
    return JobConfig(
        source_kind="csv", source_path="", schema=schema, columns=("split", "image_uri", "label"),
        base_dir="", final_dir="", temp_dir="", job_name="", runner="DirectRunner", split_ratios=(0.8, 0.1, 0.1),
        num_shards=0, max_shard_bytes=1 << 20, compression=None, image_size=None, validate="header",
    )


def test_prepare_emits_one_list_per_batch_and_discards_row_by_row():
    prepare = PrepareRows(_config())
    prepare.setup()
    good = {"split": "train", "image_uri": "a.jpg", "label": "cat"}
    bad_split = {"split": "holdout", "image_uri": "b.jpg", "label": "dog"}
    no_label = {"split": "TEST", "image_uri": "c.jpg", "label": None}
    outputs = list(prepare.process([good, bad_split, no_label]))
    main = [o for o in outputs if isinstance(o, list)]
    discards = [o.value for o in outputs if getattr(o, "tag", None) == DISCARD]
    assert main == [[("TRAIN", good)]]
    assert [(row["image_uri"], reason.split(":")[0]) for row, reason in discards] == [
        ("b.jpg", "unknown split"), ("c.jpg", "empty label")
    ]
    only_bad = list(prepare.process([bad_split]))
    assert len(only_bad) == 1 and only_bad[0].tag == DISCARD  # no empty batch is emitted


def test_vocabulary_merges_batches_into_sorted_distinct_labels():
    fn = VocabularyFn()
    first = fn.add_input(fn.create_accumulator(), {"label": {"dog", "cat"}})
    second = fn.add_input(fn.add_input(fn.create_accumulator(), {"label": {"ant"}}), {"kind": {"b", "a"}})
    merged = fn.merge_accumulators([first, second, fn.create_accumulator()])
    assert fn.extract_output(merged) == {"label": ["ant", "cat", "dog"], "kind": ["a", "b"]}


def test_read_image_discards_problems_of_the_path_and_raises_storage_failures(tmp_path):
    from tfrecorder.row_encoder import RowError

    image = tmp_path / "a.jpg"
    image.write_bytes(b"bytes")
    assert transforms.read_image(str(image)) == b"bytes"
    row_problems = {
        str(tmp_path / "missing.jpg"): "missing file: ",
        str(image / "under-a-file.jpg"): "missing file: ",
        str(tmp_path): "not a file: ",
        str(tmp_path / ("x" * 300)): "invalid path: ",
        "nul\x00byte.jpg": "invalid path: ",
        "/proc/self/mem": r"not a regular file: /proc/self/mem is a kernel interface file",  # EIO if read
        "/dev/zero": "not a regular file: /dev/zero is a character device",  # endless if read
        "https://example.com/a.jpg": "unsupported image location: http\\(s\\) URLs are not read; copy the images",
        "ftp://example.com/a.jpg": "unsupported image location: no installed file system reads ftp:// URLs",
    }
    for uri, reason in row_problems.items():
        with pytest.raises(RowError, match=f"^{reason}"):
            transforms.read_image(uri)
    with pytest.raises(RowError, match=r"^file too large: .*a.jpg holds 5 bytes, more than 4 \(max_image_bytes\)"):
        transforms.read_image(str(image), max_bytes=4)
    assert transforms.read_image(str(image), max_bytes=5) == b"bytes"


EXHAUSTED = """
import os, resource, sys
from beam_pipelines import transforms
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
try:
    transforms.read_image(sys.argv[1])
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def test_a_failure_of_the_worker_not_of_the_file_raises_storage_read_error(tmp_path):
    """A process out of file descriptors cannot read any image: the job fails (StorageReadError), no
    row is discarded for it."""
    import subprocess
    import sys

    image = tmp_path / "a.jpg"
    image.write_bytes(b"bytes")
    done = subprocess.run([sys.executable, "-c", EXHAUSTED, str(image)], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == f"StorageReadError [Errno 24] could not read {image}: Too many open files", done.stderr
