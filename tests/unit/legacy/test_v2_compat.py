"""tfrecorder.legacy.v2_compat: TFRecorder 2.0's documented calls, written as its README and sample notebooks wrote them,
run unchanged; then its helpers (keywords, positional to_tfr order, result keys, CLI note) one by one."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pandas as pd
import pytest

import tfrecorder
from tfrecorder import input_schema, types  # exactly as TFRecorder 2.0's code imports them
from tfrecorder.legacy.v2_compat import TO_TFR_ORDER, legacy_arguments, legacy_note, legacy_positional, legacy_result_value


def test_basic_usage_notebook(data_csv, tmp_path):
    input_file = data_csv
    output_dir = str(tmp_path / 'out')
    df = pd.read_csv(input_file)
    results = df.tensorflow.to_tfr(output_dir)
    assert results['job_id'] == 'DirectRunner'
    assert results['metrics'] == {'rows': len(df), 'good_images': len(df), 'bad_images': 0}
    assert os.path.dirname(results['tfrecord_dir']) == os.path.abspath(output_dir)


def test_to_tfr_positional_arguments_in_tfrecorder2_order(data_csv, tmp_path):
    df = pd.read_csv(data_csv)
    results = df.tensorflow.to_tfr(str(tmp_path), input_schema.IMAGE_CSV_SCHEMA, 'DirectRunner', None, None, None,
                                   None, 'positional', 'gzip', 1)
    assert os.path.basename(results['tfrecord_dir']).startswith('positional-')
    assert 'train-00000-of-00001.tfrecord.gz' in os.listdir(results['tfrecord_dir'])
    with pytest.raises(TypeError, match="multiple values for argument 'schema'"):
        df.tensorflow.to_tfr(str(tmp_path), input_schema.IMAGE_CSV_SCHEMA, schema=input_schema.IMAGE_CSV_SCHEMA)


def test_readme_schema_map_keyword(data_csv, tmp_path):
    image_csv_schema = input_schema.Schema({
        'split': types.SplitKey,
        'image_uri': types.ImageUri,
        'label': types.StringLabel
    })
    df = pd.read_csv(data_csv)
    results = df.tensorflow.to_tfr(output_dir=str(tmp_path), schema_map=image_csv_schema)
    assert results['metadata']['schema'] == {'split': 'SplitKey', 'image_uri': 'ImageUri', 'label': 'StringLabel'}
    with pytest.raises(TypeError, match="both schema= and schema_map="):
        df.tensorflow.to_tfr(str(tmp_path), schema=image_csv_schema, schema_map=image_csv_schema)
    with pytest.raises(TypeError, match="unexpected keyword argument 'shards'"):
        tfrecorder.convert(df, str(tmp_path), shards=3)


def test_convert_image_directory_notebook(data_csv, tmp_path):
    image_dir = tmp_path / 'images'
    for row in pd.read_csv(data_csv).itertuples():
        target = image_dir / row.split / row.label / pathlib.Path(row.image_uri).name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(pathlib.Path(row.image_uri).read_bytes())
    output_dir = pathlib.Path(tmp_path / 'tfrecords')
    results = tfrecorder.convert(str(image_dir), output_dir)
    datasets = tfrecorder.load(results['tfrecord_dir'])
    for x in datasets['TRAIN'].take(1):
        assert {'image', 'image_height', 'image_width', 'image_channels', 'label'} <= set(x.keys())


def test_convert_structured_data_notebook(tmp_path):
    df = pd.DataFrame({'Survived': [0, 1, 1], 'Pclass': [3, 1, 2], 'Name': ['a', 'b', 'c'], 'Sex': ['m', 'f', 'f'],
                       'Age': [22.0, 38.0, 26.0], 'Fare': [7.25, 71.28, 7.92]})
    df['split'] = 'TRAIN'
    results = tfrecorder.convert(
        df,
        str(tmp_path / 'tfrecords'),
        schema=input_schema.Schema({
            'Survived': types.IntegerInput,
            'Pclass': types.IntegerInput,
            'Name': types.StringInput,
            'Sex': types.StringInput,
            'Age': types.FloatInput,
            'Fare': types.FloatInput,
            'split': types.SplitKey,
        })
    )
    assert results['metrics'] == {'rows': 3, 'good_images': None, 'bad_images': None}
    datasets = tfrecorder.load(results['tfrecord_dir'])
    for x in datasets['TRAIN'].take(1):
        assert {k: v.dtype.name for k, v in x.items()} == {
            'Survived': 'int64', 'Pclass': 'int64', 'Name': 'string', 'Sex': 'string', 'Age': 'float32', 'Fare': 'float32'}


def test_convert_csv_with_header_and_names(data_csv, tmp_path):
    headerless = tmp_path / 'headerless.csv'
    headerless.write_text(''.join(data_csv.read_text().splitlines(keepends=True)[1:]))
    rows = len(pd.read_csv(data_csv))
    results = tfrecorder.convert(source=str(headerless), output_dir=str(tmp_path / 'a'), header=None)
    assert results['rows_in'] == rows and results['metadata']['schema']['image_uri'] == 'ImageUri'
    results = tfrecorder.convert(str(data_csv), str(tmp_path / 'b'), header=0, names=['split', 'image_uri', 'label'])
    assert results['rows_in'] == rows
    df = pd.read_csv(data_csv).assign(extra=1)
    results = tfrecorder.convert(df, str(tmp_path / 'c'), names=['split', 'image_uri', 'label'])
    assert 'extra' not in results['metadata']['schema']


def test_load_and_inspect(data_csv, tmp_path):
    results = tfrecorder.convert(str(data_csv), str(tmp_path / 'out'))
    dataset_dict = tfrecorder.load(results['tfrecord_dir'])
    train = dataset_dict['TRAIN']
    assert next(iter(train))['image'].dtype.name == 'uint8'
    out = tfrecorder.inspect(
        tfrecord_dir=results['tfrecord_dir'],
        split='TRAIN',
        num_records=5,
        output_dir=str(tmp_path / 'output'))
    assert len([f for f in os.listdir(out) if f.endswith(('.jpg', '.png')) and f[0].isdigit()]) == 5


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "tfrecorder", *args], capture_output=True, text=True,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=300)


def test_command_line(data_csv, tmp_path):
    done = _cli('create-tfrecords', f'--input_data={data_csv}', f'--output_dir={tmp_path / "bucket"}')
    assert done.returncode == 0, done.stderr
    assert "create-tfrecords is TFRecorder 2.0's name for `tfrecorder convert`" in done.stderr
    assert "--compression gzip" in done.stderr and "written: TRAIN=7" in done.stdout
    (job,) = os.listdir(tmp_path / 'bucket')
    done = _cli('inspect', f'--tfrecord-dir={tmp_path / "bucket" / job}', '--split=TRAIN',
                '--num_records=5', f'--output_dir={tmp_path / "output"}')
    assert done.returncode == 0, done.stderr
    assert os.path.exists(tmp_path / 'output' / 'records.csv')


def test_legacy_arguments_select_columns_read_a_headerless_csv_and_refuse_the_rest(data_csv, tmp_path):
    frame = pd.read_csv(data_csv).assign(extra=1)
    selected, schema = legacy_arguments(frame, None, {"names": ["label", "split"]})
    assert list(selected.columns) == ["label", "split"] and schema is None
    assert legacy_arguments(str(data_csv), "given", {}) == (str(data_csv), "given")  # nothing to do: a path stays
    headerless = tmp_path / "headerless.csv"
    headerless.write_text("TRAIN,a.jpg,cat\nTEST,b.jpg,dog\n")
    read, _ = legacy_arguments(str(headerless), None, {"header": None})
    assert list(read.columns) == ["split", "image_uri", "label"] and read["label"].tolist() == ["cat", "dog"]
    assert legacy_arguments(frame, None, {"schema_map": {"split": "SplitKey"}})[1] == {"split": "SplitKey"}
    with pytest.raises(TypeError, match="both schema= and schema_map="):
        legacy_arguments(frame, {"split": "SplitKey"}, {"schema_map": {"split": "SplitKey"}})
    with pytest.raises(TypeError, match="unexpected keyword argument 'shards'"):
        legacy_arguments(frame, None, {"shards": 3})
    with pytest.raises(ValueError, match="not an image directory"):
        legacy_arguments(str(tmp_path), None, {"header": None})


def test_legacy_positional_names_arguments_in_to_tfr_order():
    assert legacy_positional(("s", "DirectRunner"), {"num_shards": 2}) == {
        "schema": "s", "runner": "DirectRunner", "num_shards": 2}
    assert legacy_positional((), {"job_label": "x"}) == {"job_label": "x"}
    with pytest.raises(TypeError, match="multiple values for argument 'runner'"):
        legacy_positional(("s", "DirectRunner"), {"runner": "DataflowRunner"})
    with pytest.raises(TypeError, match=f"at most {len(TO_TFR_ORDER) + 1} positional"):
        legacy_positional(tuple(range(len(TO_TFR_ORDER) + 1)), {})


def test_legacy_result_values_metrics_and_dataflow_url():
    done = {"rows_in": 5, "written": {"TRAIN": 3, "TEST": 1}, "discarded": 1,
            "metadata": {"schema": {"image_uri": "ImageUri", "split": "SplitKey"}}}
    assert legacy_result_value(done, "metrics") == {"rows": 5, "good_images": 4, "bad_images": 1}
    tabular = {**done, "metadata": {"schema": {"x": "FloatInput"}}}
    assert legacy_result_value(tabular, "metrics") == {"rows": 5, "good_images": None, "bad_images": None}
    assert legacy_result_value({"console_url": "https://console"}, "dataflow_url") == "https://console"
    with pytest.raises(KeyError, match="call result.wait"):
        legacy_result_value({"rows_in": 5}, "metrics")
    with pytest.raises(KeyError):
        legacy_result_value(done, "dataflow_url")  # a local job has no console


def test_legacy_note_only_for_create_tfrecords():
    assert "tfrecorder convert" in legacy_note("create-tfrecords") and legacy_note("convert") is None
