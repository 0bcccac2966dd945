"""tfrecorder.append / versions: new rows as a new, immutable version of a job (issue 28)."""
from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import tfrecorder
from support.replay import REPLAY, snapshot
from tfrecorder import cli
from tfrecorder.append import versions_text
from tfrecorder.format.framing import read_records


def png(value: int) -> bytes:
    out = io.BytesIO()
    Image.fromarray(np.full((6, 5, 3), value, np.uint8)).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("append_images")
    for i in range(40):
        (directory / f"{i}.png").write_bytes(png(i * 5))
    (directory / "copy-of-3.png").write_bytes(png(15))
    return directory


def table(images: Path, numbers, labels, splits) -> pd.DataFrame:
    return pd.DataFrame({"image_uri": [str(images / f"{n}.png") if isinstance(n, int) else str(images / n) for n in numbers],
                         "label": list(labels), "split": list(splits)})


@pytest.fixture(scope="module")
def base(images, tmp_path_factory) -> str:
    rows = table(images, range(10), ["cat", "dog"] * 5, ["TRAIN"] * 6 + ["VALIDATION"] * 2 + ["TEST"] * 2)
    return tfrecorder.convert(rows, tmp_path_factory.mktemp("versions"), job_label="pets", validate="header",
                              progress=False)["tfrecord_dir"]


@pytest.fixture(scope="module")
def version(base, images) -> dict:
    new = table(images, [20, 21, 22, 23, 3, "copy-of-3.png"], ["emu", "cat", "ant", "dog", "cat", "dog"],
                ["TRAIN", "TRAIN", "TEST", "VALIDATION", "TRAIN", "TEST"])
    return tfrecorder.append(base, new, progress=False)


def metadata(job: str) -> dict:
    return json.loads(Path(job, "metadata.json").read_text())


def records(job: str, split: str) -> list[bytes]:
    found = []
    for shard in metadata(job)["splits"][split]["shards"]:
        with open(Path(job, shard["file"]), "rb") as stream:
            found.extend(read_records(stream))
    return found


def test_a_version_holds_the_base_records_then_the_new_ones(base, version):
    job = version["tfrecord_dir"]
    assert os.path.dirname(job) == os.path.dirname(base)
    assert Path(job).name.startswith("pets-") and Path(job).name.endswith("-v2")
    for split in ("TRAIN", "VALIDATION", "TEST"):
        assert records(job, split)[:len(records(base, split))] == records(base, split)
    assert version["written"] == {"TRAIN": 8, "VALIDATION": 3, "TEST": 3}
    assert version["rows_in"] == 16 and version["discarded"] == 2
    first = Path(job, metadata(job)["splits"]["TRAIN"]["shards"][0]["file"])
    assert os.path.samefile(first, Path(base, "train-00000-of-00001.tfrecord"))  # carried by a hard link


def test_the_base_is_left_as_it_was(base, version):
    assert sorted(os.listdir(base)) == ["dataset_info.json", "discarded.csv", "duplicates.csv", "features.json",
                                        "index", "keys", "label.labels.txt", "metadata.json", "statistics.json",
                                        "statistics.pb", "test-00000-of-00001.tfrecord",
                                        "train-00000-of-00001.tfrecord", "validation-00000-of-00001.tfrecord"]
    assert metadata(base)["vocabularies"] == {"label": ["cat", "dog"]} and "lineage" not in metadata(base)


def test_label_ids_never_change_and_new_train_labels_are_appended(version):
    document = metadata(version["tfrecord_dir"])
    assert document["vocabularies"] == {"label": ["cat", "dog", "emu"]}  # "ant" is only in TEST: unknown there
    assert document["splits"]["TEST"]["unknown_labels"] == 1
    assert Path(version["tfrecord_dir"], "label.labels.txt").read_text().split() == ["cat", "dog", "emu"]


def test_lineage_records_parent_version_and_what_was_added(base, version):
    import hashlib

    lineage = metadata(version["tfrecord_dir"])["lineage"]
    assert lineage["version"] == 2
    assert lineage["parent"] == {"job_name": Path(base).name, "version": 1,
                                 "metadata_sha256": hashlib.sha256(Path(base, "metadata.json").read_bytes()).hexdigest()}
    assert lineage["added"] == {"rows_in": 6, "discarded": 2, "records": {"TRAIN": 2, "VALIDATION": 1, "TEST": 1}}
    assert lineage["vocabulary_growth"] == {"label": ["emu"]}
    assert [c["parent_file"] for c in lineage["carried_shards"]] == [
        "train-00000-of-00001.tfrecord", "validation-00000-of-00001.tfrecord", "test-00000-of-00001.tfrecord"]
    assert "version 2 of" in version._repr_html_()
    assert f"version 2 of {Path(base).name}: added TRAIN+2, VALIDATION+1, TEST+1" in repr(version)


