"""tfrecorder.sources.image_folder_source: a SPLIT/LABEL/file folder listed once into rows, the rest skipped."""
from __future__ import annotations

import logging

import pytest

from tfrecorder.sources import image_folder_source
from tfrecorder.sources.dataframe_source import DataFrameTable


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "images"
    for name in ("TRAIN/cat/a.jpg", "TRAIN/dog/b.png", "TEST/cat/c.jpg", "VALIDATION/dog/d.jpg",
                 "README.txt", "TRAIN/stray.jpg", "TRAIN/cat/deeper/e.jpg", ".hidden/cat/f.jpg", "TRAIN/.cache/g.jpg",
                 "TRAIN/cat/.DS_Store"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"not read: only listed")
    return root


def test_only_split_label_file_paths_become_rows_and_the_rest_is_one_warning(folder, caplog):
    with caplog.at_level(logging.WARNING, logger="tfrecorder"):
        rows = image_folder_source.list_image_directory(str(folder))
    assert sorted(map(tuple, rows.values.tolist())) == [
        ("TEST", str(folder / "TEST/cat/c.jpg"), "cat"), ("TRAIN", str(folder / "TRAIN/cat/a.jpg"), "cat"),
        ("TRAIN", str(folder / "TRAIN/dog/b.png"), "dog"), ("VALIDATION", str(folder / "VALIDATION/dog/d.jpg"), "dog")]
    assert list(rows.columns) == ["split", "image_uri", "label"]
    assert [r.getMessage() for r in caplog.records if r.name == "tfrecorder"] == [
        f"ignored 6 file(s) not laid out as SPLIT/LABEL/FILE under {folder}"]


def test_a_relative_root_gives_absolute_uris_and_a_given_listing_is_not_listed_again(folder, monkeypatch):
    monkeypatch.chdir(folder.parent)
    rows = image_folder_source.list_image_directory("images")
    assert set(rows["image_uri"]) >= {str(folder / "TRAIN/cat/a.jpg")}
    listed = ["gs://b/root/TRAIN/cat/1.jpg", "gs://b/root/TEST/dog/2.jpg"]  # nothing at gs://b: only the listing is used
    rows = image_folder_source.list_image_directory("gs://b/root/", listed)
    assert rows.values.tolist() == [["TRAIN", listed[0], "cat"], ["TEST", listed[1], "dog"]]


def test_a_folder_without_images_laid_out_is_a_value_error(tmp_path):
    (tmp_path / "flat.jpg").write_bytes(b"x")
    with pytest.raises(ValueError, match="holds no Parquet files and no images laid out as SPLIT/LABEL/image"):
        image_folder_source.list_image_directory(str(tmp_path))


def test_the_folder_opens_as_a_dataframe_table_of_absolute_uris(folder):
    table = image_folder_source.open_image_folder(str(folder))
    assert isinstance(table, DataFrameTable) and table.base_dir == "" and table.rows_estimate == 4
    assert table.columns == ["split", "image_uri", "label"] and sorted(table.frame["label"]) == ["cat", "cat", "dog", "dog"]


def test_a_gcs_image_folder_is_listed_once(gcs, monkeypatch):
    from tfrecorder.sources import source_registry
    from tfrecorder.io import storage

    for name in ("train/cat/a.jpg", "train/dog/b.jpg", "test/cat/c.jpg"):
        gcs.upload(f"gs://tfr-driver-reads/folder/{name}", b"not read by the driver")
    listings = []
    real = storage.list_files
    monkeypatch.setattr(storage, "list_files", lambda prefix: listings.append(prefix) or real(prefix))
    table = source_registry.open_table("gs://tfr-driver-reads/folder")
    assert listings == ["gs://tfr-driver-reads/folder"]
    assert sorted(table.frame["label"]) == ["cat", "cat", "dog"] and table.rows_estimate == 3
