"""An interrupted append is continued (issues 27 and 28): a run killed part-way leaves its committed parts,
the next run of the same append (same parent, same duplicates mode) continues them and publishes the
identical version, with duplicates of the base decided inside the parts it commits; bundle replay too."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import tfrecorder
from support.resume_runs import PARTS_PATCH, image_parquet, incomplete, manifests, published, run_killed

ONE_WORKER = {"direct_num_workers": 1}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("resumed_append")
    source = image_parquet(folder / "images", rows=300, row_group=100)
    return tfrecorder.convert(str(source), str(folder / "versions"), job_label="pets", progress=False,
                              beam_options=ONE_WORKER)["tfrecord_dir"]


@pytest.fixture(scope="module")
def new_rows(base, tmp_path_factory) -> Path:
    """400 new rows in 8 parts: new images, base images by URI and copies of base images under new names."""
    folder = tmp_path_factory.mktemp("new_rows")
    rng = np.random.default_rng(28)
    for i in range(30):
        Image.fromarray(rng.integers(0, 255, (7 + i % 5, 11, 3), dtype=np.uint8)).save(folder / f"new{i}.png")
    images = Path(base).parent.parent / "images"
    for i in range(3):
        (folder / f"copy{i}.png").write_bytes((images / f"img{i}.png").read_bytes())
    uris = [str(images / f"img{i % 40}.png") if i % 50 == 7 else str(folder / f"copy{i % 3}.png") if i % 50 == 9
            else str(folder / f"new{i % 30}.png") for i in range(400)]
    frame = pd.DataFrame({"split": [("TRAIN", "TRAIN", "VALIDATION", "TEST")[i % 4] for i in range(400)],
                          "image_uri": uris, "label": [("cat", "emu", "owl", "yak")[i % 4] for i in range(400)],
                          "weight": [float(i) for i in range(400)]})
    path = folder / "new.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=50)
    return path


def append_code(base: str, source: Path, output_dir: Path) -> str:
    return (f"{PARTS_PATCH}import tfrecorder; r = tfrecorder.append({base!r}, {str(source)!r}, "
            f"output_dir={str(output_dir)!r}, progress=False, beam_options={ONE_WORKER!r})")


def version_contents(job: Path) -> dict[str, str]:
    """Every file of a version by digest, its own name replaced (keys sidecars are named after it) and
    metadata.json without its timing fields."""
    contents = {}
    for path in sorted(p for p in job.rglob("*") if p.is_file()):
        data = path.read_bytes().replace(job.name.encode(), b"<job>")
        if path.name in ("metadata.json", "dataset_info.json"):
            document = json.loads(data)
            for field in ("created_utc", "resumed", "name", "description"):
                document.pop(field, None)
            data = json.dumps(document, sort_keys=True).encode()
        contents[str(path.relative_to(job)).replace(job.name, "<job>")] = hashlib.sha256(data).hexdigest()
    return contents


@pytest.fixture(scope="module")
def reference(base, new_rows, tmp_path_factory) -> dict:
    result = tfrecorder.append(base, str(new_rows), output_dir=tmp_path_factory.mktemp("reference"),
                               progress=False, beam_options=ONE_WORKER)
    assert result["discarded"] == 16 and result["discard_reasons"] == {"already in base": 16}
    return version_contents(Path(result["tfrecord_dir"]))


def test_a_killed_append_is_continued_to_the_identical_version(base, new_rows, reference, tmp_path):
    output = tmp_path / "out"
    assert run_killed(append_code(base, new_rows, output), lambda: manifests(output) >= 3) is None
    (job,) = incomplete(output)
    assert published(output) == []  # nothing half-written looks finished
    with pytest.raises(ValueError, match="option base differs"):  # another duplicates mode is another job
        tfrecorder.append(base, str(new_rows), output_dir=output, duplicates="keep", resume=True, progress=False)
    result = tfrecorder.append(base, str(new_rows), output_dir=output, progress=False, beam_options=ONE_WORKER)
    assert result["resumed"] is True and result["parts_carried_over"] >= 3
    assert Path(result["tfrecord_dir"]).name == job.name[len(".incomplete-"):]
    assert Path(result["tfrecord_dir"]).name.endswith("-v2")
    assert version_contents(Path(result["tfrecord_dir"])) == reference
    assert tfrecorder.verify(result["tfrecord_dir"]).ok


def test_a_resumed_append_replaying_bundles_gives_the_identical_version(base, new_rows, reference, tmp_path):
    output = tmp_path / "out"
    run_killed(append_code(base, new_rows, output), lambda: manifests(output) >= 2)
    result = tfrecorder.append(base, str(new_rows), output_dir=output, progress=False,
                               beam_options={**ONE_WORKER, "direct_runner_bundle_repeat": 1})
    assert result["resumed"] is True
    assert version_contents(Path(result["tfrecord_dir"])) == reference
