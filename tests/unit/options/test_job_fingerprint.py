import os

import numpy as np
import pandas as pd

from tfrecorder.core.schema import Schema
from tfrecorder.options.conversion_options import ConvertOptions, OutputLocation
from tfrecorder.options.job_fingerprint import job_fingerprint, mismatch, with_progress_facts
from tfrecorder.sources.source_registry import open_table


def options(tmp_path, **changed):
    values = dict(job_label=None, num_shards=0, max_shard_bytes=1 << 20, compression=None, image_size=None,
                  validate="header", split_ratios=(0.8, 0.1, 0.1), fetch_concurrency=None, max_image_pixels=10 ** 6,
                  max_image_bytes=10 ** 6, box_units="relative", annotation_format=None, encoding="utf-8",
                  verbose=False, progress=False)
    values.update(changed)
    return ConvertOptions.check(OutputLocation.of(str(tmp_path / "out")), **values)


def fingerprint(source, tmp_path, schema=None, **changed):
    table = open_table(source, None, "utf-8")
    schema = schema or Schema({"split": "SplitKey", "n": "IntegerInput", "label": "StringLabel"})
    staged = table.stage(schema, str(tmp_path / "out"))  # a DataFrame is named by its staged rows
    try:
        return job_fingerprint(table, schema, options(tmp_path, **changed), "DirectRunner", False)
    finally:
        if staged is not None:
            staged.discard()


def write_csv(path, rows=5):
    path.write_text("split,n,label\n" + "".join(f"TRAIN,{i},a\n" for i in range(rows)))
    return str(path)


def test_the_same_source_and_options_match(tmp_path):
    source = write_csv(tmp_path / "t.csv")
    first = with_progress_facts(fingerprint(source, tmp_path), 5, None)  # the facts added are not compared
    assert mismatch(first, fingerprint(source, tmp_path, fetch_concurrency=4, verbose=True)) is None


def test_a_changed_file_or_option_is_named_in_one_line(tmp_path):
    source = write_csv(tmp_path / "t.csv")
    first = fingerprint(source, tmp_path)
    assert mismatch(first, fingerprint(source, tmp_path, num_shards=3)) == "option num_shards differs (0 then, 3 now)"
    assert mismatch(first, fingerprint(source, tmp_path, validate="decode")).startswith("option validate differs")
    write_csv(tmp_path / "t.csv", rows=6)
    os.utime(source, ns=(1, 1))
    assert mismatch(first, fingerprint(source, tmp_path)) == f"the source file {source} changed (size, modification time or generation)"
    assert mismatch(None, first) == "it has no fingerprint"
    assert "another tfrecorder" in mismatch({**first, "tfrecorder_version": "0.0.1"}, first)


def test_a_dataframe_is_named_by_its_staged_rows(tmp_path):
    """A DataFrame's identity is the digest of the Parquet its workers read: the same rows, the same
    job (a copy, another index); any cell that changes what is written, another job."""
    frame = pd.DataFrame({"split": ["TRAIN"] * 3, "n": [1, 2, 3], "label": ["a", "b", "a"]})
    same = fingerprint(frame, tmp_path)["source"]
    assert fingerprint(frame.copy(), tmp_path)["source"] == same
    assert fingerprint(frame.set_axis([7, 8, 9]), tmp_path)["source"] == same  # the index is not written
    changed = frame.copy()
    changed.loc[1, "n"] = 7
    assert fingerprint(changed, tmp_path)["source"] != same
    schema = Schema({"split": "SplitKey", "n": "IntegerInput", "label": "StringLabel", "vec": "FloatInput[]"})
    arrays = [np.array([1.0, 2.0]), np.array([3.0]), np.array([])]
    digests = {fingerprint(frame.assign(vec=cells), tmp_path, schema)["source"]["dataframe"] for cells in (
        arrays, [np.array([1.0]), np.array([2.0, 3.0]), np.array([])],
        [np.array([1.0, 2.0]), np.array([3.5]), np.array([])],
        [np.array([1.0, 2.0]), np.array([3.0]), np.array([np.nan])])}
    assert len(digests) == 4
    assert fingerprint(frame.assign(vec=[a.astype(np.float32) for a in arrays]), tmp_path, schema)["source"] == \
        fingerprint(frame.assign(vec=arrays), tmp_path, schema)["source"]  # the same values written
    assert os.listdir(tmp_path / "out") == []  # the scratch files went with their tables
    first = fingerprint(frame, tmp_path)
    assert mismatch(first, fingerprint(changed, tmp_path)) == "the DataFrame's content changed"
    assert mismatch(first, fingerprint(write_csv(tmp_path / "t.csv"), tmp_path)) == "its source is of another kind"


