"""Conversion speed and memory: tfrecorder.convert against the raw-copy floor and hand-written loops.

    .venv/bin/python benchmarks/convert_bench.py            # N=5000 images, 5 repeats (make bench)
    .venv/bin/python benchmarks/convert_bench.py --images 500 --repeats 1 --large-repeats 1 --memory-images 200

Variants, timed interleaved (the order rotates every repeat) and reported as the median of wall clock
and of CPU time (this process plus its finished worker processes; the steadier figure on a shared
machine); the two bounds, copy and decode-bound, as their fastest repeat (the best the machine did):
  copy            - read every image file, write its bytes once into one output file (the floor);
  hash-copy       - header mode's own floor: every core (a forked process each, a share of the rows)
                    reads each image, takes its SHA-256 (what the keys sidecar and the duplicate digest
                    need of every image) and writes its bytes once; no Example, framing or start-up;
  naive           - the loop a user writes: one thread, tf.io.TFRecordWriter, one tf.train.Example per
                    row with the bytes, height/width from the PIL header and the label index;
  careful         - the naive loop plus tf.io.decode_image on every image to skip undecodable ones
                    (the guarantee of convert's default mode);
  beam            - a plain hand-written Beam pipeline: ReadFromText -> Map(row -> Example) -> WriteToTFRecord;
  convert         - tfrecorder.convert(csv, out) with default options (validate="decode");
  convert-header  - tfrecorder.convert(csv, out, validate="header") (large jobs: forked encoding
                    processes, one per core, chosen automatically);
  convert-header-1core - the same kept on the in-process worker (direct_num_workers=1; 4xN rows only);
  decode-bound    - the default mode's bound: TensorFlow's ratio-8 JPEG decode alone on every core
                    (tf.data parallel map, AUTOTUNE, untuned as load() runs, of
                    tf.io.decode_jpeg(..., ratio=8)) over the same files' bytes, read into memory before
                    the timing starts.
All run on the N-row table but hash-copy; copy, hash-copy, naive, convert-header and convert-header-1core on a
4xN-row table cycling over the same files. Library imports are excluded from every timing; pipeline
construction and start-up are included. Each variant starts after `os.sync()` (untimed), so that
none pays for the kernel writing back the previous variant's output. Peak RSS of convert is measured in fresh processes at M and
5xM rows (small images), and a 100-image conversion is timed in fresh processes right after
`import tfrecorder` (header mode and default mode, each with and without TensorFlow imported).

`--tensorflow` (default both): the convert variants run with TensorFlow imported in the converting
process (as in a notebook that trains: this process, which imports it for the loops), without it
(a long-lived helper process that never imports it, timed the same way, each run still interleaved
with the others: variants named "... no-TF"), or both.
The load average before and after is printed: wall-clock ratios are only meaningful on a quiet machine.

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

from package_bytecode import compile_package  # beside this script

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = HERE / ".corpus"
OUT = HERE / ".out"
LABELS = ("cat", "dog", "fox")
PHOTO_SIZE = (375, 500)  # height, width
PHOTO_QUALITY = 87  # with photo_array's noise this gives ~80 KB per 500x375 JPEG
HUNDRED_GOAL_SECONDS = {"header": 0.5, "decode": 0.6}  # issue 32: a 100-row job after import tfrecorder
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


def run_hash_copy(csv_path: Path, out: Path) -> None:
    """Header mode's floor: on every core, a forked process reads its share of the images, hashes each
    (SHA-256) and writes its bytes once into its own file."""
    import hashlib

    rows = read_rows(csv_path)
    cores = len(os.sched_getaffinity(0))
    children = []
    for share in range(cores):
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                with open(out / f"share-{share}.bin", "wb") as sink:
                    for _split, uri, _label in rows[share::cores]:
                        with open(uri, "rb") as source:
                            data = source.read()
                        hashlib.sha256(data).digest()
                        sink.write(data)
                status = 0
            finally:
                os._exit(status)
        children.append(pid)
    failed = [pid for pid in children if os.waitpid(pid, 0)[1] != 0]
    if failed:
        raise RuntimeError(f"hash-copy: {len(failed)} of {cores} processes failed")


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


def run_careful(csv_path: Path, out: Path) -> None:
    """The naive loop plus the check a careful user adds: tf.io.decode_image on every image, skipping
    the ones TensorFlow cannot decode (what convert's default mode guarantees)."""
    import tensorflow as tf

    rows = read_rows(csv_path)
    vocabulary = {label: i for i, label in enumerate(sorted({r[2] for r in rows if r[0] == "TRAIN"}))}
    with tf.io.TFRecordWriter(str(out / "all.tfrecord")) as writer:
        for _split, uri, label in rows:
            with open(uri, "rb") as stream:
                data = stream.read()
            try:
                height, width, _channels = tf.io.decode_image(data, expand_animations=False).shape
            except tf.errors.InvalidArgumentError:
                continue
            feature = {
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])),
                "image_height": tf.train.Feature(int64_list=tf.train.Int64List(value=[height])),
                "image_width": tf.train.Feature(int64_list=tf.train.Int64List(value=[width])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[vocabulary.get(label, -1)])),
            }
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def _beam_row_to_example(line: str, vocabulary: dict) -> bytes:
    import io

    import tensorflow as tf
    from PIL import Image

    _split, uri, label = next(csv.reader([line]))
    return naive_example(tf, Image, io, uri, vocabulary.get(label, -1))


