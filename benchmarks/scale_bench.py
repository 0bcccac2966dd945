"""Scale figures of issue 12, each printed with its goal beside it.

    .venv/bin/python benchmarks/scale_bench.py                      # every figure
    .venv/bin/python benchmarks/scale_bench.py --only publish --quick

Write side:
  discard_rss  - peak RSS growth per row of a conversion where every row is discarded (missing
                 images), between a small and a 4x larger CSV, each in a fresh process;
  open_files   - the most files open at once under the output directory during a num_shards=300
                 conversion of 3,000 rows (sampled from /proc/self/fd every millisecond);
  publish      - requests per shard to publish a gs:// job directory (job_directory.finalize: copies, the
                 metadata.json marker, cleanup), counted by a proxy in front of a GCS emulator in a
                 child process (127.0.0.1 only), at two directory sizes, with the peak of requests in
                 flight (publishing is parallel).
Read side:
  rows_rss     - peak RSS growth per row of a local conversion of a structured CSV (no images),
                 between 100k and 400k rows, each in a fresh process;
  driver_bytes - bytes of a big gs:// CSV the driver downloads before submitting a Dataflow job
                 (dry run on a GCS emulator in a child process; downloads counted at the client);
  staging_rss  - the driver's peak memory while staging a DataFrame, against the frame's own memory.
Each figure is one function returning Figure rows, listed in FIGURES.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


@dataclasses.dataclass
class Figure:
    name: str
    value: float
    unit: str
    goal: str
    met: bool

    def line(self) -> str:
        return f"{self.name:<58} {self.value:>9.3f} {self.unit:<9} goal: {self.goal:<44} {'ok' if self.met else 'MISSED'}"


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: ru_maxrss would carry over the parent's peak across exec)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("needs Linux /proc")


def in_child(*args: str) -> dict:
    """Run this script with `args` in a fresh process; returns the JSON it prints last."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, __file__, *args], env=env, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- discard_rss --------------------------------------------------------------------------------------


def missing_images_csv(path: Path, rows: int) -> Path:
    """A CSV whose every image is missing: each row ends in discarded.csv."""
    with open(path, "w") as stream:
        stream.write("split,image_uri,label\n")
        for i in range(rows):
            split = "TRAIN" if i % 10 < 8 else ("VALIDATION" if i % 10 == 8 else "TEST")
            stream.write(f"{split},missing/img_{i:08d}.jpg,{'abc'[i % 3]}\n")
    return path


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS:"))


def child_convert(csv_path: str, out: str) -> None:
    """Convert; print the peak RSS, and the most RSS the write side added over what the process held
    when encoding began (Linux's peak counter is reset then: /proc/self/clear_refs)."""
    import tfrecorder
    from beam_pipelines.steps import encode_rows

    write_side: dict[str, float] = {}
    start_bundle = encode_rows.EncodeAndWritePieces.start_bundle

    def watched_start_bundle(self) -> None:
        if "start" not in write_side:
            write_side["read_peak"] = peak_rss_mb()
            with open("/proc/self/clear_refs", "w") as refs:
                refs.write("5")
            write_side["start"] = rss_mb()
        start_bundle(self)

    encode_rows.EncodeAndWritePieces.start_bundle = watched_start_bundle
    result = tfrecorder.convert(csv_path, out, progress=False)
    print(json.dumps({"rss_mb": max(peak_rss_mb(), write_side["read_peak"]), "write_side_mb": peak_rss_mb() - write_side["start"],
                      "discarded": result["discarded"], "rows_in": result["rows_in"]}))


