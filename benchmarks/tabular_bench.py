"""Tabular conversion speed (issue 19): image-free rows through convert() against the loop a user writes.

    .venv/bin/python benchmarks/tabular_bench.py                  # 1M rows, RSS at 250k and 1M rows
    .venv/bin/python benchmarks/tabular_bench.py --rows 200000 --repeats 1 --memory-rows 50000,200000
    .venv/bin/python benchmarks/tabular_bench.py --tensorflow without        # only without TF imported
    .venv/bin/python benchmarks/tabular_bench.py --narrow --only dataframe,parquet --tensorflow without
    .venv/bin/python benchmarks/tabular_bench.py --splitless --only dataframe,csv --tensorflow without

The table: an int, a float (FloatInput), a float64 (DoubleInput), a string, a datetime with 10% missing,
a fixed-length list of 4 floats, a string label and a split column. Variants, each in a fresh process
(imports, building the table and a first read of a source file, which puts it in the page cache, excluded
from the timing; pipeline construction, start-up, staging and everything up to metadata.json included),
run in turn `--repeats` times and reported as medians:
  naive      - `itertuples` → tf.train.Example with the same features (float64 as its bits, datetimes as
               ns, missing datetimes left out, label index) → one tf.io.TFRecordWriter per split;
  dataframe  - tfrecorder.convert(frame, out, schema with the float64 column as DoubleInput);
  csv        - tfrecorder.convert("table.csv", out, same schema) (the CSV is written once, beforehand);
  parquet    - tfrecorder.convert("table.parquet", out, same schema) (written once by pandas, beforehand).
Each convert variant runs without TensorFlow imported in the converting process and with it imported
beforehand (as in a notebook that trains: "+tf"), per --tensorflow (default both). Targets (issue 32):
dataframe ≥ 10×, csv ≥ 7×, parquet ≥ 10× the naive loop. With --narrow, each kind also runs as
"<kind>-narrow": a schema of three columns (split, f64, label), the other five outside the schema (not
features, but carried for discarded.csv): what a table wider than its features costs. With
--splitless, as "<kind>-splitless": the table without its split column, every row's split a hash of
its text (the naive loop still writes the given splits).
Wall clock and CPU time (the process and its finished worker processes) are both reported: the machine
may be shared, and CPU-time ratios are the honest figure under load (the load average is printed).
Peak RSS of convert(csv) and of convert(frame) (above the RSS with the frame built) is measured at two
row counts: flat in rows means it does not grow with the table.
"""
from __future__ import annotations

import argparse
import importlib
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
sys.path.insert(0, str(HERE.parent))  # the checkout this script is in, not another installed copy

from package_bytecode import compile_package  # noqa: E402  (beside this script)

OUT = HERE / ".out" / "tabular"
LABELS = ("cat", "dog", "fox", "owl")
TARGETS = {"dataframe": 10.0, "csv": 7.0, "parquet": 10.0}  # × naive, issue 32
SCHEMA = {"f64": "DoubleInput"}  # float64 is never inferred
NARROW_SCHEMA = {"split": "SplitKey", "f64": "DoubleInput", "label": "StringLabel"}  # the "-narrow" variants


def make_frame(rows: int):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(19)
    when = pd.to_datetime(rng.integers(1_500_000_000, 1_700_000_000, rows), unit="s")
    return pd.DataFrame({
        "split": rng.choice(["TRAIN", "VALIDATION", "TEST"], rows, p=[0.8, 0.1, 0.1]),
        "id": np.arange(rows, dtype=np.int64) * 7919,
        "score": rng.normal(size=rows).astype(np.float64),
        "f64": rng.normal(size=rows) * 1e6,
        "name": [f"item-{i % 50_000}" for i in range(rows)],
        "when": when.where(rng.random(rows) >= 0.1),
        "vec": list(rng.normal(size=(rows, 4))),
        "label": rng.choice(LABELS, rows),
    })


def splitless_frame(rows: int):
    return make_frame(rows).drop(columns="split")


