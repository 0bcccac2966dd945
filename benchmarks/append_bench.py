"""Versioned append (issue 28): appending new images to a large job against converting everything again.

    .venv/bin/python benchmarks/append_bench.py                       # 100,000-row base + 1,000 new images
    .venv/bin/python benchmarks/append_bench.py --base-rows 5000 --new-images 100 --appends 3   # quick

One run measures, on the same machine and corpus:
  scratch  - tfrecorder.convert of all base + new rows (101,000) from a CSV, default options;
  append   - tfrecorder.append(base job, the new rows' CSV): the base's shards are carried by hard
             links, only the new rows are read, checked and encoded; duplicates of the base are looked
             for (the default, duplicates="discard") in the keys sidecars the base's conversion wrote
             (16 bytes a record, no record read);
  append-keep - the same with duplicates="keep" (nothing of the base is read);
  onto-version - 1,000 more images appended to that version (v3 on v2), duplicates looked for;
  keys cost - a plain conversion of `--keys-rows` rows with and without the keys sidecars written
             while encoding (each record's URI and SHA-256 of its image bytes; runs alternated).
The target: append ≤ 5% of scratch (wall clock). Then `--appends` more appends of the same size are
chained (v3 on v2, ...) to show that the shard count of a version stays within the sharding rules.

The images are the realistic photo-like ~80 KB 500×375 JPEGs of the other benchmarks: `--pictures`
distinct pictures, each file a copy of one with its own counter in a JPEG comment (COM) segment, so
that every file's bytes are distinct at the cost of writing it. Base rows cycle over `--base-files`
such files (rows are what costs here, and more files would only make the corpus bigger); the new
images are distinct files not in the base. The corpus is generated once under benchmarks/.corpus/append/.
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = HERE / ".corpus" / "append"
OUT = HERE / ".out" / "append"
LABELS = ("cat", "dog", "fox")
SIZE = (375, 500)  # height, width: the ~80 KB photo-like JPEGs of convert_bench
QUALITY = 87
TARGET = 0.05


def split_for(i: int) -> str:
    return "TRAIN" if i % 10 < 8 else ("VALIDATION" if i % 10 == 8 else "TEST")


def pictures(count: int) -> list[bytes]:
    """`count` distinct photo-like JPEGs (cached under .corpus/append/pictures/)."""
    from PIL import Image

    sys.path.insert(0, str(ROOT))
    from tfrecorder.sample_data import encode_image, photo_array

    directory = CORPUS / "pictures"
    directory.mkdir(parents=True, exist_ok=True)
    found = []
    for i in range(count):
        path = directory / f"{i:04d}.jpg"
        if not path.exists():
            data = encode_image(Image.fromarray(photo_array(SIZE[0], SIZE[1], i)), "JPEG", quality=QUALITY)
            path.with_suffix(".tmp").write_bytes(data)
            path.with_suffix(".tmp").replace(path)
        found.append(path.read_bytes())
    return found


def with_counter(jpeg: bytes, counter: int) -> bytes:
    """The JPEG with a comment segment holding `counter` right after its SOI: same picture, distinct bytes."""
    text = f"append-bench {counter}".encode()
    return jpeg[:2] + b"\xff\xfe" + (len(text) + 2).to_bytes(2, "big") + text + jpeg[2:]


def images(prefix: str, count: int, offset: int, sources: list[bytes]) -> list[Path]:
    """`count` distinct JPEG files (cached): copies of the pictures, each with its own counter."""
    directory = CORPUS / prefix
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = directory / f"{i:06d}.jpg"
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(with_counter(sources[i % len(sources)], offset + i))
            tmp.replace(path)
        paths.append(path)
    return paths


def write_csv(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    with open(path, "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["split", "image_uri", "label"])
        writer.writerows(rows)
    return path


def timed(action):
    os.sync()
    start = time.perf_counter()
    result = action()
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-rows", type=int, default=100_000)
    parser.add_argument("--base-files", type=int, default=5_000)
    parser.add_argument("--pictures", type=int, default=300, help="distinct pictures the files are copies of")
    parser.add_argument("--new-images", type=int, default=1_000)
    parser.add_argument("--appends", type=int, default=10, help="chained appends after the measured one")
    parser.add_argument("--keys-rows", type=int, default=10_000, help="rows of the keys-cost conversions (0: skip)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import tfrecorder

    load_before = os.getloadavg()[0]
    sources = pictures(args.pictures)
    base_files = images("base", args.base_files, 0, sources)
    base_rows = [(split_for(i), str(base_files[i % len(base_files)]), LABELS[i % 3]) for i in range(args.base_rows)]
    batches = []
    for n in range(args.appends + 2):
        new_files = images(f"new{n}", args.new_images, 1_000_000 * (n + 1), sources)
        batches.append([(split_for(i), str(p), LABELS[i % 3] if n == 0 else f"label{n}") for i, p in enumerate(new_files)])
    base_csv = write_csv(CORPUS / f"base-{args.base_rows}.csv", base_rows)
    new_csvs = [write_csv(CORPUS / f"new-{n}.csv", rows) for n, rows in enumerate(batches)]
    all_csv = write_csv(CORPUS / f"all-{args.base_rows}.csv", base_rows + batches[0])
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)

    base = tfrecorder.convert(str(base_csv), str(OUT / "versions"), job_label="bench", progress=False)
    print(f"base: {args.base_rows:,} rows, {base['bytes_written']:,} bytes, "
          f"{sum(len(i['shards']) for i in base['metadata']['splits'].values())} shards")
    scratch, scratch_s = timed(lambda: tfrecorder.convert(str(all_csv), str(OUT / "scratch"), progress=False))
    version, append_s = timed(lambda: tfrecorder.append(base["tfrecord_dir"], str(new_csvs[0]), progress=False))
    kept, keep_s = timed(lambda: tfrecorder.append(base["tfrecord_dir"], str(new_csvs[0]), duplicates="keep",
                                                   output_dir=str(OUT / "kept"), progress=False))
    onto_version, onto_version_s = timed(lambda: tfrecorder.append(version["tfrecord_dir"], str(new_csvs[1]),
                                                                   output_dir=str(OUT / "onto-version"), progress=False))
    assert sum(version["written"].values()) == sum(scratch["written"].values())
    print(f"scratch ({len(base_rows) + len(batches[0]):,} rows): {scratch_s:.2f} s")
    print(f"append ({args.new_images:,} new images, duplicates looked for): {append_s:.2f} s "
          f"= {append_s / scratch_s:.1%} of scratch")
    print(f"append (duplicates='keep'): {keep_s:.2f} s = {keep_s / scratch_s:.1%} of scratch")
    print(f"append {args.new_images:,} more onto that version ({sum(version['written'].values()):,} rows; duplicates "
          f"looked for in its keys sidecars): {onto_version_s:.2f} s = {onto_version_s / scratch_s:.1%} of scratch")
    job = version["tfrecord_dir"]
    for n in range(2, args.appends + 2):
        job = tfrecorder.append(job, str(new_csvs[n]), duplicates="keep", progress=False)["tfrecord_dir"]
    if args.appends:
        import json

        document = json.loads(Path(job, "metadata.json").read_text())
        shards = {split: len(info["shards"]) for split, info in document["splits"].items()}
        scratch_shards = {split: len(info["shards"]) for split, info in scratch["metadata"]["splits"].items()}
        print(f"after {args.appends} more appends (v{document['lineage']['version']}): shards per split {shards} "
              f"(a fresh conversion of {len(base_rows) + len(batches[0]):,} rows: {scratch_shards})")
        assert tfrecorder.verify(job).ok
    for what, seconds in (("append, duplicates looked for (default)", append_s),
                          ("append, duplicates='keep'", keep_s), ("append onto a version (keys sidecars)", onto_version_s)):
        met = seconds <= TARGET * scratch_s
        print(f"target ≤ {TARGET:.0%} of scratch, {what}: {seconds / scratch_s:.1%} — {'met' if met else 'NOT met'}")
    if args.keys_rows:
        from beam_pipelines.steps.encode_rows import EncodeAndWritePieces

        keys_csv = write_csv(CORPUS / f"keys-{args.keys_rows}.csv", base_rows[:args.keys_rows])
        spent = {True: [], False: []}
        for repeat in range(2):
            for keys in (False, True):
                EncodeAndWritePieces.image_keys = keys
                _, seconds = timed(lambda: tfrecorder.convert(str(keys_csv), str(OUT / f"keys-{keys}-{repeat}"),
                                                              progress=False))
                spent[keys].append(seconds)
        EncodeAndWritePieces.image_keys = True
        without, with_keys = min(spent[False]), min(spent[True])
        print(f"plain conversion of {args.keys_rows:,} rows: {without:.2f} s without keys sidecars, {with_keys:.2f} s "
              f"with them (best of 2 each): {with_keys / without - 1:+.1%}")
    print(f"load average {load_before:.1f} → {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