def run_beam(csv_path: Path, out: Path) -> None:
    import apache_beam as beam

    from beam_pipelines.launches.runners import local_pipeline

    vocabulary = {label: i for i, label in enumerate(sorted(LABELS))}
    with local_pipeline() as pipeline:
        (
            pipeline
            | beam.io.ReadFromText(str(csv_path), skip_header_lines=1)
            | beam.Map(_beam_row_to_example, vocabulary)
            | beam.io.WriteToTFRecord(str(out / "all"), file_name_suffix=".tfrecord")
        )


def run_convert(csv_path: Path, out: Path) -> None:
    import tfrecorder

    tfrecorder.convert(str(csv_path), str(out), progress=False)


def run_convert_header(csv_path: Path, out: Path) -> None:
    import tfrecorder

    tfrecorder.convert(str(csv_path), str(out), validate="header", progress=False)


def run_convert_header_1core(csv_path: Path, out: Path) -> None:
    """Header mode on the in-process worker alone, whatever the automatic choice would be."""
    import tfrecorder

    tfrecorder.convert(str(csv_path), str(out), validate="header", progress=False,
                       dataflow_options={"direct_num_workers": 1})


_IN_MEMORY: dict[str, object] = {}  # csv path → its images' bytes as one string tensor (decode-bound)


def load_in_memory(csv_path: Path) -> None:
    """Untimed: the table's images read into one TensorFlow string tensor, kept for every repeat."""
    import tensorflow as tf

    if str(csv_path) not in _IN_MEMORY:
        data = []
        for _split, uri, _label in read_rows(csv_path):
            with open(uri, "rb") as source:
                data.append(source.read())
        _IN_MEMORY[str(csv_path)] = tf.constant(data)


def run_decode_bound(csv_path: Path, out: Path) -> None:
    """The default mode's bound: TensorFlow's ratio-8 JPEG decode alone, run by tf.data's parallel map
    (AUTOTUNE: every core) over the images already in memory; nothing is read or written. Untuned, as
    `load()` runs (tfrecorder.reading.pipeline_options): tuned, its repeats were bimodal, and a run
    whose three repeats were all slow (2.57 s against 2.0–2.1 s) flattered the ratio against it."""
    import tensorflow as tf

    from tfrecorder.reading.pipeline_options import pipeline_options

    load_in_memory(csv_path)  # a no-op once prepared (PREPARE, outside the timing)
    images = tf.data.Dataset.from_tensor_slices(_IN_MEMORY[str(csv_path)])
    shapes = images.map(lambda data: tf.shape(tf.io.decode_jpeg(data, ratio=8)),
                        num_parallel_calls=tf.data.AUTOTUNE).batch(256)
    shapes = shapes.with_options(pipeline_options(tf, deterministic=False))
    decoded = sum(int(batch.shape[0]) for batch in shapes)
    (out / "decoded.txt").write_text(f"{decoded}\n")