def test_rows_already_in_the_base_are_discarded_by_uri_or_bytes(base, version):
    discarded = pd.read_csv(Path(version["tfrecord_dir"], "discarded.csv"))
    assert sorted(Path(uri).name for uri in discarded.image_uri) == ["3.png", "copy-of-3.png"]
    assert set(discarded.reason) == {f"already in base: {Path(base).name}"}


def test_readers_see_base_and_new_records(version):
    job = version["tfrecord_dir"]
    report = tfrecorder.verify(job)
    assert report.ok, report
    train = tfrecorder.load(job, "TRAIN", batch_size=100, decode_images=False)
    labels = sorted(int(v) for batch in train for v in batch["label"].numpy())
    assert labels == [0, 0, 0, 0, 1, 1, 1, 2]
    assert len(tfrecorder.data_source(job, "TRAIN")) == 8
    index_files = [s["index_file"] for s in metadata(job)["splits"]["TRAIN"]["shards"]]
    assert all(Path(job, name).is_file() for name in index_files)


def test_inspect_shows_records_of_a_version(version, tmp_path):
    tfrecorder.inspect(version["tfrecord_dir"], split="TEST", num_records=10, output_dir=str(tmp_path / "seen"))
    rows = pd.read_csv(tmp_path / "seen" / "records.csv")
    assert list(rows.label_name) == ["cat", "dog", "<unknown>"]  # "ant" is only in the new TEST rows


def test_tfds_reads_a_version(version):
    tfds = pytest.importorskip("tensorflow_datasets")
    builder = tfds.builder_from_directory(version["tfrecord_dir"])
    assert builder.info.splits["train"].num_examples == 8
    assert len(list(builder.as_dataset(split="test"))) == 3


