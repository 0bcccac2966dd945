"""Input-pipeline throughput: tfrecorder.load() against the usual alternatives, in one run.

    .venv/bin/python benchmarks/load_bench.py [--count 2000] [--repeats 3] [--cold-repeats 5] [--cold-only]

Corpus: `--count` generated photo-like JPEGs (500×375, JPEG quality tuned so files average ≈80 KB),
all in TRAIN, converted with default options. Both are cached under benchmarks/.corpus/ (gitignored).
Variants, each measured as images/s over full passes of the corpus (one warm-up pass each, then
`--repeats` passes taken round-robin so machine load hits all variants alike; the median is reported):

  (a) python-pil   a Python generator: PIL opens each JPEG, resizes to 224×224, yields numpy batches
  (b) tfdata-jpeg  tf.data over the JPEG files: list → read_file → decode → resize → batch → prefetch
  (c) load-224     tfrecorder.load(..., image_size=(224, 224), batch_size=64)
  (d) load-raw     tfrecorder.load(..., decode_images=False, batch_size=64)
  (e) tfrecord     plain TFRecordDataset over the same shards, batched (no parsing): the bound for (d)

Cold first passes, `--cold-repeats` of each variant, rotating which goes first, median; "cold" means
a pipeline built inside the timed span (load() or the tf.data chain, function tracing, autotuning
ramp-up, then the first pass: what a training script's first epoch pays) of
  (b) tfdata-jpeg and (c) load-224 as above,
  (b') tfdata-jpeg untuned  (b) with tf.data's autotuning off, as load() runs its pipelines: on two vCPUs
                        about half of the autotuned passes keep only ≈1.3 cores busy, so (c) against (b')
                        shows what load() does beyond running untuned,
  (b'') tfdata-jpeg unclipped  (b') without the clip before the cast, as load() resizes: (c) against
                        (b'') is what load() gains by reading shards instead of files, and
  (h) 1/8-decode bound  a pipeline load() does not offer: only the image parsed from the same shards,
                        decoded by libjpeg at 1/8 scale (63×47), resized to 224×224. Entropy decoding,
                        which no scale skips, is most of a JPEG's decode, so this is about the least
                        CPU any JPEG-decoding pipeline over these files can spend: a bound, not a candidate
                        (untuned, as load()).
in two settings:
  page cache warm     the files were read moments before (a re-run; dropping the whole page cache needs
                      root, and every other figure here is measured this way too)
  page cache evicted  before each pass, the files that variant reads (the JPEGs for (b); the job's
                      metadata.json and shards for (c) and (h)) are evicted with posix_fadvise(DONTNEED),
                      which needs no root: a first epoch over data not read since it landed on disk. The
                      share of their pages still resident after eviction is printed (mincore).

Without TensorFlow, `tfrecorder.data_source` (records/s, encoded images; and with decode_images=True):
  (f) ds-sequential  iterating the source in order
  (g) ds-random      1,000 random indices, one ranged read + CRC check + parse each

Targets (2-core machine): (c) ≥ 0.9×(b) warm, (c) ≥ 2×(a), (d) ≥ 0.8×(e); (c) cold ≥ 1.2× (b) cold
(issue 32).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tfrecorder.sample_data import LABELS, photo_array  # noqa: E402

CORPUS = HERE / ".corpus"
HEIGHT, WIDTH = 375, 500
TARGET_BYTES = 80_000
SIZE = (224, 224)
BATCH = 64


def jpeg_quality() -> int:
    """The JPEG quality whose files come closest to TARGET_BYTES on average (a few samples)."""
    samples = [Image.fromarray(photo_array(HEIGHT, WIDTH, seed)) for seed in range(4)]

    def mean_size(quality: int) -> float:
        sizes = []
        for image in samples:
            out = io.BytesIO()
            image.save(out, format="JPEG", quality=quality)
            sizes.append(len(out.getvalue()))
        return sum(sizes) / len(sizes)

    return min(range(60, 96), key=lambda q: abs(mean_size(q) - TARGET_BYTES))


def make_corpus(count: int) -> tuple[list[str], str]:
    """(JPEG paths, converted job directory), generating and converting only what is not cached."""
    import tfrecorder

    image_dir = CORPUS / "images"
    image_dir.mkdir(parents=True, exist_ok=True)
    quality = None
    paths = []
    for i in range(count):
        path = image_dir / f"{LABELS[i % len(LABELS)]}_{i:05d}.jpg"
        if not path.exists():
            quality = quality or jpeg_quality()
            Image.fromarray(photo_array(HEIGHT, WIDTH, i)).save(path, format="JPEG", quality=quality)
        paths.append(str(path))
    csv_path = CORPUS / f"data-{count}.csv"
    with open(csv_path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["split", "image_uri", "label"])
        writer.writerows(("TRAIN", p, Path(p).name.split("_")[0]) for p in paths)
    out_dir = CORPUS / f"tfrecords-{count}"
    for job in sorted(out_dir.glob("bench-*")) if out_dir.exists() else []:
        if (job / "metadata.json").exists() and json.loads((job / "metadata.json").read_text())["records_written"] == count:
            return paths, str(job)
    print(f"converting {count} images with default options …", flush=True)
    result = tfrecorder.convert(str(csv_path), str(out_dir), job_label="bench")
    return paths, result["tfrecord_dir"]


def python_pil(paths):
    def batches():
        for start in range(0, len(paths), BATCH):
            images = []
            for path in paths[start:start + BATCH]:
                with Image.open(path) as image:
                    images.append(np.asarray(image.convert("RGB").resize(SIZE[::-1], Image.BILINEAR)))
            yield np.stack(images)

    return batches


def jpeg_dataset(paths, clipped: bool = True):
    """(b)'s tf.data chain over the JPEG files: uint8 pixels as load() gives them, the resize's values
    clipped to [0, 255] before the cast as a careful hand-written pipeline does; `clipped=False` leaves
    the clip out, as load() does since it measured that bilinear values cannot leave that range (b'')."""
    import tensorflow as tf

    from tfrecorder.io.image_channels import resize_uint8

    def decode(path):
        image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        if not clipped:
            return resize_uint8(tf, image, SIZE)
        resized = tf.image.resize(image, SIZE)
        return tf.cast(tf.clip_by_value(tf.round(resized), 0.0, 255.0), tf.uint8)

    return (tf.data.Dataset.from_tensor_slices(paths).map(decode, num_parallel_calls=tf.data.AUTOTUNE)
            .batch(BATCH).prefetch(tf.data.AUTOTUNE))


def untuned(dataset):
    """`dataset` with load()'s tf.data options (autotuning off), its elements in order as by default."""
    import tensorflow as tf

    from tfrecorder.reading.pipeline_options import pipeline_options

    return dataset.with_options(pipeline_options(tf, deterministic=True))


