"""discarded.csv from per-bundle part files: external sort in bounded runs gives the in-memory result."""
from __future__ import annotations

import csv
import io
import random

from beam_pipelines.steps.discard_files import DiscardPartWriter, reason_counts, write_discard_file

COLUMNS = ("image_uri", "label")


def rows(seed: int, count: int):
    rng = random.Random(seed)
    reasons = ["missing file: /x/{}.jpg", "unknown split: 'Z'", "empty label: column 'label'", "not an image: {}"]
    for i in range(count):
        row = {"image_uri": f"/img/{rng.randint(0, 50)}.jpg", "label": rng.choice(["a", "b, c", None, "multi\nline"])}
        yield row, rng.choice(reasons).format(i)


def test_parts_merge_in_small_runs_into_the_same_sorted_csv(tmp_path):
    found = [list(rows(seed, count)) for seed, count in enumerate([0, 40, 7, 130])]
    parts = []
    for batch in found:
        writer = DiscardPartWriter(str(tmp_path / "parts"), COLUMNS)
        for row, reason in batch:
            writer.write(row, reason)
        parts.append(writer.close())
    everything = [pair for batch in found for pair in batch]
    expected = io.StringIO()
    out = csv.writer(expected)
    out.writerow([*COLUMNS, "reason"])
    for row, reason in sorted(everything, key=lambda d: (d[1], str(d[0]))):
        out.writerow(["" if row[c] is None else row[c] for c in COLUMNS] + [reason])
    for run_bytes, fan_in in ((1 << 20, 64), (200, 2), (1, 3)):  # one run; many runs merged in several passes
        destination = tmp_path / f"discarded-{run_bytes}.csv"
        write_discard_file(parts, COLUMNS, str(destination), run_bytes=run_bytes, fan_in=fan_in)
        assert destination.read_bytes() == expected.getvalue().encode()
    counts = reason_counts(parts)
    assert sum(counts.values()) == len(everything) == sum(p.rows for p in parts)
    assert counts["missing file"] == sum(1 for _row, reason in everything if reason.startswith("missing file"))


def test_no_parts_give_a_header_only_file(tmp_path):
    write_discard_file([], COLUMNS, str(tmp_path / "d.csv"))
    assert (tmp_path / "d.csv").read_bytes() == b"image_uri,label,reason\r\n"
