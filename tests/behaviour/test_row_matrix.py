"""Reliability: a matrix of odd and broken rows, each written correctly or discarded with its reason.

One CSV conversion covers every case (relative paths resolve against the CSV's own folder).
"""
from __future__ import annotations

import csv
import os
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from support import imagegen
import tfrecorder
from support.readers import read_job
from tfrecorder.sample_data import encode_image, photo_array

WRITTEN = "written"


def bomb_png() -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", 60_000, 60_000, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


def palette_with_transparency() -> bytes:
    image = Image.fromarray(photo_array(16, 16, 5)).convert("P", palette=Image.Palette.ADAPTIVE, colors=8)
    return encode_image(image, "PNG", transparency=0)


def build_cases(root: Path) -> tuple[list[dict], dict[str, tuple[str, str]]]:
    """CSV rows (with a `case` column) and case → (expected outcome, reason prefix or format)."""
    odd = imagegen.odd_images()
    broken = imagegen.broken_images()
    jpeg = odd["rgb.jpg"][0]
    files = {f"odd/{name}": data for name, (data, _f, _c) in odd.items()}
    files.update({f"broken/{name}": data for name, (data, _r) in broken.items()})
    files.update({
        "names/ünïcødé ✓.jpg": jpeg, "names/with space, comma.jpg": jpeg, "names/it's \"quoted\".jpg": jpeg,
        "palette_trns.png": palette_with_transparency(), "bomb.png": bomb_png(),
        "tiff_named.jpg": encode_image(Image.fromarray(photo_array(8, 8, 1)), "TIFF"),
        "html_error_page.jpg": b"<html><body>403 Forbidden</body></html>",
        "bad_marker.jpg": jpeg[:2] + b"\xff\x0a\x00\x04ab" + jpeg[2:],
        "bad_crc.png": odd["rgb.png"][0][:40] + bytes([odd["rgb.png"][0][40] ^ 0xFF]) + odd["rgb.png"][0][41:],
        "dup.jpg": jpeg,
    })
    imagegen.write_files(root, {})
    for relative, data in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (root / "a_directory.jpg").mkdir()
    (root / "link.jpg").symlink_to(root / "odd" / "rgb.jpg")

    expected: dict[str, tuple[str, str]] = {}
    rows: list[dict] = []

    def add(case: str, uri: str, outcome: str, detail: str = "", split: str = "TRAIN", label: str = "cat"):
        rows.append({"case": case, "split": split, "image_uri": uri, "label": label})
        expected[case] = (outcome, detail)

    for name, (_data, fmt, _channels) in odd.items():
        add(f"odd {name}", f"odd/{name}", WRITTEN, fmt)  # relative to the CSV
    for name, (_data, reason) in broken.items():
        add(f"broken {name}", str(root / "broken" / name), "discarded", reason)
    add("unicode path", "names/ünïcødé ✓.jpg", WRITTEN, "jpeg")
    add("space comma path", "names/with space, comma.jpg", WRITTEN, "jpeg")
    add("quote path", "names/it's \"quoted\".jpg", WRITTEN, "jpeg")
    add("absolute path", str(root / "odd" / "rgb.jpg"), WRITTEN, "jpeg")
    add("parent-relative path", "../matrix/odd/rgb.jpg", WRITTEN, "jpeg")
    add("symlink", "link.jpg", WRITTEN, "jpeg")
    add("palette with transparency", "palette_trns.png", WRITTEN, "png")
    add("directory", "a_directory.jpg", "discarded", "not a file")
    add("missing file", "nowhere/missing.jpg", "discarded", "missing file")
    add("decompression bomb", "bomb.png", "discarded", "image too large")
    add("tiff", "tiff_named.jpg", "discarded", "unsupported image format: TIFF")
    add("html page", "html_error_page.jpg", "discarded", "not an image")
    add("unknown jpeg marker", "bad_marker.jpg", "discarded", "corrupt image")
    add("png crc damage", "bad_crc.png", "discarded", "corrupt image")
    add("empty label", "odd/rgb.jpg", "discarded", "empty label", label="")
    add("whitespace label", "odd/rgb.jpg", "discarded", "empty label", label="   ")
    add("empty image uri", "", "discarded", "empty image URI")
    add("unknown split", "odd/rgb.jpg", "discarded", "unknown split", split="holdout")
    add("lower-case split", "odd/rgb.jpg", WRITTEN, "jpeg", split="validation")
    add("unassigned split", "odd/gray.jpg", WRITTEN, "jpeg", split="UNASSIGNED")
    add("empty split", "odd/rgb.png", WRITTEN, "png", split="")
    add("duplicate row 1", "dup.jpg", WRITTEN, "jpeg")
    add("duplicate row 2", "dup.jpg", WRITTEN, "jpeg")
    return rows, expected


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    root = tmp_path_factory.mktemp("data") / "matrix"
    root.mkdir()
    rows, expected = build_cases(root)
    csv_path = root / "table.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as stream:
        writer = csv.DictWriter(stream, fieldnames=["case", "split", "image_uri", "label"])
        writer.writeheader()
        writer.writerows(rows)
        stream.write("malformed row,TRAIN,odd/rgb.jpg,cat,EXTRA FIELD\n")
    expected["malformed row"] = ("discarded", "malformed CSV row")
    result = tfrecorder.convert(str(csv_path), tmp_path_factory.mktemp("out"))
    return root, result, expected


def test_matrix_has_at_least_25_kinds(matrix):
    assert len(matrix[2]) >= 25


def test_every_row_is_written_or_discarded_with_its_reason(matrix, tf):
    root, result, expected = matrix
    written = {ex["case"].decode(): ex for examples in read_job(result["tfrecord_dir"]).values() for ex in examples}
    with open(os.path.join(result["tfrecord_dir"], "discarded.csv"), newline="", encoding="utf-8") as stream:
        discarded = {row["case"]: row["reason"] for row in csv.DictReader(stream)}
    assert set(written) | set(discarded) == set(expected)
    assert not set(written) & set(discarded)
    for case, (outcome, detail) in expected.items():
        if outcome == WRITTEN:
            example = written.get(case)
            assert example is not None, (case, discarded.get(case))
            assert example["image_format"].decode() == detail, case
            decoded = tf.io.decode_image(example["image"], expand_animations=False)
            assert (example["image_height"], example["image_width"], example["image_channels"]) == tuple(decoded.shape), case
            uri = example["image_uri"].decode()
            source = Path(uri) if os.path.isabs(uri) else root / uri
            assert example["image"] == source.read_bytes(), case
        else:
            assert case in discarded, (case, "was written")
            assert discarded[case].startswith(detail), (case, discarded[case])


def test_counts_identity_and_duplicates_share_a_split(matrix):
    _root, result, expected = matrix
    assert result["rows_in"] == len(expected) == sum(result["written"].values()) + result["discarded"]
    splits = {ex["case"].decode(): split for split, examples in read_job(result["tfrecord_dir"]).items() for ex in examples}
    assert splits["duplicate row 1"] == splits["duplicate row 2"]
    assert splits["lower-case split"] == "VALIDATION"
