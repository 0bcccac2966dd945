"""Helpers of the resume tests (issue 27): small multi-part sources, a conversion in a subprocess killed
at a chosen moment, and the comparison of two published jobs apart from their timing fields."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

TIMING_FIELDS = ("created_utc", "job_name", "resumed")  # what may differ between a resumed and an uninterrupted run
NAMED_FIELDS = ("name", "description")  # dataset_info.json: the job's name and time


def image_parquet(folder: Path, rows: int = 1200, row_group: int = 100, images: int = 40) -> Path:
    """A Parquet table of `rows` image rows in row groups of `row_group` (one part each), with a few
    rows that are discarded (a missing file, a bad label)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    for i in range(images):
        Image.fromarray(rng.integers(0, 255, (8 + i % 7, 9, 3), dtype=np.uint8)).save(folder / f"img{i}.png")
    frame = pd.DataFrame({
        "split": [("TRAIN", "TRAIN", "VALIDATION", "TEST")[i % 4] for i in range(rows)],
        "image_uri": [str(folder / f"img{i % images}.png") if i % 97 else str(folder / "missing.png")
                      for i in range(rows)],
        "label": [("cat", "dog", "owl")[i % 3] for i in range(rows)],
        "weight": [float(i) for i in range(rows)],
    })
    path = folder / "images.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=row_group)
    return path


def tabular_csv(folder: Path, rows: int = 6000) -> Path:
    """A CSV of `rows` image-free rows with a few malformed lines."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "table.csv"
    with open(path, "w") as stream:
        stream.write("split,label,value,text\n")
        for i in range(rows):
            if i % 503 == 17:
                stream.write(f"TRAIN,a,{i}\n")  # a field short: a discarded line with its number
                continue
            stream.write(f"{('TRAIN', 'TRAIN', 'VALIDATION', 'TEST')[i % 4]},{'abc'[i % 3]},{i * 0.5},row {i}\n")
    return path


PARTS_PATCH = ("import sys, tfrecorder, tfrecorder.sources.csv_slicing as s; s.RANGE_BYTES = 20_000; "
               "sys.modules['tfrecorder.convert'].DETECTION_BUCKET_ROWS = 100; ")  # small sources, several parts


def small_parts() -> None:
    """In this process: what PARTS_PATCH does in a run's."""
    exec(PARTS_PATCH)


def convert_code(source: Path, output_dir: Path, **options) -> str:
    """Python code converting `source` into `output_dir` (one in-process worker; small CSV ranges and
    detection buckets, so that a small source has several parts: PARTS_PATCH)."""
    patch = PARTS_PATCH
    arguments = ", ".join(f"{key}={value!r}" for key, value in options.items())
    return (f"{patch}import tfrecorder; r = tfrecorder.convert({str(source)!r}, {str(output_dir)!r}, progress=False, "
            f"beam_options={{'direct_num_workers': 1}}, {arguments}); print('RESUMED', r['resumed'])")


def run_killed(code: str, reached: Callable[[], bool], timeout: float = 120) -> Optional[int]:
    """Run `code` in a new Python process and SIGKILL it once `reached()` is true; returns its exit
    code if it ended first, else None."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TF_CPP_MIN_LOG_LEVEL": "2"}
    process = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    try:
        while process.poll() is None and not reached():
            assert time.monotonic() < deadline, "the conversion neither ended nor reached the moment"
            time.sleep(0.002)
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()
            return None
        _out, err = process.communicate()
        assert process.returncode == 0, err.decode(errors="replace")[-3000:]
        return process.returncode
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def job_contents(job: Path) -> dict[str, str]:
    """Every file of a published job by digest; metadata.json without its timing fields, the job's own
    name (in its keys sidecars' names) replaced."""
    contents = {}
    for path in sorted(job.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if path.name in ("metadata.json", "dataset_info.json"):
            data = data.replace(job.name.encode(), b"<job>")  # keys sidecars are named after the job
            document = json.loads(data)
            for field in TIMING_FIELDS if path.name == "metadata.json" else NAMED_FIELDS:
                document.pop(field, None)
            data = json.dumps(document, sort_keys=True).encode()
        contents[str(path.relative_to(job)).replace(job.name, "<job>")] = hashlib.sha256(data).hexdigest()
    return contents


def published(output_dir: Path) -> list[Path]:
    return sorted(p for p in output_dir.iterdir() if not p.name.startswith(".")) if output_dir.exists() else []


def incomplete(output_dir: Path) -> list[Path]:
    return sorted(output_dir.glob(".incomplete-*")) if output_dir.exists() else []


def fingerprint_file(job: Path) -> Path:
    """The fingerprint of the incomplete job `job` (`.incomplete-<name>`): in `.resume-<name>/` beside it."""
    return job.parent / (".resume-" + job.name[len(".incomplete-"):]) / "fingerprint.json"


def manifests(output_dir: Path) -> int:
    return sum(1 for job in incomplete(output_dir) for p in (job / "_parts").glob("*.json")
               if not p.name.endswith(".stats.json"))


def detection_csv(folder: Path, images: int = 300, files: int = 30) -> Path:
    """A detection table (one row per box, 1–3 boxes per image) of `images` images, with a few bad boxes."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(11)
    for i in range(files):
        Image.fromarray(rng.integers(0, 255, (16, 12 + i % 5, 3), dtype=np.uint8)).save(folder / f"f{i}.png")
    lines = ["split,image_uri,label,xmin,ymin,xmax,ymax"]
    for i in range(images):
        # distinct URIs per image: the same file under other names (a symbolic link each)
        link = folder / f"img{i}.png"
        if not link.exists():
            link.symlink_to(folder / f"f{i % files}.png")
        split = ("TRAIN", "TRAIN", "VALIDATION", "TEST")[i % 4]
        for box in range(1 + i % 3):
            xmax = 0.5 + box / 10 if i % 61 else 1.5  # out of range: a discarded box
            lines.append(f"{split},{link},{('car', 'bus', 'person')[(i + box) % 3]},0.1,0.2,{xmax},0.9")
    path = folder / "boxes.csv"
    path.write_text("\n".join(lines) + "\n")
    return path