def test_a_folder_is_known_by_its_listing_without_hidden_entries(tmp_path):
    from tfrecorder.options.job_fingerprint import folder_listing
    folder = tmp_path / "voc"
    (folder / "Annotations").mkdir(parents=True)
    (folder / "Annotations" / "a.xml").write_text("<annotation/>")
    first = folder_listing(str(folder))
    assert first[0] == "listing" and first[2] == 1
    (folder / "out" / ".incomplete-job").mkdir(parents=True)  # an output_dir inside: its job's scratch
    (folder / "out" / ".incomplete-job" / "piece").write_text("x")
    assert folder_listing(str(folder)) == first
    (folder / "Annotations" / "b.xml").write_text("<annotation/>")
    assert folder_listing(str(folder))[1:] != first[1:]
    os.utime(folder / "Annotations" / "a.xml", ns=(1, 1))
    second = folder_listing(str(folder))
    os.utime(folder / "Annotations" / "a.xml", ns=(2, 2))
    assert folder_listing(str(folder)) != second


def test_a_dataset_job_s_split_is_part_of_its_options(tmp_path):
    source = write_csv(tmp_path / "t.csv")
    table = open_table(source, None, "utf-8")
    schema = Schema({"split": "SplitKey", "n": "IntegerInput", "label": "StringLabel"})
    train = job_fingerprint(table, schema, options(tmp_path), "DirectRunner", False, dataset_split="TRAIN",
                            is_dataset=True)
    test = job_fingerprint(table, schema, options(tmp_path), "DirectRunner", False, dataset_split="TEST",
                           is_dataset=True)
    assert mismatch(train, test) == "option split differs ('TRAIN' then, 'TEST' now)"


def test_a_near_duplicate_job_names_its_perceptual_hash_method(tmp_path):
    """Committed parts hold perceptual hashes: a job hashed by another method does not resume."""
    source = write_csv(tmp_path / "t.csv")
    searching = fingerprint(source, tmp_path, near_duplicate_distance=7)
    assert searching["options"]["perceptual_hash"] and "perceptual_hash" not in fingerprint(source, tmp_path)["options"]
    older = {**searching, "options": {**searching["options"], "perceptual_hash": "phash-dct8-of-32x32"}}
    assert mismatch(older, searching).startswith("option perceptual_hash differs")


def test_a_near_duplicate_job_names_its_bucket_shift_and_other_jobs_do_not(tmp_path):
    """Committed parts hold band keys already bucketed by the job's shift (from its row estimate): a job
    bucketed with another shift does not resume; a job without near search has no shift to compare."""
    from tfrecorder.rows.near_duplicates import MAX_BUCKET_SHIFT

    source = write_csv(tmp_path / "t.csv")
    searching = fingerprint(source, tmp_path, near_duplicate_distance=7)
    assert searching["options"]["near_bucket_shift"] == MAX_BUCKET_SHIFT  # a small table: 16 buckets
    assert "near_bucket_shift" not in fingerprint(source, tmp_path)["options"]
    older = {**searching, "options": {**searching["options"], "near_bucket_shift": 8}}
    assert mismatch(older, searching).startswith("option near_bucket_shift differs")


def test_the_unit_size_a_job_was_cut_in_is_part_of_its_fingerprint(tmp_path):
    source = write_csv(tmp_path / "t.csv")
    old = fingerprint(source, tmp_path)
    old["options"]["unit_batches"] += 1  # a run that cut its pieces in other units: its parts are not reusable
    assert "option unit_batches differs" in mismatch(old, fingerprint(source, tmp_path))