def discard_rss(quick: bool) -> list[Figure]:
    small, large = (25_000, 100_000) if quick else (100_000, 400_000)
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as scratch:
        measured = {}
        for rows in (small, large):
            csv_path = missing_images_csv(Path(scratch, f"rows-{rows}.csv"), rows)
            measured[rows] = in_child("--child-convert", str(csv_path), str(Path(scratch, f"out-{rows}")))
            assert measured[rows]["discarded"] == measured[rows]["rows_in"] == rows, measured
            print(f"  {rows:>9,} rows, all discarded: peak RSS {measured[rows]['rss_mb']:.0f} MB, "
                  f"write side added {measured[rows]['write_side_mb']:.0f} MB", flush=True)

    def per_row_kb(key: str) -> float:
        return (measured[large][key] - measured[small][key]) * 1024 / (large - small)

    span = f"({small // 1000}k→{large // 1000}k)"
    return [
        Figure(f"RSS growth per discarded row {span}", per_row_kb("rss_mb"), "KB/row", "≤ 0.1 KB/row",
               per_row_kb("rss_mb") <= 0.1),
        Figure(f"  of it, write side (encode→discards→publish) {span}", per_row_kb("write_side_mb"), "KB/row",
               "≤ 0.1 KB/row", per_row_kb("write_side_mb") <= 0.1),
    ]


# --- open_files ---------------------------------------------------------------------------------------


def _open_under(directory: str) -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith(directory)
        except OSError:  # closed meanwhile
            pass
    return count


def child_open_files(out: str, rows: int, num_shards: int) -> None:
    import tfrecorder

    csv_path = Path(out).parent / "structured.csv"
    csv_path.write_text("id,x,label\n" + "".join(f"{i},{i / 7:.4f},{'abc'[i % 3]}\n" for i in range(rows)))
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _open_under(out))
            time.sleep(0.001)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    result = tfrecorder.convert(str(csv_path), out, num_shards=num_shards, progress=False)
    done.set()
    sampler.join()
    spreads = {split: [s["records"] for s in info["shards"]] for split, info in result.metadata["splits"].items()}
    print(json.dumps({"peak": peak[0], "splits": len(spreads), "spread": max(max(c) - min(c) for c in spreads.values()),
                      "shards": {split: f"{min(c)}..{max(c)}" for split, c in spreads.items()}}))


def open_files(quick: bool) -> list[Figure]:
    rows, num_shards = 3000, 300
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as scratch:
        measured = in_child("--child-open-files", str(Path(scratch, "out")), str(rows), str(num_shards))
    print(f"  num_shards={num_shards}, {rows:,} rows: records per shard {measured['shards']}")
    per_split = measured["peak"] / measured["splits"]
    return [
        Figure(f"open files at num_shards={num_shards} (peak, all splits)", measured["peak"], "files",
               f"a few per split (limit 256; was {3 * num_shards})", per_split <= 3),
        Figure("shard records max - min within a split", measured["spread"], "records",
               "≤ 1 (balanced)", measured["spread"] <= 1),
    ]


# --- publish ------------------------------------------------------------------------------------------


