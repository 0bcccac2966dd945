"""Image URIs that name no ordinary file cost one discarded row each: never a hang, a flood or a failed job.

A FIFO would block its reader forever, /dev/zero never ends, /proc/self/mem answers EIO, a 2.6 GB file
is more than one read returns; http(s) URLs name no storage tfrecorder reads. Each is discarded with a
reason saying what it is, without being read, and a gs:// object over the cap is cut off in its one
download. The conversions that could hang run in a subprocess with a time box.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pandas as pd
import pytest

import tfrecorder
from support import imagegen
from support.readers import read_job

CONVERT = """
import json, sys
import pandas as pd
import tfrecorder
table = pd.DataFrame({"split": "TRAIN", "image_uri": json.loads(sys.argv[1]), "label": "a"})
result = tfrecorder.convert(table, sys.argv[2], validate="header", progress=False)
discarded = pd.read_csv(result["tfrecord_dir"] + "/discarded.csv")
print(json.dumps({"written": result["written"], "discards": dict(zip(discarded.image_uri, discarded.reason))}))
"""


def _convert_in_subprocess(uris: list[str], output_dir) -> dict:
    done = subprocess.run([sys.executable, "-c", CONVERT, json.dumps(uris), str(output_dir)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_special_and_huge_files_are_discarded_unread_with_what_they_are(tmp_path):
    good = imagegen.write_files(tmp_path, {"good.jpg": imagegen.odd_images()["rgb.jpg"][0]})["good.jpg"]
    fifo = tmp_path / "fifo.jpg"
    os.mkfifo(fifo)  # no writer: opening it for reading would block forever
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(tmp_path / "socket.jpg"))
    huge = tmp_path / "huge.jpg"
    with open(huge, "wb") as stream:
        stream.write(imagegen.odd_images()["rgb.png"][0])
        stream.truncate(2_600_000_000)  # sparse: more than one os.read returns (~2 GiB)
    expected = {
        str(fifo): f"not a regular file: {fifo} is a FIFO",
        "/dev/zero": "not a regular file: /dev/zero is a character device",
        "/proc/self/mem": "not a regular file: /proc/self/mem is a kernel interface file (/proc, /sys, ...)",
        str(tmp_path / "socket.jpg"): f"not a regular file: {tmp_path / 'socket.jpg'} is a socket",
        str(huge): f"file too large: {huge} holds 2,600,000,000 bytes, more than 536,870,912 (max_image_bytes)",
        "https://example.com/cat.jpg": ("unsupported image location: http(s) URLs are not read; copy the images "
                                        "to local storage or gs://"),
        str(tmp_path): f"not a file: {tmp_path} is a directory",
    }
    try:
        result = _convert_in_subprocess([str(good), *expected], tmp_path / "out")
    finally:
        listening.close()
    assert result["written"] == {"TRAIN": 1}
    assert result["discards"] == expected


def test_max_image_bytes_discards_larger_files_through_the_accessor(tmp_path):
    files = {name: data for name, (data, _fmt, _channels) in imagegen.odd_images().items()}
    paths = imagegen.write_files(tmp_path / "images", files)
    cap = sorted(len(data) for data in files.values())[len(files) // 2]
    table = pd.DataFrame({"split": "TRAIN", "image_uri": [str(p) for p in paths.values()], "label": "a"})
    result = table.tensorflow.to_tfrecord(tmp_path / "out", max_image_bytes=cap, validate="header", progress=False)
    discarded = pd.read_csv(f"{result['tfrecord_dir']}/discarded.csv")
    too_large = {str(paths[name]) for name, data in files.items() if len(data) > cap}
    assert set(discarded.image_uri) == too_large and len(too_large) >= 3
    for uri, reason in zip(discarded.image_uri, discarded.reason):
        assert reason == f"file too large: {uri} holds {os.path.getsize(uri):,} bytes, more than {cap:,} (max_image_bytes)"
    assert len(read_job(result["tfrecord_dir"])["TRAIN"]) == len(files) - len(too_large)


def test_a_gs_object_over_the_cap_is_discarded_in_its_one_request(proxy, gcs, tmp_path):
    data = imagegen.odd_images()["rgb.png"][0]
    gcs.bucket("tfr-caps")
    gcs.upload("gs://tfr-caps/exact.png", data)
    gcs.upload("gs://tfr-caps/over.png", data + bytes(4096))  # PNG readers ignore bytes after IEND
    table = pd.DataFrame({"split": "TRAIN", "image_uri": ["gs://tfr-caps/exact.png", "gs://tfr-caps/over.png"],
                          "label": "a"})
    result = tfrecorder.convert(table, tmp_path, max_image_bytes=len(data), validate="header", progress=False)
    assert [ex["image"] for ex in read_job(result["tfrecord_dir"])["TRAIN"]] == [data]
    discarded = pd.read_csv(f"{result['tfrecord_dir']}/discarded.csv")
    assert list(zip(discarded.image_uri, discarded.reason)) == [
        ("gs://tfr-caps/over.png", f"file too large: gs://tfr-caps/over.png holds more than {len(data):,} bytes "
                                   "(max_image_bytes)")]
    assert proxy.count("/o/over.png") == 1  # no metadata request before the download


@pytest.mark.parametrize("option", ["--max-image-bytes", "--max_image_bytes"])
def test_the_cli_takes_the_byte_cap_and_refuses_a_bad_one(tmp_path, option):
    data = imagegen.odd_images()["rgb.jpg"][0]
    imagegen.write_files(tmp_path / "img", {"a.jpg": data})
    (tmp_path / "t.csv").write_text("split,image_uri,label\nTRAIN,img/a.jpg,cat\n")
    base = [sys.executable, "-m", "tfrecorder", "convert", "--source", str(tmp_path / "t.csv"), "--validate", "header"]
    done = subprocess.run([*base, "--output_dir", str(tmp_path / "out"), option, str(len(data) - 1)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "discarded: 1" in done.stdout
    bad = subprocess.run([*base, "--output_dir", str(tmp_path / "bad"), option, "0"], capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 2
    assert bad.stderr.strip() == ("tfrecorder: error: max_image_bytes must be an integer from 1 to 2,147,483,646 "
                                  "(an Example holds less than 2 GiB), got 0")
