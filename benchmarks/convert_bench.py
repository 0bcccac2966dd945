"""Conversion speed and memory: tfrecorder.convert against the raw-copy floor and hand-written loops.

    .venv/bin/python benchmarks/convert_bench.py            # N=5000 images, 5 repeats (make bench)
    .venv/bin/python benchmarks/convert_bench.py --images 500 --repeats 1 --memory-images 200   # quick

Variants, timed interleaved (the order rotates every repeat) and reported as the median of wall-clock
and of process CPU time (all four run in this process; CPU time is the steadier figure on a shared
machine):
  (1) copy     - read every image file, write its bytes once into one output file (the floor);
  (2) naive    - the loop a user writes: one thread, tf.io.TFRecordWriter, one tf.train.Example per
                 row with the bytes, height/width from the PIL header and the label index;
  (3) beam     - a plain hand-written Beam pipeline: ReadFromText -> Map(row -> Example) -> WriteToTFRecord;
  (4) convert  - tfrecorder.convert(csv, out) with default options.
Library imports are excluded from every timing; pipeline construction and start-up are included.
Peak RSS of (4) is measured in fresh processes at M and 5xM images (smaller images), and a 100-image
conversion is timed in fresh processes right after `import tfrecorder`.

The corpus (photo-like JPEGs, ~500x375, ~80 KB) is generated once and cached in benchmarks/.corpus/.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = HERE / ".corpus"
OUT = HERE / ".out"
LABELS = ("cat", "dog", "fox")
PHOTO_SIZE = (375, 500)  # height, width
PHOTO_QUALITY = 87  # with photo_array's noise this gives ~80 KB per 500x375 JPEG
SMALL_SIZE = (96, 128)  # images of the memory pair: rows matter there, not bytes


def split_for(i: int) -> str:
    return "TRAIN" if i % 10 < 8 else ("VALIDATION" if i % 10 == 8 else "TEST")


def make_corpus(name: str, count: int, size: tuple[int, int], quality: int, rows: int | None = None) -> Path:
    """`count` distinct JPEGs under .corpus/<name>/ (reused when present) and a CSV of `rows` rows
    (default `count`; more rows cycle over the files). Returns the CSV path."""
    import numpy as np  # noqa: F401  (photo_array needs it)
    from PIL import Image

    sys.path.insert(0, str(ROOT))
    from tfrecorder.sample_data import encode_image, photo_array

    directory = CORPUS / name
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = directory / f"{LABELS[i % 3]}_{i:06d}.jpg"
        if not path.exists():
            data = encode_image(Image.fromarray(photo_array(size[0], size[1], i)), "JPEG", quality=quality)
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
        paths.append(path)
    rows = count if rows is None else rows
    csv_path = CORPUS / f"{name}-{rows}.csv"
    with open(csv_path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["split", "image_uri", "label"])
        for i in range(rows):
            writer.writerow([split_for(i), str(paths[i % count]), LABELS[i % count % 3]])
    return csv_path


def read_rows(csv_path: Path) -> list[tuple[str, str, str]]:
    with open(csv_path, newline="") as stream:
        reader = csv.reader(stream)
        next(reader)
        return [tuple(r) for r in reader]


def dir_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file() and p.suffix != ".json"
               and p.name != "discarded.csv")


# --- the four variants; each writes under `out` and returns nothing ------------------------------


def run_copy(csv_path: Path, out: Path) -> None:
    with open(out / "all.bin", "wb") as sink:
        for _split, uri, _label in read_rows(csv_path):
            with open(uri, "rb") as source:
                sink.write(source.read())


def naive_example(tf, Image, io, uri: str, label_index: int):
    with open(uri, "rb") as stream:
        data = stream.read()
    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
    feature = {
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])),
        "image_height": tf.train.Feature(int64_list=tf.train.Int64List(value=[height])),
        "image_width": tf.train.Feature(int64_list=tf.train.Int64List(value=[width])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label_index])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def run_naive(csv_path: Path, out: Path) -> None:
    import io

    import tensorflow as tf
    from PIL import Image

    rows = read_rows(csv_path)
    vocabulary = {label: i for i, label in enumerate(sorted({r[2] for r in rows if r[0] == "TRAIN"}))}
    with tf.io.TFRecordWriter(str(out / "all.tfrecord")) as writer:
        for _split, uri, label in rows:
            writer.write(naive_example(tf, Image, io, uri, vocabulary.get(label, -1)))


def _beam_row_to_example(line: str, vocabulary: dict) -> bytes:
    import io

    import tensorflow as tf
    from PIL import Image

    _split, uri, label = next(csv.reader([line]))
    return naive_example(tf, Image, io, uri, vocabulary.get(label, -1))


def run_beam(csv_path: Path, out: Path) -> None:
    import apache_beam as beam

    from tfrecorder.runners import make_pipeline

    vocabulary = {label: i for i, label in enumerate(sorted(LABELS))}
    with make_pipeline("DirectRunner") as pipeline:
        (
            pipeline
            | beam.io.ReadFromText(str(csv_path), skip_header_lines=1)
            | beam.Map(_beam_row_to_example, vocabulary)
            | beam.io.WriteToTFRecord(str(out / "all"), file_name_suffix=".tfrecord")
        )


def run_convert(csv_path: Path, out: Path) -> None:
    import tfrecorder

    tfrecorder.convert(str(csv_path), str(out))


VARIANTS = {"copy": run_copy, "naive": run_naive, "beam": run_beam, "convert": run_convert}


def time_variants(csv_path: Path, repeats: int) -> dict[str, dict]:
    import apache_beam  # noqa: F401  library imports are excluded from the timings
    import tensorflow  # noqa: F401

    import tfrecorder  # noqa: F401
    from beam_pipelines import pipeline  # noqa: F401

    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    cpu: dict[str, list[float]] = {name: [] for name in VARIANTS}
    out_bytes: dict[str, int] = {}
    names = list(VARIANTS)
    for rep in range(repeats):
        order = names[rep % len(names):] + names[: rep % len(names)]
        for name in order:
            out = OUT / f"{name}-{rep}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            cpu_started, started = time.process_time(), time.perf_counter()
            VARIANTS[name](csv_path, out)
            times[name].append(time.perf_counter() - started)
            cpu[name].append(time.process_time() - cpu_started)  # every variant runs in this process
            out_bytes[name] = dir_bytes(out)
            shutil.rmtree(out, ignore_errors=True)
            print(f"  repeat {rep + 1}/{repeats} {name:8s} {times[name][-1]:7.2f} s  cpu {cpu[name][-1]:6.2f} s",
                  file=sys.stderr, flush=True)
    return {name: {"seconds": statistics.median(times[name]), "cpu_seconds": statistics.median(cpu[name]),
                   "all_seconds": times[name], "all_cpu_seconds": cpu[name], "output_bytes": out_bytes[name]}
            for name in names}


# --- fresh-process measurements ------------------------------------------------------------------


def peak_rss_mb() -> float:
    """This process's peak RSS. VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking
    parent (here the benchmark process with TensorFlow loaded) into a child that then calls exec."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # not Linux