def tfdata_jpeg(paths):
    ds = jpeg_dataset(paths)
    return lambda: iter(ds)


def tfdata_jpeg_untuned(paths):
    ds = untuned(jpeg_dataset(paths))
    return lambda: iter(ds)


def tfdata_jpeg_unclipped(paths):
    ds = untuned(jpeg_dataset(paths, clipped=False))
    return lambda: iter(ds)


def load_224(job_dir):
    import tfrecorder

    ds = tfrecorder.load(job_dir, "train", image_size=SIZE, batch_size=BATCH)
    return lambda: iter(ds)


def load_raw(job_dir):
    import tfrecorder

    ds = tfrecorder.load(job_dir, "train", decode_images=False, batch_size=BATCH)
    return lambda: iter(ds)


def plain_tfrecord(job_dir):
    import tensorflow as tf

    metadata = json.loads((Path(job_dir) / "metadata.json").read_text())
    files = [str(Path(job_dir) / s["file"]) for s in metadata["splits"]["TRAIN"]["shards"]]
    ds = tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE).batch(BATCH).prefetch(tf.data.AUTOTUNE)
    return lambda: iter(ds)


def scaled_decode_bound(job_dir):
    """Not something load() does: the same shards, only the image parsed, libjpeg's 1/8-scale decode
    (63×47 here, a quarter of the detail 224×224 holds) resized to 224×224. Entropy decoding, which
    no scale skips, is most of a JPEG's decode, so this is close to the cheapest any JPEG-decoding
    pipeline over these files can be: a bound for the cold target, not a candidate."""
    import tensorflow as tf

    from tfrecorder.io.image_channels import resize_uint8

    files = job_files(job_dir)[1:]

    def decode(record):
        data = tf.io.parse_single_example(record, {"image": tf.io.FixedLenFeature([], tf.string)})["image"]
        return resize_uint8(tf, tf.io.decode_jpeg(data, channels=3, ratio=8), SIZE)

    ds = untuned(tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE)
                 .map(decode, num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH).prefetch(tf.data.AUTOTUNE))
    return lambda: iter(ds)