VARIANTS = {"copy": run_copy, "hash-copy": run_hash_copy, "naive": run_naive, "careful": run_careful, "beam": run_beam, "convert": run_convert,
            "convert-header": run_convert_header, "convert-header-1core": run_convert_header_1core,
            "decode-bound": run_decode_bound}
# a bound is the fastest of its repeats (the best this machine did: a repeat slowed by the host, e.g. a
# core taken away for a while, must not flatter the ratios against it); every other variant is the median
BOUNDS = ("copy", "hash-copy", "decode-bound")
PREPARE = {"decode-bound": load_in_memory}  # untimed set-up, done once before a variant's first timing
SMALL_VARIANTS = ("copy", "naive", "careful", "beam", "convert", "convert-header", "decode-bound")  # N-row table
LARGE_VARIANTS = ("copy", "hash-copy", "naive", "convert-header", "convert-header-1core")  # timed on the 4xN-row table
CONVERTS = ("convert", "convert-header", "convert-header-1core")  # timed with and/or without TensorFlow imported
NO_TF = " no-TF"  # suffix of a convert variant timed in the helper process that never imports TensorFlow


def with_tensorflow_modes(names: list[str], mode: str) -> list[str]:
    """`names` with each convert variant kept ("imported"), replaced by its no-TF twin ("absent"), or
    followed by it ("both")."""
    found = []
    for name in names:
        if name not in CONVERTS:
            found.append(name)
            continue
        if mode in ("both", "imported"):
            found.append(name)
        if mode in ("both", "absent"):
            found.append(name + NO_TF)
    return found


