"""Bounded fan-out and balanced shards: num_shards=300 under a 256-open-files limit, shards never empty or skewed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

ROWS, NUM_SHARDS, OPEN_FILES = 3000, 300, 256

SCRIPT = textwrap.dedent("""
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit}))
    import tfrecorder
    result = tfrecorder.convert(sys.argv[1], sys.argv[2], num_shards={shards}, progress=False)
    print(json.dumps(result["tfrecord_dir"]))
""")


@pytest.fixture(scope="module")
def structured_csv(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("fanout") / "rows.csv"
    lines = ["id,x,label"] + [f"{i},{i / 7:.4f},{'abc'[i % 3]}" for i in range(ROWS)]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_300_shards_on_3000_rows_under_a_256_open_files_limit(structured_csv, tmp_path):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": os.getcwd()}
    script = SCRIPT.format(limit=OPEN_FILES, shards=NUM_SHARDS)
    done = subprocess.run([sys.executable, "-c", script, structured_csv, str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    job = json.loads(done.stdout.strip().splitlines()[-1])
    metadata = json.loads(open(os.path.join(job, "metadata.json")).read())
    assert metadata["records_written"] == ROWS
    for split, info in metadata["splits"].items():
        counts = [shard["records"] for shard in info["shards"]]
        assert len(counts) == NUM_SHARDS, split
        assert sum(counts) == info["records"]
        if info["records"] >= NUM_SHARDS:
            assert min(counts) > 0, split
        assert max(counts) - min(counts) <= 1, split
        for shard in info["shards"]:
            assert os.path.getsize(os.path.join(job, shard["file"])) == shard["bytes"]