def measure_cold(build, argument) -> tuple[float, float]:
    """(images/s, CPU ms/image) of the first pass over a pipeline built inside the timed span."""
    return measure(lambda: build(argument)())


def job_files(job_dir: str) -> list[str]:
    """Every file load() reads of the job: metadata.json and the TRAIN shards."""
    metadata = json.loads((Path(job_dir) / "metadata.json").read_text())
    shards = [str(Path(job_dir) / s["file"]) for s in metadata["splits"]["TRAIN"]["shards"]]
    return [str(Path(job_dir) / "metadata.json"), *shards]


def evict(paths: list[str]) -> None:
    """Ask the kernel to drop these files' clean pages from the page cache (no root needed)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def resident_share(paths: list[str]) -> float:
    """The share of these files' pages in the page cache (mincore over a read-only mapping); NaN if unknown."""
    import ctypes
    import mmap

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    except (OSError, AttributeError):
        return float("nan")
    resident = total = 0
    for path in paths:
        size = os.path.getsize(path)
        if not size:
            continue
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        fd = os.open(path, os.O_RDONLY)
        try:
            address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if address in (None, ctypes.c_void_p(-1).value):
                return float("nan")
            try:
                vector = (ctypes.c_ubyte * pages)()
                if libc.mincore(ctypes.c_void_p(address), size, vector) != 0:
                    return float("nan")
                resident += sum(byte & 1 for byte in vector)
                total += pages
            finally:
                libc.munmap(ctypes.c_void_p(address), size)
        finally:
            os.close(fd)
    return resident / total if total else float("nan")


def cold_passes(paths: list[str], job_dir: str, repeats: int, evicted: bool) -> dict[str, list[tuple[float, float]]]:
    """(images/s, CPU ms/image) of `repeats` cold first passes of (b), (b'), (b''), (c) and (h), rotating which runs first."""
    variants = [("(b) tfdata-jpeg", tfdata_jpeg, paths, paths), ("(b') tfdata-jpeg untuned", tfdata_jpeg_untuned, paths, paths),
                ("(b'') tfdata-jpeg unclipped", tfdata_jpeg_unclipped, paths, paths),
                ("(c) load-224", load_224, job_dir, job_files(job_dir)),
                ("(h) 1/8-decode bound", scaled_decode_bound, job_dir, job_files(job_dir))]
    passes: dict[str, list[tuple[float, float]]] = {name: [] for name, *_ in variants}
    residue: dict[str, list[float]] = {name: [] for name, *_ in variants}
    for repeat in range(repeats):
        for name, build, argument, files in variants[repeat % len(variants):] + variants[:repeat % len(variants)]:
            if evicted:
                evict(files)
                residue[name].append(resident_share(files))
            passes[name].append(measure_cold(build, argument))
    if evicted:
        print("pages still resident after eviction (median share): "
              + ", ".join(f"{name} {statistics.median(values):.1%}" for name, values in residue.items()))
    return passes


def data_source_rates(job_dir: str, decode_images: bool, random_reads: int = 1000) -> tuple[float, float]:
    """(sequential records/s, random-access records/s) of tfrecorder.data_source over the TRAIN split."""
    import tfrecorder

    ds = tfrecorder.data_source(job_dir, "train", decode_images=decode_images)
    start = time.perf_counter()
    count = sum(1 for _ in ds)
    sequential = count / (time.perf_counter() - start)
    indices = np.random.default_rng(0).integers(0, len(ds), random_reads)
    fresh = tfrecorder.data_source(job_dir, "train", decode_images=decode_images)  # index loading included
    start = time.perf_counter()
    for index in indices:
        fresh[int(index)]
    return sequential, random_reads / (time.perf_counter() - start)