class NoTensorFlowRunner:
    """A helper process that has imported Beam and tfrecorder but never TensorFlow, running convert
    variants on request and answering with their wall clock and CPU time (its own and its finished
    children's: the forked encoding processes), measured as `time_variants` measures its own."""

    def __init__(self) -> None:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))
        self.process = subprocess.Popen([sys.executable, __file__, "--serve-no-tf"], env=env, cwd=ROOT,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._answer()  # ready once its imports are done

    def _answer(self) -> dict:
        for line in self.process.stdout:
            if line.startswith("{"):
                answer = json.loads(line)
                if "error" in answer:
                    raise RuntimeError(f"no-TF helper: {answer['error']}")
                return answer
        raise RuntimeError("the no-TF helper process stopped")

    def run(self, name: str, csv_path: Path, out: Path) -> dict:
        self.process.stdin.write(json.dumps([name, str(csv_path), str(out)]) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def serve_no_tensorflow() -> None:
    """The helper's loop (`--serve-no-tf`): one JSON request a line on stdin, one JSON answer a line on stdout."""
    import apache_beam  # noqa: F401  library imports are excluded from the timings, as in time_variants

    import tfrecorder  # noqa: F401
    from beam_pipelines.graphs import image_graph  # noqa: F401

    print(json.dumps({"ready": True, "tensorflow": "tensorflow" in sys.modules}), flush=True)
    for line in sys.stdin:
        name, csv_path, out = json.loads(line)
        try:
            cpu_started, started = cpu_seconds(), time.perf_counter()
            VARIANTS[name](Path(csv_path), Path(out))
            answer = {"seconds": time.perf_counter() - started, "cpu_seconds": cpu_seconds() - cpu_started,
                      "tensorflow": "tensorflow" in sys.modules}
        except Exception as exc:  # noqa: BLE001 - reported to the benchmark, which stops
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (large header-mode conversions fork
    encoding processes)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def time_variants(csv_path: Path, repeats: int, names: list[str]) -> dict[str, dict]:
    """Each of `names` timed `repeats` times, interleaved (the order rotates every repeat), each run after
    an untimed os.sync(); "... no-TF" variants run in a helper process without TensorFlow."""
    import apache_beam  # noqa: F401  library imports are excluded from the timings
    import tensorflow  # noqa: F401

    import tfrecorder  # noqa: F401
    from beam_pipelines.graphs import image_graph

    times: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    out_bytes: dict[str, int] = {}
    helper = NoTensorFlowRunner() if any(name.endswith(NO_TF) for name in names) else None
    for name in names:
        if name in PREPARE:
            PREPARE[name](csv_path)
    for rep in range(repeats):
        order = names[rep % len(names):] + names[: rep % len(names)]
        for name in order:
            out = OUT / f"{name.replace(' ', '_')}-{rep}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            os.sync()  # no variant pays for writing back what the one before it wrote (1.6 GB at 4xN rows)
            if name.endswith(NO_TF):
                answer = helper.run(name[: -len(NO_TF)], csv_path, out)
                if answer["tensorflow"]:
                    print(f"  warning: {name} ran with TensorFlow imported", file=sys.stderr)
                times[name].append(answer["seconds"])
                cpu[name].append(answer["cpu_seconds"])
            else:
                cpu_started, started = cpu_seconds(), time.perf_counter()
                VARIANTS[name](csv_path, out)
                times[name].append(time.perf_counter() - started)
                cpu[name].append(cpu_seconds() - cpu_started)
            out_bytes[name] = dir_bytes(out)
            shutil.rmtree(out, ignore_errors=True)
            print(f"  repeat {rep + 1}/{repeats} {name:14s} {times[name][-1]:7.2f} s  cpu {cpu[name][-1]:6.2f} s  "
                  f"load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    if helper is not None:
        helper.close()
    typical = {name: min if name in BOUNDS else statistics.median for name in names}
    return {name: {"seconds": typical[name](times[name]), "cpu_seconds": typical[name](cpu[name]),
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


def child_convert(csv_path: str, out: str, validate: str, preload_tf: str) -> None:
    """Run in a fresh process: import tfrecorder (and TensorFlow when `preload_tf`), convert, print
    seconds and peak RSS (this process's, and the largest finished worker process's) as JSON."""
    import tfrecorder

    if preload_tf == "yes":
        import tensorflow  # noqa: F401  as in a notebook that trains with TensorFlow

    started = time.perf_counter()
    result = tfrecorder.convert(csv_path, out, validate=validate, progress=False)
    seconds = time.perf_counter() - started
    workers_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "rss_mb": peak_rss_mb(), "worker_rss_mb": workers_mb,
                      "records": result.metadata["records_written"]}))


def in_fresh_process(csv_path: Path, tag: str, validate: str = "decode", preload_tf: bool = False) -> dict:
    out = OUT / f"child-{tag}"
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))
    command = [sys.executable, __file__, "--child", str(csv_path), str(out), validate, "yes" if preload_tf else "no"]
    done = subprocess.run(command, env=env, cwd=ROOT, check=True, capture_output=True, text=True)
    shutil.rmtree(out, ignore_errors=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=5000, help="corpus size N (default 5000)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats of each variant (median reported)")
    parser.add_argument("--large-repeats", type=int, default=3,
                        help="repeats of copy / naive / convert-header on the 4xN-row table (0: skip)")
    parser.add_argument("--memory-images", type=int, default=None,
                        help="M for the peak-RSS pair (M and 5xM small images; default 2000)")
    parser.add_argument("--small-runs", type=int, default=3, help="fresh-process 100-image conversions (median)")
    parser.add_argument("--only", choices=sorted(VARIANTS), action="append", help="time only these variants")
    parser.add_argument("--large-only", action="store_true", help="skip the N-row timings")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--tensorflow", choices=("both", "imported", "absent"), default="both",
                        help="convert variants with TensorFlow imported in the converting process, without, "
                             "or both (default)")
    parser.add_argument("--child", nargs=4, metavar=("CSV", "OUT", "VALIDATE", "PRELOAD_TF"), help=argparse.SUPPRESS)
    parser.add_argument("--serve-no-tf", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.child:
        child_convert(*args.child)
        return
    if args.serve_no_tf:
        serve_no_tensorflow()
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    compile_package(ROOT)  # timed as installed (benchmarks/package_bytecode.py)
    names = with_tensorflow_modes([name for name in SMALL_VARIANTS if not args.only or name in args.only],
                                  args.tensorflow)
    load_before = os.getloadavg()

    print(f"corpus: {args.images} photo-like JPEGs {PHOTO_SIZE[1]}x{PHOTO_SIZE[0]}", file=sys.stderr, flush=True)
    csv_path = make_corpus("photos", args.images, PHOTO_SIZE, PHOTO_QUALITY)
    input_bytes = sum(os.path.getsize(r[1]) for r in read_rows(csv_path))
    results = {} if args.large_only else time_variants(csv_path, args.repeats, names)
    large = {}
    large_names = with_tensorflow_modes([name for name in LARGE_VARIANTS if not args.only or name in args.only],
                                        args.tensorflow)
    if args.large_repeats and large_names:
        large_csv = make_corpus("photos", args.images, PHOTO_SIZE, PHOTO_QUALITY, rows=4 * args.images)
        large = time_variants(large_csv, args.large_repeats, large_names)

    memory_images = args.memory_images or 2000
    small_csv = make_corpus("small", memory_images, SMALL_SIZE, 90)
    small_csv_5x = make_corpus("small", memory_images, SMALL_SIZE, 90, rows=5 * memory_images)
    rss = {"rows": memory_images, "at_n": in_fresh_process(small_csv, "rss-n"),
           "at_5n": in_fresh_process(small_csv_5x, "rss-5n")}
    hundred_csv = make_corpus("photos", args.images, PHOTO_SIZE, PHOTO_QUALITY, rows=100)
    hundred_modes = [(f"{validate}{', TensorFlow imported' if preload else ''}", validate, preload)
                     for validate in ("header", "decode") for preload in (False, True)
                     if args.tensorflow == "both" or preload == (args.tensorflow == "imported")]
    hundred: dict[str, list[float]] = {label: [] for label, _validate, _preload in hundred_modes if args.small_runs}
    for i in range(args.small_runs):  # interleaved, as the timed variants
        for label, validate, preload in hundred_modes:
            hundred[label].append(in_fresh_process(hundred_csv, f"100-{len(hundred[label])}-{i}", validate,
                                                   preload_tf=preload)["seconds"])
    load = (load_before, os.getloadavg())
    report(args.images, input_bytes, results, large, rss, hundred, args, load)
    if args.json:
        args.json.write_text(json.dumps({"images": args.images, "input_bytes": input_bytes, "variants": results,
                                         "large": large, "rss": rss, "hundred_seconds": hundred,
                                         "load": load}, indent=2))


def table(images: int, input_bytes: int, results: dict) -> None:
    mb = input_bytes / 1e6
    print("| variant | seconds | images/s | MB/s | CPU seconds | output / input bytes |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in results.items():
        print(f"| {name} | {r['seconds']:.2f} | {images / r['seconds']:.0f} | {mb / r['seconds']:.1f} | "
              f"{r['cpu_seconds']:.2f} | {r['output_bytes'] / input_bytes:.4f} |")


def ratio(results: dict, fast: str, slow: str) -> tuple[float, float]:
    """How many times faster `fast` is than `slow`: (wall clock, CPU time)."""
    return (results[slow]["seconds"] / results[fast]["seconds"],
            results[slow]["cpu_seconds"] / results[fast]["cpu_seconds"])


def report(images: int, input_bytes: int, results: dict, large: dict, rss: dict, hundred: dict, args, load) -> None:
    print(f"\nmachine: {os.cpu_count()} cores; load average (1, 5, 15 min) before "
          f"{', '.join(f'{v:.1f}' for v in load[0])}, after {', '.join(f'{v:.1f}' for v in load[1])}; "
          f"median of {args.repeats} (bounds: {', '.join(BOUNDS)}, the fastest)")
    print(f"\nN = {images} images, {input_bytes / 1e6:.0f} MB input:")
    table(images, input_bytes, results)
    if large:
        print(f"\n{4 * images} rows (cycling over the {images} files), median of {args.large_repeats}:")
        table(4 * images, 4 * input_bytes, large)
    print("\n| target | wall clock | CPU time | met (wall clock)? |")
    print("| --- | ---: | ---: | --- |")
    targets = [(results, "convert", "careful", 1.6, f"convert (decode) ≥ 1.6× careful loop, {images} rows")]
    for suffix in ("", NO_TF):  # issue 32, TensorFlow imported in the converting process and not
        targets += [(large, "convert-header" + suffix, "naive", 2.0, f"convert-header{suffix} ≥ 2.0× naive loop, {4 * images} rows"),
                    (large, "convert-header" + suffix, "copy", 0.7, f"convert-header{suffix} ≥ 0.7× copy floor, {4 * images} rows"),
                    (large, "convert-header" + suffix, "hash-copy", None, f"convert-header{suffix} / hash-copy (its own floor; no goal), {4 * images} rows"),
                    (results, "convert" + suffix, "decode-bound", 0.9, f"convert{suffix} ≥ 0.9× decode-bound, {images} rows")]
    for found, fast, slow, goal, label in targets:
        if fast in found and slow in found:
            wall, cpu = ratio(found, fast, slow)
            met = "—" if goal is None else ("yes" if wall >= goal else "no")
            print(f"| {label} | {wall:.2f}× | {cpu:.2f}× | {met} |")
    if "hash-copy" in large and "copy" in large:
        wall, cpu = ratio(large, "hash-copy", "copy")
        print(f"| header mode's own floor (hash-copy) against the copy floor: the most it can reach | {wall:.2f}× | "
              f"{cpu:.2f}× | — |")
    for mode, seconds in hundred.items():
        median = statistics.median(seconds)
        goal = HUNDRED_GOAL_SECONDS[mode.split(",")[0]]
        print(f"| 100-image conversion after import tfrecorder, validate={mode}: ≤ {goal} s | {median:.2f} s | | "
              f"{'yes' if median <= goal else 'no'} |")
    for fast, slow in (("convert", "naive"), ("convert", "copy"), ("convert-header", "naive"), ("convert", "beam"),
                       ("convert" + NO_TF, "naive"), ("convert-header" + NO_TF, "naive")):
        if fast in results and slow in results:
            wall, cpu = ratio(results, fast, slow)
            print(f"{fast} / {slow} at {images} rows: {wall:.2f}x (wall clock), {cpu:.2f}x (CPU time)")
    at_n, at_5n = rss["at_n"], rss["at_5n"]
    peak = {key: max(r["rss_mb"], r["worker_rss_mb"]) for key, r in (("n", at_n), ("5n", at_5n))}
    print(f"peak RSS of convert (largest process): {peak['n']:.0f} MB at {rss['rows']} rows, {peak['5n']:.0f} MB at "
          f"{5 * rss['rows']} rows (ratio {peak['5n'] / peak['n']:.2f}; main process {at_n['rss_mb']:.0f} → "
          f"{at_5n['rss_mb']:.0f} MB)")
    for mode, seconds in hundred.items():
        print(f"100-image conversion after import tfrecorder, validate={mode}: median {statistics.median(seconds):.2f} s "
              f"({', '.join(f'{s:.2f}' for s in seconds)})")


if __name__ == "__main__":
    main()