def test_verify_finds_a_changed_parent(base, version, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(Path(base).parent, copy, symlinks=True)
    parent = copy / Path(base).name
    document = metadata(str(parent))
    document["note"] = "edited"
    (parent / "metadata.json").write_text(json.dumps(document))
    report = tfrecorder.verify(str(copy / Path(version["tfrecord_dir"]).name))
    assert not report.ok and "changed since this version was made" in report.problems[0]


def test_a_version_of_a_version_and_versions_listing(base, version, images, capsys):
    v3 = tfrecorder.append(version["tfrecord_dir"], table(images, [30], ["fox"], ["TRAIN"]), duplicates="keep",
                           progress=False)
    assert metadata(v3["tfrecord_dir"])["lineage"]["version"] == 3
    assert metadata(v3["tfrecord_dir"])["vocabularies"] == {"label": ["cat", "dog", "emu", "fox"]}
    listed = tfrecorder.versions(os.path.dirname(base))
    names = [job["job_name"] for job in listed]
    assert names[0] == Path(base).name and Path(v3["tfrecord_dir"]).name in names
    by_name = {job["job_name"]: job for job in listed}
    assert by_name[Path(v3["tfrecord_dir"]).name]["parent"] == Path(version["tfrecord_dir"]).name
    assert by_name[Path(v3["tfrecord_dir"]).name]["added"] == {"TRAIN": 1}
    assert cli.main(["versions", os.path.dirname(base)]) == 0
    printed = capsys.readouterr().out
    assert "v3  TRAIN=9" in printed and "added TRAIN+1" in printed
    assert versions_text([]) == "no finished jobs"


def test_duplicates_keep_writes_them(base, images, tmp_path):
    kept = tfrecorder.append(base, table(images, [3], ["cat"], ["TRAIN"]), duplicates="keep", output_dir=tmp_path,
                             progress=False)
    assert kept["discarded"] == 0 and kept["written"]["TRAIN"] == 7
    assert Path(kept["tfrecord_dir"]).parent == tmp_path


def test_duplicates_of_convert_and_append_are_one_option(base, images, tmp_path):
    """convert()'s values ("report", "fail": issue 29) discard rows already in the base as "discard" does
    (issue 28); "fail" fails the version on a leak among its new rows; an unknown value is refused first."""
    with pytest.raises(ValueError, match="duplicates must be one of discard, report, drop, fail, keep"):
        tfrecorder.append(base, table(images, [40], ["cat"], ["TRAIN"]), duplicates="maybe")
    reported = tfrecorder.append(base, table(images, [3, 24], ["cat", "dog"], ["TRAIN", "TRAIN"]),
                                 duplicates="report", output_dir=tmp_path / "report", progress=False)
    assert reported["discarded"] == 1 and reported["written"]["TRAIN"] == 7
    leaking = table(images, [26, 26], ["cat", "cat"], ["TRAIN", "TEST"])  # one image in TRAIN and TEST
    with pytest.raises(ValueError, match="train/test leakage"):
        tfrecorder.append(base, leaking, duplicates="fail", output_dir=tmp_path / "fail", progress=False)


def test_drop_discards_rows_in_the_base_and_all_but_one_of_each_group_of_new_rows(base, images, tmp_path):
    """duplicates="drop" (issue 29) in an append: rows already in the base go as with "discard"; a
    duplicate group among the new rows keeps its kept row (smallest row id, then split: the TEST one)."""
    new = table(images, [27, 27, 28, 3], ["cat", "cat", "dog", "cat"], ["TRAIN", "TEST", "TRAIN", "TRAIN"])
    dropped = tfrecorder.append(base, new, duplicates="drop", output_dir=tmp_path, progress=False)
    assert dropped["written"] == {"TRAIN": 7, "VALIDATION": 2, "TEST": 3}
    assert dropped.metadata["discard_reasons"] == {"already in base": 1, "duplicate of": 1}
    assert dropped.metadata["duplicates"]["dropped"] == 1


def test_new_rows_must_fit_the_base(base, images):
    rows = table(images, [31], ["cat"], ["TRAIN"])
    with pytest.raises(ValueError, match=r"extra"):
        tfrecorder.append(base, rows.assign(extra=1))
    with pytest.raises(ValueError, match=r"missing|lack.*label"):
        tfrecorder.append(base, rows.drop(columns=["label"]))
    with pytest.raises(ValueError, match="compression='gzip' differs"):
        tfrecorder.append(base, rows, compression="gzip")
    with pytest.raises(ValueError, match="validate='decode' differs"):
        tfrecorder.append(base, rows, validate="decode")
    with pytest.raises(ValueError, match="schema is inherited"):
        tfrecorder.append(base, rows, schema={"image_uri": "ImageUri"})


def test_tabular_append_through_the_accessor_and_cli(tmp_path, capsys):
    first = pd.DataFrame({"n": range(8), "label": ["a", "b"] * 4, "split": ["TRAIN"] * 6 + ["TEST"] * 2})
    base = first.tensorflow.to_tfrecord(str(tmp_path), job_label="numbers", progress=False)["tfrecord_dir"]
    second = pd.DataFrame({"n": [100, 101], "label": ["c", "a"], "split": ["TRAIN", "TEST"]})
    v2 = second.tensorflow.append_to(base, progress=False)
    assert v2["written"] == {"TRAIN": 7, "TEST": 3}
    assert metadata(v2["tfrecord_dir"])["vocabularies"] == {"label": ["a", "b", "c"]}
    loaded = tfrecorder.load(v2["tfrecord_dir"], "TRAIN", batch_size=100)
    assert sorted(int(v) for batch in loaded for v in batch["n"].numpy()) == [0, 1, 2, 3, 4, 5, 100]
    third = tmp_path / "third.csv"
    third.write_text("n,label,split\n200,b,TEST\n")
    assert cli.main(["append", v2["tfrecord_dir"], "--source", str(third), "--no_progress", "--duplicates", "report"]) == 0
    assert "TEST=4" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # --duplicates: discard|report|drop|fail|keep
        cli.main(["append", v2["tfrecord_dir"], "--source", str(third), "--duplicates", "dedupe"])
    assert cli.main(["append", v2["tfrecord_dir"], "--source", str(third), "--no_progress", "--duplicates", "drop"]) == 0
    assert "TEST=4" in capsys.readouterr().out  # image-free rows drop duplicates among the new rows too
    assert cli.main(["append", v2["tfrecord_dir"], "--source", str(tmp_path / "none.csv")]) == 2


def test_appending_replays_to_the_same_version(base, images, tmp_path):
    rows = table(images, [35, 36, 3], ["cat", "yak", "dog"], ["TRAIN", "TRAIN", "TEST"])
    normal = tfrecorder.append(base, rows, output_dir=tmp_path / "normal", progress=False)
    replayed = tfrecorder.append(base, rows, output_dir=tmp_path / "replayed", progress=False, beam_options=REPLAY)
    def same_names(job: str) -> str:  # keys sidecars are named after the job that wrote them
        return json.dumps(snapshot(job), default=repr).replace(Path(job).name, "<job>")

    assert same_names(normal["tfrecord_dir"]) == same_names(replayed["tfrecord_dir"])
    assert any("keys_file" in shard for shard in metadata(normal["tfrecord_dir"])["splits"]["TRAIN"]["shards"])


def test_keys_sidecars_let_the_next_append_skip_reading_records(version, images, tmp_path):
    document = metadata(version["tfrecord_dir"])
    shards = [shard for info in document["splits"].values() for shard in info["shards"]]
    assert all(Path(version["tfrecord_dir"], shard["keys_file"]).is_file() for shard in shards)
    first = shards[0]["file"]
    damaged = tmp_path / "copy"
    import shutil

    shutil.copytree(version["tfrecord_dir"], damaged)
    (damaged / first).write_bytes(b"not records")  # were the records read, the append would fail
    v3 = tfrecorder.append(str(damaged), table(images, [0, 37], ["cat", "cat"], ["TRAIN", "TRAIN"]),
                           output_dir=tmp_path / "out", progress=False)
    assert v3["discarded"] == 1 and v3["written"]["TRAIN"] == 9


def test_small_shards_of_appends_are_merged_not_piled_up(base, images, tmp_path):
    job = base
    for n in range(3):
        job = tfrecorder.append(job, table(images, [25 + n], ["cat"], ["TRAIN"]), output_dir=tmp_path,
                                progress=False)["tfrecord_dir"]
    document = metadata(job)
    assert [s["file"] for s in document["splits"]["TRAIN"]["shards"]] == [
        "train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"]  # the base's shard, then one merged
    assert document["lineage"]["merged_shards"] == [{"parent_file": "train-00001-of-00002.tfrecord", "records": 2}]
    assert document["lineage"]["added"]["records"] == {"TRAIN": 1}
    assert os.path.samefile(Path(job, "train-00000-of-00002.tfrecord"), Path(base, "train-00000-of-00001.tfrecord"))
    assert records(job, "TRAIN")[:6] == records(base, "TRAIN") and len(records(job, "TRAIN")) == 9
    assert tfrecorder.verify(job).ok


def test_a_local_base_cannot_feed_remote_workers(base, images):
    with pytest.raises(ValueError, match="cannot read its shards"):
        tfrecorder.append(base, table(images, [31], ["cat"], ["TRAIN"]), runner="DataflowRunner",
                          output_dir="gs://bucket/out", project="p", region="r")


def test_detection_jobs_and_tfrecorder2_directories_are_refused_with_a_pointer(detection_job, data_csv, tmp_path):
    with pytest.raises(ValueError, match="object-detection job; appending to one is not supported"):
        tfrecorder.append(detection_job["tfrecord_dir"], pd.DataFrame({"image_uri": ["a.jpg"]}))
    (tmp_path / "schema.pbtxt").write_text("")
    with pytest.raises(ValueError, match="TFRecorder 2.0; convert it with tfrecorder.upgrade"):
        tfrecorder.append(str(tmp_path), str(data_csv))
    assert cli.main(["append", str(tmp_path), "--source", str(data_csv)]) == 2


def test_a_conversion_writes_keys_sidecars_so_the_first_append_reads_no_record(base, images, tmp_path):
    from beam_pipelines.steps.base_duplicates import shard_key_hashes

    shards = [shard for info in metadata(base)["splits"].values() for shard in info["shards"]]
    for shard in shards:  # gathered from the pieces' keys while encoding: what a scan of the records finds
        assert Path(base, shard["keys_file"]).read_bytes() == shard_key_hashes(str(Path(base, shard["file"])), None,
                                                                               "image_uri")
    import shutil

    damaged = tmp_path / "copy"
    shutil.copytree(base, damaged)
    for shard in shards:
        (damaged / shard["file"]).write_bytes(b"not records")  # were the records read, the append would fail
    v2 = tfrecorder.append(str(damaged), table(images, [1, 38], ["cat", "cat"], ["TRAIN", "TRAIN"]),
                           output_dir=tmp_path / "out", progress=False)
    assert v2["discarded"] == 1 and v2["written"]["TRAIN"] == 7
