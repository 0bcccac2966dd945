"""CSV sample reading for schema inference (pandas' dtype inference, refined for datetimes and lists)."""
from __future__ import annotations

import io

from tfrecorder.schema import infer_schema
from tfrecorder.tables import read_csv_sample

CSV = (
    "i,gappy,flag,x,text,na_text,when,day,mixed_when,vec,words,not_json\n"
    '1,,True,1.5,"a, ""b""",NA,2020-01-01T00:00:00Z,2020-01-01,2020-01-01,"[1, NaN]","[""a""]",[1\n'
    "2,3,false,inf,,null,2021-06-01T12:30:00.123456789+02:00,,yesterday,[],[],[2]\n"
)


def test_csv_sample_dtypes_infer_like_a_dataframe():
    sample = read_csv_sample(io.BytesIO(CSV.encode()))
    assert infer_schema(sample).to_json() == {
        "i": "IntegerInput", "gappy": "IntegerInput", "flag": "IntegerInput", "x": "FloatInput", "text": "StringInput",
        "na_text": "StringInput", "when": "DatetimeInput", "day": "DatetimeInput", "mixed_when": "StringInput",
        "vec": "FloatInput[]", "words": "StringInput[]", "not_json": "StringInput",
    }
    assert sample["na_text"].tolist() == ["NA", "null"]  # only an empty field is missing
    assert sample["when"][1].value == 1622543400_123456789