def csv_path(rows: int, splitless: bool = False) -> Path:
    path = OUT / f"table-{rows}{'-splitless' if splitless else ''}.csv"
    if not path.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        frame = (splitless_frame if splitless else make_frame)(rows)
        frame["vec"] = [json.dumps(v.tolist()) for v in frame["vec"]]
        frame.to_csv(str(path) + ".tmp", index=False)
        os.replace(str(path) + ".tmp", path)
    return path


def parquet_path(rows: int, splitless: bool = False) -> Path:
    path = OUT / f"table-{rows}{'-splitless' if splitless else ''}.parquet"
    if not path.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        (splitless_frame if splitless else make_frame)(rows).to_parquet(str(path) + ".tmp", index=False)
        os.replace(str(path) + ".tmp", path)
    return path


def kind_of(variant: str) -> str:
    return variant.split("+")[0].split("-")[0]


def source_for(variant: str, rows: int):
    kind, splitless = kind_of(variant), "-splitless" in variant
    if kind in ("csv", "parquet"):
        return (csv_path if kind == "csv" else parquet_path)(rows, splitless)
    return (splitless_frame if splitless else make_frame)(rows)


def naive(frame, out: Path) -> None:
    import struct

    import tensorflow as tf

    labels = {name: i for i, name in enumerate(sorted(LABELS))}
    out.mkdir(parents=True, exist_ok=True)
    writers = {s: tf.io.TFRecordWriter(str(out / f"{s.lower()}.tfrecord")) for s in ("TRAIN", "VALIDATION", "TEST")}
    Feature, Int64List, FloatList, BytesList = tf.train.Feature, tf.train.Int64List, tf.train.FloatList, tf.train.BytesList
    for row in frame.itertuples(index=False):
        features = {
            "id": Feature(int64_list=Int64List(value=[row.id])),
            "score": Feature(float_list=FloatList(value=[row.score])),
            "f64": Feature(int64_list=Int64List(value=[struct.unpack("<q", struct.pack("<d", row.f64))[0]])),
            "name": Feature(bytes_list=BytesList(value=[row.name.encode()])),
            "vec": Feature(float_list=FloatList(value=row.vec)),
            "label": Feature(int64_list=Int64List(value=[labels[row.label]])),
        }
        if row.when == row.when:  # NaT != NaT
            features["when"] = Feature(int64_list=Int64List(value=[row.when.value]))
        example = tf.train.Example(features=tf.train.Features(feature=features))
        writers[row.split].write(example.SerializeToString())
    for writer in writers.values():
        writer.close()


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM; getrusage's ru_maxrss would carry over the launching process's peak
    across exec), or its worker processes' largest when Beam ran any."""
    with open("/proc/self/status") as status:
        own_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    return max(own_kb, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024


def current_rss_mb() -> float:
    with open("/proc/self/statm") as stats:
        return int(stats.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run_variant(variant: str, rows: int) -> dict:
    """Run one variant in this (fresh) process; returns its timings."""
    import tfrecorder  # imports are not timed

    source = source_for(variant, rows)
    if variant == "naive" or variant.endswith("+tf"):
        importlib.import_module("tensorflow")  # imported in the converting process, as a notebook has it
    out = OUT / f"out-{variant.replace('+', '-')}-{os.getpid()}"
    shutil.rmtree(out, ignore_errors=True)
    if isinstance(source, Path):  # in the page cache, as the naive loop's frame is in memory (not timed)
        with open(source, "rb") as stream:
            while stream.read(64 * 1024 * 1024):
                pass
    rss_before = current_rss_mb()
    wall, cpu = time.perf_counter(), cpu_seconds()
    if variant == "naive":
        naive(source, out)
        records = rows
    else:
        schema = NARROW_SCHEMA if "-narrow" in variant else {**_inferred(source), **SCHEMA}
        result = tfrecorder.convert(source if not isinstance(source, Path) else str(source), str(out), schema=schema,
                                    progress=False)
        records = sum(result["written"].values())
    timings = {"variant": variant, "rows": rows, "records": records, "wall": time.perf_counter() - wall,
               "cpu": cpu_seconds() - cpu, "peak_rss_mb": peak_rss_mb(), "rss_before_mb": rss_before}
    shutil.rmtree(out, ignore_errors=True)
    return timings


def _inferred(source) -> dict:
    from tfrecorder.sources import source_registry

    table = source_registry.open_table(source if not isinstance(source, Path) else str(source))
    return table.infer_schema().to_json()


def in_fresh_process(variant: str, rows: int) -> dict:
    done = subprocess.run([sys.executable, __file__, "--variant", variant, "--rows", str(rows)], check=True,
                          capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory-rows", default="250000,1000000")
    parser.add_argument("--tensorflow", choices=("both", "without", "with"), default="both",
                        help="convert with TensorFlow imported in the converting process, without, or both")
    parser.add_argument("--only", help="comma-separated convert kinds to run (dataframe,csv,parquet)")
    parser.add_argument("--narrow", action="store_true", help="also run each kind with a three-column schema")
    parser.add_argument("--splitless", action="store_true", help="also run each kind without its split column")
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(run_variant(args.variant, args.rows)))
        return
    compile_package(HERE.parent)  # timed as installed (benchmarks/package_bytecode.py)
    print(f"load average before: {os.getloadavg()}; cores: {os.cpu_count()}")
    kinds = tuple(args.only.split(",")) if args.only else ("dataframe", "csv", "parquet")
    kinds += tuple(kind + "-narrow" for kind in kinds) if args.narrow else ()
    kinds += tuple(kind + "-splitless" for kind in kinds if "-" not in kind) if args.splitless else ()
    suffixes = {"both": ("", "+tf"), "without": ("",), "with": ("+tf",)}[args.tensorflow]
    variants = ("naive",) + tuple(kind + suffix for kind in kinds for suffix in suffixes)
    for variant in variants:
        source_for(variant, args.rows)  # written once, before any timing
    results: dict[str, list[dict]] = {v: [] for v in variants}
    for repeat in range(args.repeats):
        turn = repeat % len(variants)
        for variant in variants[turn:] + variants[:turn]:
            results[variant].append(in_fresh_process(variant, args.rows))
            print(f"  {variant}: {results[variant][-1]}", flush=True)
    base_wall = statistics.median(r["wall"] for r in results["naive"])
    base_cpu = statistics.median(r["cpu"] for r in results["naive"])
    print(f"\n{args.rows:,} rows, median of {args.repeats}")
    print(f"{'variant':<14}{'wall s':>9}{'cpu s':>9}{'rows/s':>11}{'x naive (wall)':>16}{'x naive (cpu)':>15}")
    for variant in variants:
        wall = statistics.median(r["wall"] for r in results[variant])
        cpu = statistics.median(r["cpu"] for r in results[variant])
        print(f"{variant:<14}{wall:>9.2f}{cpu:>9.2f}{args.rows / wall:>11,.0f}{base_wall / wall:>16.2f}{base_cpu / cpu:>15.2f}")
    print("\ntargets (issue 32, × naive):")
    for variant in (v for v in variants[1:] if "-" not in v):
        target = TARGETS[kind_of(variant)]
        wall = base_wall / statistics.median(r["wall"] for r in results[variant])
        cpu = base_cpu / statistics.median(r["cpu"] for r in results[variant])
        print(f"  {variant:<14} ≥ {target:.0f}×: wall {wall:.2f}× {'met' if wall >= target else 'NOT met'}, "
              f"cpu {cpu:.2f}× {'met' if cpu >= target else 'NOT met'}")
    print("\npeak RSS (MB): convert(csv) whole process; convert(frame) above the RSS with the frame built")
    for rows in (int(r) for r in args.memory_rows.split(",") if r):
        csv_path(rows)
        on_csv, on_frame = in_fresh_process("csv", rows), in_fresh_process("dataframe", rows)
        print(f"  {rows:>10,} rows: csv {on_csv['peak_rss_mb']:.0f}   dataframe +"
              f"{on_frame['peak_rss_mb'] - on_frame['rss_before_mb']:.0f}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
