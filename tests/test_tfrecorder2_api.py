"""TFRecorder 2.0's documented calls, written as its README and sample notebooks wrote them, run unchanged."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pandas as pd
import pytest

import tfrecorder
from tfrecorder import input_schema
from tfrecorder import types
from support.tfrecorder2_writer import sample_image_table


@pytest.fixture(scope="module")
def data_csv(tmp_path_factory) -> pathlib.Path:
    """TFRecorder 2.0's tfrecorder/test_data/data.csv shape: split,image_uri,label with readable images only."""
    directory = tmp_path_factory.mktemp("test_data")
    table = sample_image_table(directory / "images")
    table = table[table.split.isin(["TRAIN", "VALIDATION", "TEST"]) & ~table.image_uri.str.contains("missing|rgba")]
    table.to_csv(directory / "data.csv", index=False)
    return directory / "data.csv"


def test_input_schema_module():
    schema = input_schema.Schema({
        'split': types.SplitKey,
        'x': types.FloatInput,
        'y': types.IntegerInput,
        'label': types.IntegerLabel,
    })
    assert schema.split_key == 'split' and schema.label_key == 'label' and schema.image_uri_key is None
    assert list(schema.get_input_keys()) == ['split', 'x', 'y', 'label']
    assert schema.input_schema_map['x'] is types.FloatInput
    image = input_schema.IMAGE_CSV_SCHEMA
    assert (image.split_key, image.image_uri_key, image.label_key) == ('split', 'image_uri', 'label')
    assert isinstance(image, tfrecorder.Schema)
    with pytest.raises(AttributeError, match="tf.Transform"):
        image.get_input_coder()
    hint: dict[str, types.SupportedType] = {'split': types.SplitKey}  # 2.0 annotated schema maps so
    assert input_schema.Schema(hint).split_key == 'split'


def test_basic_usage_notebook(data_csv, tmp_path):
    input_file = data_csv
    output_dir = str(tmp_path / 'out')
    df = pd.read_csv(input_file)
    results = df.tensorflow.to_tfr(output_dir)
    assert results['job_id'] == 'DirectRunner'
    assert results['metrics'] == {'rows': len(df), 'good_images': len(df), 'bad_images': 0}
    assert os.path.dirname(results['tfrecord_dir']) == os.path.abspath(output_dir)


def test_to_tfr_with_every_documented_keyword(data_csv, tmp_path):
    df = pd.read_csv(data_csv)
    results = df.tensorflow.to_tfr(
        output_dir=str(tmp_path),
        schema=input_schema.IMAGE_CSV_SCHEMA,
        runner='DirectRunner',
        project=None,
        region=None,
        tfrecorder_wheel=None,
        dataflow_options=None,
        job_label='to-tfr',
        compression='gzip',
        num_shards=2)
    files = sorted(os.listdir(results['tfrecord_dir']))
    assert 'train-00000-of-00002.tfrecord.gz' in files and 'train-00001-of-00002.tfrecord.gz' in files
    assert tfrecorder.verify(results['tfrecord_dir']).ok


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


def test_convert_and_load(data_csv, tmp_path):
    datasets = tfrecorder.convert_and_load(pd.read_csv(data_csv), str(tmp_path))
    assert set(datasets) == {'TRAIN', 'VALIDATION', 'TEST'}
    train = datasets['TRAIN']
    assert len(list(train)) == 7


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