def measure(make_iterator) -> tuple[float, float]:
    """(images per wall-clock second, CPU milliseconds of this process per image) for one full pass.

    CPU time per image is the steadier number on a shared machine: it does not depend on how many
    cores other processes left free.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    count = 0
    for batch in make_iterator():
        first = batch["image"] if isinstance(batch, dict) else batch
        count += int(first.shape[0])
    return count / (time.perf_counter() - wall), 1000 * (time.process_time() - cpu) / count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2000, help="images in the corpus (default 2000)")
    parser.add_argument("--repeats", type=int, default=3, help="measured passes per variant (default 3)")
    parser.add_argument("--cold-repeats", type=int, default=5,
                        help="cold first passes of (b), (b'), (b''), (c) and (h) per page-cache setting (default 5)")
    parser.add_argument("--cold-only", action="store_true", help="only the cold first passes")
    args = parser.parse_args()
    paths, job_dir = make_corpus(args.count)
    mean_kb = sum(os.path.getsize(p) for p in paths) / len(paths) / 1000
    print(f"corpus: {len(paths)} JPEGs {WIDTH}×{HEIGHT}, mean {mean_kb:.1f} KB; job {job_dir}; cpus {os.cpu_count()}")
    median = None
    if args.cold_only:  # untimed passes: TensorFlow's start-up, and the files in the page cache
        measure(tfdata_jpeg(paths))
        measure(load_224(job_dir))
        measure(scaled_decode_bound(job_dir))
    else:
        variants = {
            "(a) python-pil": python_pil(paths),
            "(b) tfdata-jpeg": tfdata_jpeg(paths),
            "(c) load-224": load_224(job_dir),
            "(d) load-raw": load_raw(job_dir),
            "(e) tfrecord": plain_tfrecord(job_dir),
        }
        for make_iterator in variants.values():  # warm-up: graph tracing, page cache
            measure(make_iterator)
        rates: dict[str, list[float]] = {name: [] for name in variants}
        cpu_ms: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.repeats):
            for name, make_iterator in variants.items():
                rate, cpu = measure(make_iterator)
                rates[name].append(rate)
                cpu_ms[name].append(cpu)
        median = {name: statistics.median(values) for name, values in rates.items()}
        print(f"\n| variant | images/s (median of {args.repeats}) | all passes | CPU ms/image (median) |\n"
              "| --- | ---: | --- | ---: |")
        for name, values in rates.items():
            print(f"| {name} | {median[name]:,.0f} | {', '.join(f'{v:,.0f}' for v in values)} | "
                  f"{statistics.median(cpu_ms[name]):.3f} |")
    cold = {}
    for evicted in (False, True):
        setting = "page cache evicted" if evicted else "page cache warm"
        cold[setting] = cold_passes(paths, job_dir, args.cold_repeats, evicted)
        print(f"\n| cold first pass, build included, {setting} | images/s (median of {args.cold_repeats}) | all passes "
              "| CPU ms/image (median) |\n| --- | ---: | --- | ---: |")
        for name, values in cold[setting].items():
            print(f"| {name} | {statistics.median(v[0] for v in values):,.0f} | "
                  f"{', '.join(f'{v[0]:,.0f}' for v in values)} | {statistics.median(v[1] for v in values):.3f} |")
    if median is not None:
        print("\n| data_source (no TensorFlow) | sequential records/s | random records/s (1,000 reads) |\n| --- | ---: | ---: |")
        for decode in (False, True):
            sequential, random_rate = data_source_rates(job_dir, decode)
            label = "(f/g) encoded images" if not decode else "(f/g) decode_images=True"
            print(f"| {label} | {sequential:,.0f} | {random_rate:,.0f} |")
        a, b, c, d, e = median.values()
        print(f"\n(c)/(b) = {c / b:.2f} (target ≥ 0.9)\n(c)/(a) = {c / a:.2f} (target ≥ 2)\n(d)/(e) = {d / e:.2f} (target ≥ 0.8)")
    else:
        print()
    for setting, passes in cold.items():
        (rate_b, cpu_b), (rate_u, cpu_u), (rate_n, cpu_n), (rate_c, cpu_c), (rate_h, cpu_h) = (
            (statistics.median(v[0] for v in values), statistics.median(v[1] for v in values)) for values in passes.values())
        print(f"(c) cold ≥ 1.2× (b) cold, {setting}: {rate_c / rate_b:.2f}× by images/s "
              f"({'met' if rate_c >= 1.2 * rate_b else 'not met'}), {cpu_b / cpu_c:.2f}× by images per CPU-second; "
              f"(c) / (b') untuned: {rate_c / rate_u:.2f}× by images/s, {cpu_u / cpu_c:.2f}× by images per CPU-second; "
              f"(c) / (b'') unclipped: {rate_c / rate_n:.2f}× by images/s, {cpu_n / cpu_c:.2f}× by images per CPU-second; "
              f"bound (h): {rate_h / rate_b:.2f}× by images/s, {cpu_b / cpu_h:.2f}× by images per CPU-second")
    load = os.getloadavg()
    print(f"load average during the run (1/5/15 min): {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
