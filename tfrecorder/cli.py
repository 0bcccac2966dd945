"""Command-line interface: `tfrecorder convert --source data.csv --output_dir out/`.

Exit codes: 0 success; 2 a fatal input error (bad arguments, unusable table), reported on one line;
1 an unexpected failure.
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Optional, Sequence

from tfrecorder.result import DataflowJobError

EXIT_OK, EXIT_FAILURE, EXIT_INPUT_ERROR = 0, 1, 2

EXAMPLES = """examples:
  tfrecorder convert --source data.csv --output_dir out/
  tfrecorder convert --source images/ --output_dir out/ --job_label pets --compression gzip
  tfrecorder convert --source data.csv --output_dir out/ --num_shards 4 --image_size 224x224
  tfrecorder convert --source gs://b/data.csv --output_dir gs://b/out --runner DataflowRunner \
      --project my-project --region us-central1 --dataflow_option max_num_workers=20 --no_wait
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
    convert.add_argument("--source", required=True, help="CSV file (split,image_uri,label,...) or image folder")
    convert.add_argument("--output_dir", required=True, help="directory that receives the job directory")
    convert.add_argument("--runner", default="DirectRunner", help="DirectRunner (default) or DataflowRunner")
    convert.add_argument("--num_shards", type=int, default=0, help="shards per split; 0 = sized by bytes")
    convert.add_argument("--max_shard_bytes", type=int, help="target shard size for automatic sharding")
    convert.add_argument("--compression", choices=["gzip"], help="compress shards (JPEG data does not shrink)")
    convert.add_argument("--job_label", help="prefix of the job directory name")
    convert.add_argument("--image_size", type=_image_size, help="resize images to HEIGHTxWIDTH (re-encodes)")
    convert.add_argument("--split_ratios", type=_ratios, help="train,validation,test ratios for UNASSIGNED rows")
    convert.add_argument("--validate", choices=["header", "decode"], help="image check: header (default) or full decode")
    convert.add_argument("--project", help="Google Cloud project (DataflowRunner)")
    convert.add_argument("--region", help="Google Cloud region (DataflowRunner)")
    convert.add_argument("--dataflow_option", action="append", default=[], metavar="KEY=VALUE",
                         help="any Beam/Dataflow pipeline option, repeatable (e.g. machine_type=n2-standard-8; "
                              "a bare KEY sets a flag such as no_auth)")
    convert.add_argument("--tfrecorder_wheel", help="stage this wheel for Dataflow workers instead of building one")
    convert.add_argument("--no_wait", action="store_true",
                         help="DataflowRunner: print the job id and console URL and return without waiting")
    return parser


def _run_convert(args: argparse.Namespace) -> int:
    import tfrecorder

    options = {
        name: getattr(args, name)
        for name in ("runner", "num_shards", "max_shard_bytes", "compression", "job_label", "image_size",
                     "split_ratios", "validate", "project", "region", "tfrecorder_wheel")
        if getattr(args, name) is not None
    }
    if args.dataflow_option:
        from tfrecorder.dataflow import parse_option_flags

        options["dataflow_options"] = parse_option_flags(args.dataflow_option)
    result = tfrecorder.convert(args.source, args.output_dir, **options)
    if hasattr(result, "wait") and not args.no_wait and result["job_id"] is not None:
        print(result, flush=True)
        result.wait()
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
    except DataflowJobError as exc:
        print(f"tfrecorder: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