def _serve(*args: str) -> tuple[subprocess.Popen, str]:
    child = subprocess.Popen([sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return child, child.stdout.readline().strip()


def publish(quick: bool) -> list[Figure]:
    from support.gcs_proxy import FaultProxy
    from tfrecorder.format import job_directory
    from tfrecorder.format.metadata_file import JobMetadata
    from tfrecorder.format import file_names
    from tfrecorder.io import storage

    emulator, host = _serve(str(ROOT / "tests" / "support" / "gcs_emulator.py"))
    proxy = FaultProxy(host, delay_seconds=0.005).start()
    previous = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = proxy.url
    figures = []
    try:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage as gcs_storage

        gcs_storage.Client(project="bench", credentials=AnonymousCredentials()).create_bucket("scale-bench")
        per_shard = {}
        for shards in ((20, 100) if quick else (100, 400)):
            final, temp = job_directory.reserve_job_dir("gs://scale-bench/jobs", "publish")
            names = [f"train-{i:05d}-of-{shards:05d}.tfrecord" for i in range(shards)]
            for name in names:
                storage.write_bytes(f"{temp}/{name}", b"x" * 64)
            storage.write_bytes(f"{temp}/{file_names.DISCARD_FILE}", b"reason\r\n")
            JobMetadata({"bench": True}).write(temp)
            proxy.clear()
            started = time.perf_counter()
            job_directory.finalize(temp, final)
            seconds = time.perf_counter() - started
            requests = sum(proxy.requests.values())
            per_shard[shards] = requests / shards
            print(f"  {shards:>5} shards: {requests} requests in {seconds:.1f} s, "
                  f"peak {proxy.peak_in_flight('/')} in flight", flush=True)
        small, large = sorted(per_shard)
        figures.append(Figure(f"publish requests per shard ({large} shards)", per_shard[large], "requests",
                              "O(1): ≤ 3, not growing", per_shard[large] <= 3 and per_shard[large] <= per_shard[small]))
        figures.append(Figure("publish requests in flight (peak)", proxy.peak_in_flight("/"), "requests",
                              "> 1 (parallel)", proxy.peak_in_flight("/") > 1))
    finally:
        if previous is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = previous
        proxy.stop()
        emulator.stdin.close()
        emulator.wait()
    return figures


# --- read side: rows_rss, driver_bytes, staging_rss ----------------------------------------------------


def structured_csv(path: Path, rows: int) -> Path:
    """Structured columns only (ints, floats, text, a string label, a split column): no images."""
    with open(path, "w") as stream:
        stream.write("split,id,x,y,note,label\n")
        for i in range(rows):
            split = "TRAIN" if i % 10 < 8 else ("VALIDATION" if i % 10 == 8 else "TEST")
            stream.write(f"{split},{i},{i / 7:.5f},{(i * 31) % 1000},note {i % 977},{'abcde'[i % 5]}\n")
    return path


def rows_rss(quick: bool) -> list[Figure]:
    small, large = (25_000, 100_000) if quick else (100_000, 400_000)
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as scratch:
        peaks = {}
        for rows in (small, large):
            csv_path = structured_csv(Path(scratch, f"rows-{rows}.csv"), rows)
            started = time.perf_counter()
            measured = in_child("--child-convert", str(csv_path), str(Path(scratch, f"out-{rows}")))
            assert measured["rows_in"] == rows and measured["discarded"] == 0, measured
            peaks[rows] = measured["rss_mb"]
            print(f"  {rows:>9,} structured rows: peak RSS {measured['rss_mb']:.0f} MB "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
    per_row_kb = (peaks[large] - peaks[small]) * 1024 / (large - small)
    return [Figure(f"RSS growth per row ({small // 1000}k→{large // 1000}k CSV rows)", per_row_kb, "KB/row",
                   "≤ 0.1 KB/row (was ~0.6)", per_row_kb <= 0.1)]


def child_driver_bytes(host: str, mib: int) -> None:
    """Upload a CSV of about `mib` MiB to the emulator at `host`, dry-run a Dataflow submit of it, and
    print the bytes of it the driver downloaded (counted at google-cloud-storage's download call)."""
    os.environ["STORAGE_EMULATOR_HOST"] = host
    from google.cloud.storage import Blob

    import tfrecorder
    from tfrecorder.io import gcs

    gcs.client().create_bucket("scale-bench")
    line = b"TRAIN,12345,0.14286,123,a short note,b\n"
    payload = b"split,id,x,y,note,label\n" + line * (mib * 1024 * 1024 // len(line))
    gcs.client().bucket("scale-bench").blob("big.csv").upload_from_string(payload)
    downloaded = [0]
    real = Blob.download_as_bytes

    def counting(self, *args, **kwargs):
        data = real(self, *args, **kwargs)
        if self.name == "big.csv":
            downloaded[0] += len(data)
        return data

    Blob.download_as_bytes = counting
    started = time.perf_counter()
    result = tfrecorder.convert("gs://scale-bench/big.csv", "gs://scale-bench/out", runner="DataflowRunner",
                                project="scale-bench", region="us-central1", progress=False,
                                dataflow_options={"dry_run": True, "no_auth": True})
    print(json.dumps({"bytes": downloaded[0], "size": len(payload), "seconds": time.perf_counter() - started,
                      "state": result["state"], "rows_estimate": result["rows_in"],
                      "rows": len(payload) // len(line)}))


def driver_bytes(quick: bool) -> list[Figure]:
    mib = 40 if quick else 120
    emulator, host = _serve(str(ROOT / "tests" / "support" / "gcs_emulator.py"))
    try:
        measured = in_child("--child-driver-bytes", host, str(mib))
    finally:
        emulator.stdin.close()
        emulator.wait()
    print(f"  {measured['size'] / 2**20:.0f} MiB gs:// CSV, Dataflow dry-run submit: driver downloaded "
          f"{measured['bytes'] / 2**20:.1f} MiB in {measured['seconds']:.1f} s; rows estimated "
          f"{measured['rows_estimate']:,} (true {measured['rows']:,})", flush=True)
    return [Figure(f"driver bytes read, {mib} MiB CSV submit", measured["bytes"] / 2**20, "MiB",
                   "≤ 32 MiB (was 136 MiB for 120 MiB)", measured["bytes"] <= 32 * 2**20)]


def child_staging_rss(rows: int) -> None:
    import numpy as np
    import pandas as pd

    from tfrecorder.sources import dataframe_staging
    from tfrecorder.core.schema import infer_schema

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({
        "i": rng.integers(0, 1000, rows), "f": rng.random(rows), "s": [f"text {i}" for i in range(rows)],
        "label": [("cat", "dog", "bird")[i % 3] for i in range(rows)], "v": list(rng.random((rows, 4))),
    })
    frame_mb = frame.memory_usage(deep=True, index=True).sum() / 2**20
    before = rss_mb()
    reset_peak_rss()
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as scratch:
        started = time.perf_counter()
        groups = dataframe_staging.stage_frame(frame, infer_schema(frame), str(Path(scratch, "rows.arrow")))
        seconds = time.perf_counter() - started
    print(json.dumps({"frame_mb": frame_mb, "before_mb": before, "peak_mb": peak_rss_mb(), "row_groups": groups,
                      "seconds": seconds}))


def reset_peak_rss() -> None:
    """Make VmHWM start again from the current RSS (Linux: write 5 to /proc/self/clear_refs)."""
    with open("/proc/self/clear_refs", "w") as stream:
        stream.write("5")


def staging_rss(quick: bool) -> list[Figure]:
    rows = 500_000 if quick else 2_000_000
    measured = in_child("--child-staging-rss", str(rows))
    extra = measured["peak_mb"] - measured["before_mb"]
    ratio = (measured["frame_mb"] + extra) / measured["frame_mb"]
    print(f"  {rows:,}-row DataFrame ({measured['frame_mb']:.0f} MB): staging peak +{extra:.0f} MB over the "
          f"{measured['before_mb']:.0f} MB process, {measured['row_groups']} row groups, "
          f"{measured['seconds']:.1f} s", flush=True)
    return [Figure("driver memory while staging / frame memory", ratio, "x", "≤ ~1.3x", ratio <= 1.3)]


FIGURES: dict[str, Callable[[bool], list[Figure]]] = {
    "discard_rss": discard_rss,
    "open_files": open_files,
    "publish": publish,
    "rows_rss": rows_rss,
    "driver_bytes": driver_bytes,
    "staging_rss": staging_rss,
}


def main() -> None:
    if sys.argv[1:2] == ["--child-convert"]:
        return child_convert(*sys.argv[2:4])
    if sys.argv[1:2] == ["--child-open-files"]:
        return child_open_files(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    if sys.argv[1:2] == ["--child-driver-bytes"]:
        return child_driver_bytes(sys.argv[2], int(sys.argv[3]))
    if sys.argv[1:2] == ["--child-staging-rss"]:
        return child_staging_rss(int(sys.argv[2]))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(FIGURES), help=f"comma-separated subset of {list(FIGURES)}")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run, not the reported figures)")
    args = parser.parse_args()
    figures = []
    for name in args.only.split(","):
        print(f"{name}:", flush=True)
        figures.extend(FIGURES[name](args.quick))
    print()
    for figure in figures:
        print(figure.line())


if __name__ == "__main__":
    main()
