"""How much typed staging (tfrecorder.sources.dataframe_staging: an Arrow file) costs against pandas' own DataFrame.to_parquet.

    .venv/bin/python benchmarks/staging_bench.py [rows]

Prints seconds for both on the same generated mixed frame (ints, floats, text, booleans, nullable
ints, datetimes, 4-float vectors) and their ratio. Staging must keep every value exact, which plain
to_parquet does not (NaN inside lists becomes null, categoricals and datetimes change type).
"""
from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout this script is in
from tfrecorder.sources import dataframe_staging  # noqa: E402
from tfrecorder.core.schema import infer_schema  # noqa: E402


def mixed_frame(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({
        "i": rng.integers(0, 1000, rows), "f": rng.random(rows), "s": [f"text {i}" for i in range(rows)],
        "b": rng.random(rows) > 0.5, "ni": pd.array(np.where(rng.random(rows) > 0.1, 1, None), dtype="Int64"),
        "t": pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 10**9, rows), unit="s"),
        "v": list(rng.random((rows, 4))),
    })


def best_of(repeats: int, action) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return min(timings)


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    frame = mixed_frame(rows)
    schema = infer_schema(frame)
    staged = best_of(3, lambda: dataframe_staging.write_staged(frame, schema, io.BytesIO()))
    plain = best_of(3, lambda: frame.to_parquet(io.BytesIO()))
    print(f"rows={rows} staging={staged:.2f}s to_parquet={plain:.2f}s ratio={staged / plain:.1f}x")


if __name__ == "__main__":
    main()
