"""Work saved by resuming (issue 27): a default-mode image job killed at ~80% of its rows, then resumed.

    .venv/bin/python benchmarks/resume_bench.py                     # 20,000 images (the issue's target)
    .venv/bin/python benchmarks/resume_bench.py --images 2000       # a quick look
    .venv/bin/python benchmarks/resume_bench.py --rounds 3          # three rounds, interleaved

The table is Parquet with row groups of `--part-rows` rows (one source part each); images are small
distinct photo-like JPEGs (~80 KB, 500x375, as convert_bench.py's) generated once into
benchmarks/.corpus/resume-photos-<N>/. Each round runs three conversions with default options, each
in a fresh process and timed by wall clock from its start to its end (start-up included), the rounds
one after another so that full and resumed jobs are interleaved (machine load shared alike):
  full     - the uninterrupted job;
  killed   - the same job, SIGKILLed once part manifests covering `--kill-at` of the rows are committed;
  resumed  - the same call again: it continues the killed job.
Reported, as ratios measured in this one run: the share of images the resume read again (rows of the
parts it did not carry over / all rows; target at most 25%), and resumed / full wall time (target at
most 35%), per round and their median. The resumed job's shards are checked identical to the full job's.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = HERE / ".corpus"
OUT = HERE / ".out" / "resume"


PHOTO_SIZE = (375, 500)  # height, width: ~80 KB photo-like JPEGs, as in convert_bench.py
PHOTO_QUALITY = 87


def _write_photos(arguments: tuple[Path, range]) -> None:
    from PIL import Image

    from tfrecorder.sample_data import encode_image, photo_array

    folder, numbers = arguments
    for i in numbers:
        path = folder / f"{i:06d}.jpg"
        if not path.exists():
            data = encode_image(Image.fromarray(photo_array(PHOTO_SIZE[0], PHOTO_SIZE[1], i)), "JPEG",
                                quality=PHOTO_QUALITY)
            path.with_suffix(".tmp").write_bytes(data)
            path.with_suffix(".tmp").rename(path)


def make_table(images: int, part_rows: int) -> Path:
    """The corpus (generated once, on every core) and a Parquet table of it in row groups of `part_rows`."""
    import multiprocessing

    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = CORPUS / f"resume-photos-{images}"
    table = folder / f"table-{part_rows}.parquet"
    if table.exists():
        return table
    folder.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count() or 1
    with multiprocessing.get_context("fork").Pool(cores) as pool:
        pool.map(_write_photos, [(folder, range(start, images, cores)) for start in range(cores)])
    splits = ("TRAIN",) * 8 + ("VALIDATION", "TEST")
    frame = pd.DataFrame({
        "split": [splits[i % 10] for i in range(images)],
        "image_uri": [str(folder / f"{i:06d}.jpg") for i in range(images)],
        "label": [("cat", "dog", "fox")[i % 3] for i in range(images)],
    })
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), table, row_group_size=part_rows)
    return table


def code(table: Path, output: Path) -> str:
    return ("import tfrecorder; r = tfrecorder.convert(%r, %r, progress=False); "
            "import json; print(json.dumps({'resumed': r['resumed'], 'rows_in': r['rows_in'], "
            "'carried': r['rows_carried_over'] if r['resumed'] else 0, 'dir': r['tfrecord_dir']}))"
            % (str(table), str(output)))


def run(source: str, kill_when=None) -> tuple[float, dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", source], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    while kill_when is not None and process.poll() is None and not kill_when():
        time.sleep(0.01)
    if kill_when is not None and process.poll() is None:
        process.send_signal(signal.SIGKILL)
        process.wait()
        return time.perf_counter() - start, {}
    out, err = process.communicate()
    if process.returncode:
        sys.exit(f"conversion failed: {err.decode()[-2000:]}")
    return time.perf_counter() - start, json.loads(out.decode().strip().splitlines()[-1])


def committed_rows(output: Path) -> int:
    rows = 0
    for manifest in output.glob(".incomplete-*/_parts/*.json"):
        if manifest.name.endswith(".stats.json"):
            continue
        try:
            rows += json.loads(manifest.read_text())["rows"]
        except (OSError, ValueError):
            pass
    return rows


def shards(job: str) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(Path(job).glob("*.tfrecord"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=20_000)
    parser.add_argument("--part-rows", type=int, default=1_000, help="rows per Parquet row group (one part each)")
    parser.add_argument("--rounds", type=int, default=3, help="full/killed/resumed rounds, run one after another")
    parser.add_argument("--kill-at", type=float, default=0.8, help="share of rows committed when the job is killed")
    args = parser.parse_args()
    table = make_table(args.images, args.part_rows)
    print(f"images: {args.images:,} in parts of {args.part_rows:,} rows, validate='decode'", flush=True)
    ratios, rereads, ok = [], [], True
    for round_ in range(1, args.rounds + 1):
        shutil.rmtree(OUT, ignore_errors=True)
        full_seconds, full = run(code(table, OUT / "full"))
        resumed_out = OUT / "resumed"
        killed_seconds, _ = run(code(table, resumed_out),
                                lambda: committed_rows(resumed_out) >= args.kill_at * args.images)
        carried_before = committed_rows(resumed_out)
        resumed_seconds, resumed = run(code(table, resumed_out))
        reread = (resumed["rows_in"] - resumed["carried"]) / resumed["rows_in"]
        ratio = resumed_seconds / full_seconds
        identical = shards(full["dir"]) == shards(resumed["dir"])
        print(f"round {round_}: full {full_seconds:5.1f} s | killed at {killed_seconds:5.1f} s with "
              f"{carried_before:,} rows committed ({carried_before / args.images:.0%}) | resumed "
              f"{resumed_seconds:5.1f} s, {resumed['carried']:,} rows carried over | re-read {reread:.1%} | "
              f"resume/full {ratio:.2f} | shards identical: {identical}", flush=True)
        ratios.append(ratio)
        rereads.append(reread)
        ok = ok and resumed["resumed"] and identical
    ratio, reread = statistics.median(ratios), max(rereads)
    print(f"images read again by the resume: {reread:.1%} at most (target <= 25%)")
    print(f"resume / full wall time: median {ratio:.2f} of {len(ratios)} round(s) (target <= 0.35)")
    sys.exit(0 if ok and reread <= 0.25 and ratio <= 0.35 else 1)


if __name__ == "__main__":
    main()
