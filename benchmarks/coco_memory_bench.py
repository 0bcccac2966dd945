"""Peak memory of converting a COCO file shaped like COCO 2017 train (issue 30), with its goal beside it.

    .venv/bin/python benchmarks/coco_memory_bench.py             # 118,287 images, 860,001 annotations, ≈450 MB
    .venv/bin/python benchmarks/coco_memory_bench.py --scale 0.1 # a tenth of it, to try the script

A synthetic instances file of COCO 2017 train's shape is written as it streams (never held in memory):
its images, its annotations (one polygon of 26 points each, two decimals, as COCO's are), 80 categories
with COCO's sparse ids. Image files are 100 small PNGs that every image entry names in turn (the
pipeline's memory does not depend on image sizes: each image is read, encoded and dropped). The
conversion runs in a fresh child process, local runner, validate="header"; the figure is that
process's peak resident set (VmHWM) — the driver and the in-process Beam workers are that one process —
and the peak of any process it starts, read from /proc while it runs.

Goal: peak RSS of any process ≤ 1.5 GB (1,536 MiB). Measured (2 cores, 446 MB file): 268 MiB, 319 s;
before the join spilled records to bucket files (a GroupByKey on the image id, which Beam's in-process
runner holds in memory): 1,698 MiB.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGES, ANNOTATIONS = 118_287, 860_001
GOAL_MB = 1536
IMAGE_FILES = 100
SIDE = 64


def write_coco(path: Path, images: int, annotations: int) -> int:
    """Write the synthetic file item by item; returns its size in bytes."""
    rng = random.Random(0)
    category_ids = [i for i in range(1, 91) if i not in {12, 26, 29, 30, 45, 66, 68, 69, 71, 83}][:80]
    with open(path, "w") as out:
        out.write('{"info": {"description": "synthetic COCO 2017 train shape"}, "licenses": [], "images": [')
        for i in range(1, images + 1):
            out.write(("," if i > 1 else "") + json.dumps(
                {"license": 1, "file_name": f"img{i % IMAGE_FILES:03d}.png", "coco_url": "", "height": SIDE,
                 "width": SIDE, "date_captured": "2013-11-14 17:02:52", "flickr_url": "", "id": i}))
        out.write('], "annotations": [')
        for a in range(1, annotations + 1):
            x, y = rng.uniform(1, SIDE / 2), rng.uniform(1, SIDE / 2)
            points = [round(v, 2) for k in range(26) for v in (x + rng.uniform(0, SIDE / 2 - 2), y + rng.uniform(0, SIDE / 2 - 2))]
            xs, ys = points[0::2], points[1::2]
            out.write(("," if a > 1 else "") + json.dumps(
                {"segmentation": [points], "area": round(rng.uniform(10, 900), 3), "iscrowd": 0,
                 "image_id": rng.randint(1, images), "bbox": [min(xs), min(ys), round(max(xs) - min(xs), 2),
                                                            round(max(ys) - min(ys), 2)],
                 "category_id": rng.choice(category_ids), "id": a}))
        out.write('], "categories": [')
        out.write(",".join(json.dumps({"supercategory": "thing", "id": i, "name": f"class{i}"}) for i in category_ids))
        out.write("]}")
    return path.stat().st_size


CHILD = """
import sys, json
sys.path.insert(0, {root!r})
import tfrecorder
result = tfrecorder.convert({source!r}, {output!r}, validate="header", progress=False, beam_options={beam_options!r})
peak = 0
with open("/proc/self/status") as status:
    for line in status:
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 1024
print(json.dumps({{"peak_mb": peak, "rows_in": result.metadata["rows_in"], "written": result.metadata["rows_written"],
                   "discarded": result.metadata["discarded"], "records": result.metadata["records_written"]}}))
"""


def _descendants(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        try:
            with open(f"/proc/{parent}/task/{parent}/children") as children:
                kids = [int(k) for k in children.read().split()]
        except OSError:
            kids = []
        found += kids
        frontier += kids
    return found


def _hwm(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of COCO 2017 train's size")
    parser.add_argument("--workers", type=int, default=0,
                        help="Beam worker processes (direct_running_mode=multi_processing); 0: the in-process runner")
    args = parser.parse_args()
    from PIL import Image

    sys.path[:0] = [str(ROOT)]
    from tfrecorder.sample_data import photo_array

    with tempfile.TemporaryDirectory(prefix="coco-bench-") as work:
        work_dir = Path(work)
        images_dir = work_dir / "train"
        images_dir.mkdir()
        for i in range(IMAGE_FILES):
            Image.fromarray(photo_array(SIDE, SIDE, i)).save(images_dir / f"img{i:03d}.png")
        (work_dir / "annotations").mkdir()
        source = work_dir / "annotations" / "instances_train.json"
        started = time.monotonic()
        size = write_coco(source, int(IMAGES * args.scale), int(ANNOTATIONS * args.scale))
        print(f"synthetic file: {size / 1e6:,.0f} MB, {int(IMAGES * args.scale):,} images, "
              f"{int(ANNOTATIONS * args.scale):,} annotations ({time.monotonic() - started:.0f} s to write)")
        beam_options = ({"direct_running_mode": "multi_processing", "direct_num_workers": args.workers}
                        if args.workers else {"direct_num_workers": 1})
        code = CHILD.format(root=str(ROOT), source=str(source), output=str(work_dir / "out"), beam_options=beam_options)
        started = time.monotonic()
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                                 env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        others = {}

        def watch() -> None:
            while child.poll() is None:
                for pid in _descendants(child.pid):
                    others[pid] = max(others.get(pid, 0.0), _hwm(pid))
                time.sleep(0.5)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        out, _ = child.communicate()
        watcher.join()
        if child.returncode != 0:
            print(f"conversion failed (exit {child.returncode})")
            return 1
        figures = json.loads(out.strip().splitlines()[-1])
        peak = max([figures["peak_mb"], *others.values()])
        print(f"conversion: {time.monotonic() - started:.0f} s; rows in {figures['rows_in']:,}, written "
              f"{figures['written']:,}, discarded {figures['discarded']:,}, records {figures['records']:,}")
        print(f"{'peak RSS of any process':<40} {peak:>9,.0f} MiB   goal: <= {GOAL_MB} MiB   "
              f"{'ok' if peak <= GOAL_MB else 'MISSED'}  (converting process {figures['peak_mb']:,.0f} MiB, "
              f"{len(others)} other processes)")
        return 0 if peak <= GOAL_MB else 2


if __name__ == "__main__":
    sys.exit(main())