def child_convert(csv_path: str, out: str) -> None:
    """Run in a fresh process: import, convert, print seconds and peak RSS as JSON."""
    import tfrecorder

    started = time.perf_counter()
    result = tfrecorder.convert(csv_path, out)
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "rss_mb": peak_rss_mb(), "records": result.metadata["records_written"]}))


def in_fresh_process(csv_path: Path, tag: str) -> dict:
    out = OUT / f"child-{tag}"
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, __file__, "--child", str(csv_path), str(out)], env=env, cwd=ROOT,
                          check=True, capture_output=True, text=True)
    shutil.rmtree(out, ignore_errors=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=5000, help="corpus size N (default 5000)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats of each variant (median reported)")
    parser.add_argument("--memory-images", type=int, default=None,
                        help="M for the peak-RSS pair (M and 5xM small images; default N)")
    parser.add_argument("--small-runs", type=int, default=3, help="fresh-process 100-image conversions (median)")
    parser.add_argument("--only", choices=sorted(VARIANTS), action="append", help="time only these variants")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", nargs=2, metavar=("CSV", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.child:
        child_convert(*args.child)
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.only:
        for name in set(VARIANTS) - set(args.only):
            del VARIANTS[name]

    print(f"corpus: {args.images} photo-like JPEGs {PHOTO_SIZE[1]}x{PHOTO_SIZE[0]}", file=sys.stderr, flush=True)
    csv_path = make_corpus("photos", args.images, PHOTO_SIZE, PHOTO_QUALITY)
    input_bytes = sum(os.path.getsize(r[1]) for r in read_rows(csv_path))
    results = time_variants(csv_path, args.repeats)

    memory_images = args.memory_images or args.images
    small_csv = make_corpus("small", memory_images, SMALL_SIZE, 90)
    small_csv_5x = make_corpus("small", memory_images, SMALL_SIZE, 90, rows=5 * memory_images)
    rss = {"rows": memory_images, "at_n": in_fresh_process(small_csv, "rss-n"),
           "at_5n": in_fresh_process(small_csv_5x, "rss-5n")}
    hundred_csv = make_corpus("photos", args.images, PHOTO_SIZE, PHOTO_QUALITY, rows=100)
    hundred = [in_fresh_process(hundred_csv, f"100-{i}")["seconds"] for i in range(args.small_runs)]

    report(args.images, input_bytes, results, rss, hundred, args.repeats)
    if args.json:
        args.json.write_text(json.dumps({"images": args.images, "input_bytes": input_bytes, "variants": results,
                                         "rss": rss, "hundred_seconds": hundred}, indent=2))


def report(images: int, input_bytes: int, results: dict, rss: dict, hundred: list[float], repeats: int) -> None:
    mb = input_bytes / 1e6
    print(f"\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end; "
          f"N = {images} images, {mb:.0f} MB input; median of {repeats}")
    print("| variant | seconds | images/s | MB/s | CPU seconds | output / input bytes |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in results.items():
        print(f"| {name} | {r['seconds']:.2f} | {images / r['seconds']:.0f} | {mb / r['seconds']:.1f} | "
              f"{r['cpu_seconds']:.2f} | {r['output_bytes'] / input_bytes:.4f} |")
    if "convert" in results:
        for base in ("copy", "naive", "beam"):
            if base in results:
                wall = results[base]["seconds"] / results["convert"]["seconds"]
                cpu = results[base]["cpu_seconds"] / results["convert"]["cpu_seconds"]
                print(f"convert / {base} speed: {wall:.2f}x (wall clock), {cpu:.2f}x (CPU time)")
    at_n, at_5n = rss["at_n"], rss["at_5n"]
    print(f"peak RSS of convert: {at_n['rss_mb']:.0f} MB at {rss['rows']} rows, {at_5n['rss_mb']:.0f} MB at "
          f"{5 * rss['rows']} rows (ratio {at_5n['rss_mb'] / at_n['rss_mb']:.2f})")
    print(f"100-image conversion after import: median {statistics.median(hundred):.2f} s "
          f"({', '.join(f'{s:.2f}' for s in hundred)})")


if __name__ == "__main__":
    main()
