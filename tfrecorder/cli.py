"""Command-line interface: `tfrecorder convert --source data.csv --output_dir out/`.

Exit codes: 0 success; 2 a fatal input error (bad arguments, unusable table), reported on one line;
1 an unexpected failure.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Optional, Sequence

EXIT_OK, EXIT_FAILURE, EXIT_INPUT_ERROR = 0, 1, 2

EXAMPLES = """examples:
  tfrecorder convert --source data.csv --output_dir out/
  tfrecorder convert --source images/ --output_dir out/ --job_label pets --compression gzip
  tfrecorder convert --source data.csv --output_dir out/ --num_shards 4 --image_size 224x224
  tfrecorder convert --source table.csv --output_dir out/ --schema schema.json
      schema.json: {"id": "IntegerInput", "price": "DoubleInput", "tags": "StringInput[]", "label": "StringLabel"}
"""


def _image_size(text: str) -> tuple[int, int]:
    try:
        height, width = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected HEIGHTxWIDTH, e.g. 224x224, got {text!r}") from None
    return height, width


def _ratios(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected three numbers like 0.8,0.1,0.1, got {text!r}") from None


def read_schema_file(path: str) -> dict[str, str]:
    """A JSON (or, with a .yaml/.yml name, YAML) mapping column → type name, e.g. {"price": "DoubleInput"}."""
    try:
        with open(path, encoding="utf-8") as stream:
            text = stream.read()
    except OSError as exc:
        raise ValueError(f"cannot read schema file {path}: {exc.strerror or exc}") from None
    if path.lower().endswith((".yaml", ".yml")):
        import yaml

        try:
            mapping = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"schema file {path} is not valid YAML: {exc}") from None
    else:
        try:
            mapping = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"schema file {path} is not valid JSON: {exc}") from None
    if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
        raise ValueError(f"schema file {path} must map column names to type names, e.g. {{\"price\": \"DoubleInput\"}}")
    return {str(k): v for k, v in mapping.items()}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfrecorder", description="Convert tables of training data into sharded TFRecords.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    convert = commands.add_parser(
        "convert", help="convert a CSV file or SPLIT/LABEL image folder to TFRecords",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    convert.add_argument("--source", required=True, help="CSV file (any columns; split, image_uri, label have roles) or SPLIT/LABEL image folder")
    convert.add_argument("--output_dir", required=True, help="directory that receives the job directory")
    convert.add_argument("--runner", default="DirectRunner", help="DirectRunner (default) or DataflowRunner")
    convert.add_argument("--num_shards", type=int, default=0, help="shards per split; 0 = sized by bytes")
    convert.add_argument("--max_shard_bytes", type=int, help="target shard size for automatic sharding")
    convert.add_argument("--compression", choices=["gzip"], help="compress shards (JPEG data does not shrink)")
    convert.add_argument("--job_label", help="prefix of the job directory name")
    convert.add_argument("--image_size", type=_image_size, help="resize images to HEIGHTxWIDTH (re-encodes)")
    convert.add_argument("--split_ratios", type=_ratios, help="train,validation,test ratios for UNASSIGNED rows")
    convert.add_argument("--validate", choices=["header", "decode"], help="image check: header (default) or full decode")
    convert.add_argument("--schema", type=str, help="JSON or YAML file mapping column → type name "
                         "(only these columns are converted); default: inferred from names and dtypes")
    convert.add_argument("--project", help="Google Cloud project (DataflowRunner)")
    convert.add_argument("--region", help="Google Cloud region (DataflowRunner)")
    return parser


def _run_convert(args: argparse.Namespace) -> int:
    import tfrecorder

    options = {
        name: getattr(args, name)
        for name in ("runner", "num_shards", "max_shard_bytes", "compression", "job_label", "image_size",
                     "split_ratios", "validate", "project", "region")
        if getattr(args, name) is not None
    }
    if args.schema is not None:
        options["schema"] = read_schema_file(args.schema)
    result = tfrecorder.convert(args.source, args.output_dir, **options)
    print(result)
    return EXIT_OK


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return {"convert": _run_convert}[args.command](args)
    except ValueError as exc:
        print(f"tfrecorder: error: {exc}", file=sys.stderr)
        return EXIT_INPUT_ERROR


if __name__ == "__main__":
    sys.exit(main())
