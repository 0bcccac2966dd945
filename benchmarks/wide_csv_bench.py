"""Wide CSV tables (issue 26, point 4): how long a conversion of a very wide CSV takes, or its refusal.

    .venv/bin/python benchmarks/wide_csv_bench.py                        # 100k, 40k, 20k and 10k columns
    .venv/bin/python benchmarks/wide_csv_bench.py --columns 20000 --rows 200

Each case writes a CSV of `--rows` rows of random integers (5 digits) and runs tfrecorder.convert() on
it in a fresh process (imports excluded from the timing), reporting the wall-clock seconds and whether
it converted or was refused (a table wider than tfrecorder.core.schema.MAX_COLUMNS is one ValueError).
Before issue 26 the column-name check alone was quadratic (18.9 s for 40k columns) and the columnar
encoder paid a per-column cost per ≈4 MB slice (a 100k-column, 50-row CSV did not finish in 300 s).
"""
from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / ".out" / "wide_csv"

RUN = """
import sys, time
import tfrecorder
started = time.monotonic()
try:
    result = tfrecorder.convert(sys.argv[1], sys.argv[2], progress=False)
    print(f"converted {result['rows_in']} rows in {time.monotonic() - started:.1f} s")
except ValueError as exc:
    print(f"refused in {time.monotonic() - started:.1f} s: {exc}")
"""


def write_csv(path: Path, columns: int, rows: int) -> None:
    rng = random.Random(7)
    with open(path, "w") as stream:
        stream.write(",".join(f"c{i}" for i in range(columns)) + "\n")
        for _ in range(rows):
            stream.write(",".join(str(rng.randint(10000, 99999)) for _ in range(columns)) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--columns", default="100000,40000,20000,10000")
    parser.add_argument("--rows", type=int, default=50)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    for columns in (int(c) for c in args.columns.split(",")):
        path = OUT / f"wide-{columns}.csv"
        write_csv(path, columns, args.rows)
        shutil.rmtree(OUT / "jobs", ignore_errors=True)
        done = subprocess.run([sys.executable, "-c", RUN, str(path), str(OUT / "jobs")], capture_output=True,
                              text=True, cwd=HERE.parent)
        print(f"{columns:>7,} columns × {args.rows} rows ({path.stat().st_size / 1e6:.0f} MB): "
              f"{(done.stdout or done.stderr).strip().splitlines()[-1]}", flush=True)
        path.unlink()


if __name__ == "__main__":
    main()
