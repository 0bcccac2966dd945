"""Command-line interface: convert, append, versions, verify, inspect, load-stats, report, upgrade, status and clean.

    tfrecorder convert --source data.csv --output_dir out/
    tfrecorder verify out/tfrecorder-20261121-193000
    tfrecorder inspect out/tfrecorder-20261121-193000 --split TRAIN --num_records 5
    tfrecorder load-stats out/tfrecorder-20261121-193000
    tfrecorder report out/tfrecorder-20261121-193000 --html report.html
    tfrecorder upgrade old/tfrecorder-20201010-101010-convert out/
    tfrecorder append out/tfrecorder-20261121-193000 --source new_rows.csv
    tfrecorder versions out/
    tfrecorder status out/                     # incomplete jobs: progress, age, resumable
    tfrecorder clean out/ --older-than 7d      # remove abandoned incomplete jobs

`create-tfrecords --input_data` is TFRecorder 2.0's spelling of `convert --source`.

Exit codes follow the hierarchy of tfrecorder.errors: 0 success (for verify: every check passed);
1 an unexpected failure, a storage outage (StorageReadError), TensorFlow that does not load when images
must be decoded (TensorFlowUnavailable) or a failed Dataflow job; 2 bad input
(a ValueError: bad arguments, unusable table, not a finished job directory); 3 corrupt data: verify
found a mismatch (missing, extra, truncated or corrupt shard, unparsable record, wrong record count)
or inspect / load-stats met a damaged record, or a job directory names a file outside itself
(CorruptDataError); 4 the output could not be written (disk full, quota, file size limit); 130 interrupted
(Ctrl-C: nothing is published; a local job keeps its committed work, which the same command continues).
Every error is reported on one line.
"""
from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from typing import Optional, Sequence

from tfrecorder.errors import CorruptDataError, DataflowJobError, InfrastructureError, OutputWriteError

EXIT_OK, EXIT_FAILURE, EXIT_INPUT_ERROR, EXIT_CORRUPT_DATA, EXIT_OUTPUT_ERROR = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 128 + 2  # killed by SIGINT, as shells report it
EXIT_VERIFY_FAILED = EXIT_CORRUPT_DATA  # verify's "mismatch" is corrupt data found on purpose

RUNNER_HELP = ("DirectRunner (default), DataflowRunner, or PortableRunner, FlinkRunner, SparkRunner with their "
               "--beam_option settings (docs/runners.md)")
SHARED_FILESYSTEM_HELP = ("PortableRunner/FlinkRunner/SparkRunner: every worker sees this machine's files at the same "
                          "paths, so local source, images and output are allowed")

EXAMPLES = """examples:
  tfrecorder convert --source data.csv --output_dir out/
  tfrecorder convert --source images/ --output_dir out/ --job_label pets --compression gzip
  tfrecorder convert --source data.csv --output_dir out/ --num_shards 4 --image_size 224x224
  tfrecorder convert --source 'gs://b/export/part-*.parquet' --output_dir out/
  tfrecorder convert --source table.csv --output_dir out/ --schema schema.json
      schema.json: {"id": "IntegerInput", "price": "DoubleInput", "tags": "StringInput[]", "label": "StringLabel"}
  tfrecorder convert --source gs://b/data.csv --output_dir gs://b/out --runner DataflowRunner \
      --project my-project --region us-central1 --dataflow_option max_num_workers=20 --no_wait
  tfrecorder convert --source gs://b/data.csv --output_dir gs://b/out --runner FlinkRunner \
      --beam_option flink_master=flink-host:8081 --beam_option environment_type=EXTERNAL \
      --beam_option environment_config=localhost:50000
  tfrecorder verify out/pets-20261121-193000          # exit 3 on any mismatch
  tfrecorder inspect out/pets-20261121-193000 --split validation --num_records 10
  tfrecorder load-stats out/pets-20261121-193000 --image_size 224x224
  tfrecorder upgrade old/tfrecorder-20201010-101010-convert out/   # a TFRecorder 2.0 dataset → job directory
  tfrecorder append out/pets-20261121-193000 --source new.csv    # → out/pets-<timestamp>-v2 (base + new rows)
  tfrecorder versions out/                                       # jobs with their version and parent
  tfrecorder status out/                   # incomplete jobs (a killed convert continues with the same call)
  tfrecorder clean out/ --older-than 7d    # remove abandoned incomplete jobs

exit codes: 0 ok; 1 unexpected failure; 2 bad input (one line on stderr); 3 verify found a mismatch
  or a record is corrupt; 4 the output could not be written (disk full, quota, file size limit);
  130 interrupted (Ctrl-C; nothing is published)
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
    from tfrecorder.io.storage import user_path

    path = user_path(path, "schema file")
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
        "convert", help="convert a CSV file, Parquet files or a SPLIT/LABEL image folder to TFRecords",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
        aliases=["create-tfrecords"],  # TFRecorder 2.0's documented name (with --input_data)
    )
    convert.add_argument("--source", "--input_data", dest="source", required=True,
                         help="CSV file (any columns; split, image_uri, label have roles), Parquet file, directory "
                         "or quoted glob ('export/*.parquet'), SPLIT/LABEL image folder, "
                         "headerless AutoML Vision CSV or Vertex AI JSONL import file")
    convert.add_argument("--output_dir", required=True, help="directory that receives the job directory")
    convert.add_argument("--runner", default="DirectRunner", help=RUNNER_HELP)
    convert.add_argument("--num_shards", type=int, default=0, help="shards per split; 0 = sized by bytes")
    convert.add_argument("--max_shard_bytes", type=int, help="target shard size for automatic sharding")
    convert.add_argument("--compression", choices=["gzip"], help="compress shards (JPEG data does not shrink)")
    convert.add_argument("--job_label", help="prefix of the job directory name")
    convert.add_argument("--image_size", type=_image_size, help="resize images to HEIGHTxWIDTH (re-encodes)")
    convert.add_argument("--split_ratios", type=_ratios, help="train,validation,test ratios for UNASSIGNED rows")
    convert.add_argument("--validate", choices=["decode", "header"],
                         help="decode (default): every written image decodes with TensorFlow; header: cheap checks only")
    convert.add_argument("--max_image_pixels", "--max-image-pixels", dest="max_image_pixels", type=int,
                         help="discard images declaring more pixels, before decoding (default 89478485)")
    convert.add_argument("--max_image_bytes", "--max-image-bytes", dest="max_image_bytes", type=int,
                         help="discard image files larger than this, unread (default 536870912: 512 MiB)")
    convert.add_argument("--fetch_concurrency", type=int,
                         help="images read at once per worker (default 16 for gs:// images, 1 for local files)")
    convert.add_argument("--schema", type=str, help="JSON or YAML file mapping column → type name "
                         "(only these columns are converted); default: inferred from names and dtypes")
    convert.add_argument("--duplicates", choices=["report", "drop", "fail"],
                         help="report (default): duplicates.csv and counts; drop: keep one row per duplicate group "
                              "(the others in discarded.csv); fail: a train/test leak fails the job")
    convert.add_argument("--near_duplicate_distance", type=int,
                         help="group near-duplicate images whose perceptual hashes differ in at most this many bits "
                              "(1-7; 7 recommended; default 0: no search)")
    convert.add_argument("--no_statistics", dest="statistics", action="store_false", default=None,
                         help="skip statistics.json/.pb and duplicates.csv")
    convert.add_argument("--annotation_format",
                         help="read --source as automl_classification, automl_multilabel, automl_detection or "
                              "vertex_jsonl (default: recognised from its content)")
    convert.add_argument("--encoding", help="text encoding of a CSV source (default utf-8; e.g. latin-1, utf-16); "
                         "rows holding bytes invalid in it are discarded as invalid text")
    convert.add_argument("--image_root", "--image-root", dest="image_root",
                         help="where a COCO file's image names resolve (default: the images folder beside "
                              "annotations/, else the JSON file's folder)")
    convert.add_argument("--split", help="the split of every image of a COCO file: train, validation, test or "
                         "unassigned (default: from each file's name, e.g. instances_val2017.json)")
    convert.add_argument("--box_units", choices=["relative", "pixels"],
                         help="box coordinates of a detection table: relative 0-1 (default) or pixels")
    convert.add_argument("--project", help="Google Cloud project (DataflowRunner)")
    convert.add_argument("--region", help="Google Cloud region (DataflowRunner)")
    convert.add_argument("--verbose", action="store_true", help="show Beam's and TensorFlow's own logs")
    convert.add_argument("--no_progress", dest="progress", action="store_false", default=None,
                         help="no progress bar (it only shows on a terminal anyway)")
    convert.add_argument("--beam_option", "--dataflow_option", dest="dataflow_option", action="append", default=[],
                         metavar="KEY=VALUE",
                         help="any Beam pipeline option, repeatable (e.g. machine_type=n2-standard-8, "
                              "job_endpoint=localhost:8099; a bare KEY sets a flag such as no_auth)")
    convert.add_argument("--shared_filesystem", action="store_true", default=None, help=SHARED_FILESYSTEM_HELP)
    convert.add_argument("--tfrecorder_wheel", help="stage this wheel for Dataflow workers instead of building one")
    convert.add_argument("--no_wait", action="store_true",
                         help="DataflowRunner: print the job id and console URL and return without waiting")
    convert.add_argument("--resume", action=argparse.BooleanOptionalAction, default=None,
                         help="--resume: continue the matching incomplete job or fail; --no-resume: always start a "
                              "new job (default: continue a matching one if there is one)")
    status = commands.add_parser("status", help="list the incomplete jobs under an output directory")
    status.add_argument("output_dir", help="an output directory (local or gs://)")
    status.add_argument("--json", action="store_true", help="one JSON object per job")
    clean = commands.add_parser("clean", help="remove incomplete jobs no run is working on")
    clean.add_argument("output_dir", help="an output directory (local or gs://)")
    clean.add_argument("--older-than", "--older_than", dest="older_than",
                       help="only jobs older than this (30m, 12h, 7d, 2w)")
    verify = commands.add_parser(
        "verify", help="check every shard, record CRC, parse and count against metadata.json (exit 3 on mismatch)")
    verify.add_argument("tfrecord_dir", help="a finished job directory (local or gs://)")
    inspect = commands.add_parser("inspect", help="write a few records as CSV, image files and a contact sheet")
    inspect.add_argument("tfrecord_dir", nargs="?", help="a finished job directory (local or gs://)")
    inspect.add_argument("--tfrecord_dir", "--tfrecord-dir", dest="tfrecord_dir_option", help=argparse.SUPPRESS)
    inspect.add_argument("--split", default="TRAIN", help="split to look at (default TRAIN)")
    inspect.add_argument("--num_records", type=int, default=5, help="records to write (default 5)")
    inspect.add_argument("--output_dir", help="where to write (default ./tfrecorder-inspect/<job>-<split>/)")
    stats = commands.add_parser("load-stats", help="records per split, and images/s of iterating load()")
    stats.add_argument("tfrecord_dir", help="a finished job directory (local or gs://)")
    stats.add_argument("--split", default="TRAIN", help="split whose throughput is measured (default TRAIN)")
    stats.add_argument("--seconds", type=float, default=5.0, help="how long to measure (default 5)")
    stats.add_argument("--batch_size", type=int, default=64, help="batch size (default 64)")
    stats.add_argument("--image_size", type=_image_size, help="resize to HEIGHTxWIDTH while loading")
    stats.add_argument("--channels", type=int, choices=[1, 3, 4],
                       help="decode to this many channels (needed to batch images of mixed channel counts)")
    report = commands.add_parser("report", help="statistics, duplicates and train/test leaks of a job, as HTML")
    report.add_argument("tfrecord_dir", help="a finished job directory (local or gs://)")
    report.add_argument("--html", required=True, help="where to write the self-contained HTML page")
    _add_upgrade_parser(commands)
    _add_append_parsers(commands)
    return parser


def _add_append_parsers(commands) -> None:
    append = commands.add_parser(
        "append", help="append new rows to a finished job as a new version (its shards carried, not re-encoded)")
    append.add_argument("base_job_dir", help="the finished job (or version) the new rows are appended to")
    append.add_argument("--source", required=True, help="the new rows: any source convert takes, with the base's columns")
    append.add_argument("--output_dir", help="directory that receives the version (default: the base's directory)")
    append.add_argument("--duplicates", choices=["discard", "report", "drop", "fail", "keep"],
                        help="new rows whose image is already in the base are discarded unless 'keep'; duplicates "
                             "within the new rows are reported (discard, the default, and report), all but one "
                             "of each group dropped (drop) or fail the version on a train/test leak (fail)")
    append.add_argument("--runner", default="DirectRunner", help=RUNNER_HELP)
    append.add_argument("--num_shards", type=int, help="shards per split for the new rows; 0 = sized by bytes")
    append.add_argument("--max_shard_bytes", type=int, help="target shard size for automatic sharding")
    append.add_argument("--job_label", help="prefix of the version's directory name (default: the base's)")
    append.add_argument("--split_ratios", type=_ratios, help="train,validation,test ratios for UNASSIGNED rows")
    append.add_argument("--fetch_concurrency", type=int, help="images read at once per worker")
    append.add_argument("--max_image_pixels", type=int, help="discard images declaring more pixels, before decoding")
    append.add_argument("--max_image_bytes", type=int, help="discard image files larger than this, unread")
    append.add_argument("--encoding", help="text encoding of a CSV source (default utf-8)")
    append.add_argument("--project", help="Google Cloud project (DataflowRunner)")
    append.add_argument("--region", help="Google Cloud region (DataflowRunner)")
    append.add_argument("--verbose", action="store_true", help="show Beam's and TensorFlow's own logs")
    append.add_argument("--no_progress", dest="progress", action="store_false", default=None, help="no progress bar")
    append.add_argument("--beam_option", "--dataflow_option", dest="dataflow_option", action="append", default=[],
                        metavar="KEY=VALUE", help="any Beam pipeline option, repeatable")
    append.add_argument("--shared_filesystem", action="store_true", default=None, help=SHARED_FILESYSTEM_HELP)
    append.add_argument("--tfrecorder_wheel", help="stage this wheel for Dataflow workers instead of building one")
    append.add_argument("--no_wait", action="store_true", help="DataflowRunner: return once the job is submitted")
    versions = commands.add_parser("versions", help="list the finished jobs of a directory with their version and parent")
    versions.add_argument("output_dir", help="a directory holding job directories (local or gs://)")


def _run_append(args: argparse.Namespace) -> int:
    import tfrecorder

    options = {name: getattr(args, name)
               for name in ("output_dir", "duplicates", "runner", "num_shards", "max_shard_bytes", "job_label",
                            "split_ratios", "fetch_concurrency", "max_image_pixels", "max_image_bytes", "encoding",
                            "project", "region", "verbose", "progress", "tfrecorder_wheel", "shared_filesystem")
               if getattr(args, name) is not None}
    if args.dataflow_option:
        from beam_pipelines.launches.dataflow_job import parse_option_flags

        options["beam_options"] = parse_option_flags(args.dataflow_option)
    return _finish(tfrecorder.append(args.base_job_dir, args.source, **options), args.no_wait)


def _run_versions(args: argparse.Namespace) -> int:
    import tfrecorder
    from tfrecorder.append import versions_text

    print(versions_text(tfrecorder.versions(args.output_dir)))
    return EXIT_OK


def _add_upgrade_parser(commands) -> None:
    upgrade = commands.add_parser(
        "upgrade", help="rewrite a TFRecorder 2.0 output directory as a job directory (images as lossless PNG)")
    upgrade.add_argument("legacy_dir", help="a directory TFRecorder 2.0 wrote (train-00000-of-00001.tfrecord.gz, …)")
    upgrade.add_argument("output_dir", help="directory that receives the new job directory")
    upgrade.add_argument("--runner", default="DirectRunner", help=RUNNER_HELP)
    upgrade.add_argument("--num_shards", type=int, default=0, help="shards per split; 0 = sized by bytes")
    upgrade.add_argument("--max_shard_bytes", type=int, help="target shard size for automatic sharding")
    upgrade.add_argument("--compression", choices=["gzip"], help="compress shards (PNG data does not shrink)")
    upgrade.add_argument("--job_label", help="prefix of the job directory name (default: upgraded)")
    upgrade.add_argument("--project", help="Google Cloud project (DataflowRunner)")
    upgrade.add_argument("--region", help="Google Cloud region (DataflowRunner)")
    upgrade.add_argument("--verbose", action="store_true", help="show Beam's and TensorFlow's own logs")
    upgrade.add_argument("--beam_option", "--dataflow_option", dest="dataflow_option", action="append", default=[],
                         metavar="KEY=VALUE", help="any Beam pipeline option, repeatable")
    upgrade.add_argument("--shared_filesystem", action="store_true", default=None, help=SHARED_FILESYSTEM_HELP)
    upgrade.add_argument("--tfrecorder_wheel", help="stage this wheel for Dataflow workers instead of building one")
    upgrade.add_argument("--no_wait", action="store_true", help="DataflowRunner: return once the job is submitted")


def _run_verify(args: argparse.Namespace) -> int:
    import tfrecorder

    report = tfrecorder.verify(args.tfrecord_dir)
    print(report)
    return EXIT_OK if report.ok else EXIT_VERIFY_FAILED


def _run_inspect(args: argparse.Namespace) -> int:
    import tfrecorder

    tfrecord_dir = args.tfrecord_dir or args.tfrecord_dir_option  # TFRecorder 2.0 spelled it --tfrecord-dir
    if not tfrecord_dir:
        raise ValueError("inspect needs the job directory: tfrecorder inspect TFRECORD_DIR")
    print(tfrecorder.inspect(tfrecord_dir, split=args.split, num_records=args.num_records,
                             output_dir=args.output_dir))
    return EXIT_OK


def _run_report(args: argparse.Namespace) -> int:
    import tfrecorder
    from tfrecorder.rows.duplicate_groups import leak_warning

    found = tfrecorder.report(args.tfrecord_dir)
    found.save(args.html)
    counts = found.duplicates
    near = (counts or {}).get("near") or {}
    summary = "duplicates: not computed for this job" if counts is None else (
        f"duplicates: {counts.get('groups', 0)} groups ({counts.get('rows', 0)} rows), "
        f"near-duplicates: {near.get('groups', 0)} groups ({near.get('rows', 0)} rows)")
    print(f"report written to {args.html} ({summary})")
    if counts and leak_warning(counts):
        print(f"WARNING {leak_warning(counts)}")
    return EXIT_OK


def _batch_length(batch) -> int:
    return int(next(iter(batch.values())).shape[0])


def _run_load_stats(args: argparse.Namespace) -> int:
    import time

    import tfrecorder
    from tfrecorder.format.finished_job import JobInfo

    job = JobInfo.read(args.tfrecord_dir)
    datasets = tfrecorder.load(args.tfrecord_dir, batch_size=args.batch_size, decode_images=False)
    for split, dataset in datasets.items():
        counted = _count_records(dataset, split)
        expected = job.metadata["splits"][split]["records"]  # None: TFRecorder 2.0 recorded no counts
        print(f"{split}: {counted} records loaded (metadata.json: {'no count' if expected is None else expected})")
    dataset = tfrecorder.load(args.tfrecord_dir, args.split, batch_size=args.batch_size, repeat=True,
                              image_size=args.image_size, channels=args.channels)
    iterator = iter(dataset)
    next(iterator)  # warm-up: tracing and the first fill of the pipeline
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        count += _batch_length(next(iterator))
    elapsed = time.perf_counter() - start
    print(f"load({args.split.upper()}, batch_size={args.batch_size}, image_size={args.image_size}): "
          f"{count / elapsed:,.0f} records/s ({count} records in {elapsed:.1f} s, images decoded)")
    return EXIT_OK


def _count_records(dataset, split: str) -> int:
    """Records of one split's batched dataset; a damaged record is CorruptDataError, as in inspect and verify."""
    import tensorflow as tf

    try:
        return sum(_batch_length(batch) for batch in dataset)
    except tf.errors.DataLossError as exc:
        detail = re.sub(r"^\{\{[^}]*\}\}\s*|\s*\[Op:.*$", "", exc.message)  # TensorFlow's op decorations
        raise CorruptDataError(f"{split}: {detail}") from None


def _run_convert(args: argparse.Namespace) -> int:
    import tfrecorder
    from tfrecorder.legacy.v2_compat import legacy_note

    note = legacy_note(args.command)
    if note:
        print(note, file=sys.stderr)
    options = {
        name: getattr(args, name)
        for name in ("runner", "num_shards", "max_shard_bytes", "compression", "job_label", "image_size",
                     "split_ratios", "validate", "fetch_concurrency", "max_image_pixels", "max_image_bytes",
                     "project", "region", "verbose", "progress",
                     "tfrecorder_wheel", "annotation_format", "box_units", "encoding", "shared_filesystem", "resume",
                     "image_root", "split", "duplicates", "near_duplicate_distance", "statistics")
        if getattr(args, name) is not None
    }
    if args.schema is not None:
        options["schema"] = read_schema_file(args.schema)
    if args.dataflow_option:
        from beam_pipelines.launches.dataflow_job import parse_option_flags

        options["beam_options"] = parse_option_flags(args.dataflow_option)
    return _finish(tfrecorder.convert(args.source, args.output_dir, **options), args.no_wait)


def _finish(result, no_wait: bool) -> int:
    """Print a conversion's result; a submitted Dataflow job is waited for unless no_wait."""
    if hasattr(result, "wait") and not no_wait and result["job_id"] is not None:
        print(result, flush=True)
        result.wait()
    print(result)
    return EXIT_OK


def _run_status(args: argparse.Namespace) -> int:
    from tfrecorder.job_status import incomplete_jobs, status_lines

    jobs = incomplete_jobs(args.output_dir)
    if args.json:
        for job in jobs:
            print(json.dumps(job.as_dict()))
    else:
        print("\n".join(status_lines(jobs)))
    return EXIT_OK


def _run_clean(args: argparse.Namespace) -> int:
    from tfrecorder.job_status import clean_incomplete

    removed = clean_incomplete(args.output_dir, args.older_than)
    for job in removed:
        print(f"removed {job.path}")
    print(f"{len(removed)} incomplete job(s) removed")
    return EXIT_OK


def _run_upgrade(args: argparse.Namespace) -> int:
    import tfrecorder

    options = {name: getattr(args, name) for name in ("runner", "num_shards", "max_shard_bytes", "compression",
                                                      "job_label", "project", "region", "verbose", "tfrecorder_wheel",
                                                      "shared_filesystem")
               if getattr(args, name) is not None}
    if args.dataflow_option:
        from beam_pipelines.launches.dataflow_job import parse_option_flags

        options["beam_options"] = parse_option_flags(args.dataflow_option)
    return _finish(tfrecorder.upgrade(args.legacy_dir, args.output_dir, **options), args.no_wait)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        commands = {"convert": _run_convert, "create-tfrecords": _run_convert, "verify": _run_verify,
                    "inspect": _run_inspect, "load-stats": _run_load_stats, "upgrade": _run_upgrade,
                    "append": _run_append, "versions": _run_versions, "status": _run_status,
                    "clean": _run_clean, "report": _run_report}
        return commands[args.command](args)
    except CorruptDataError as exc:  # not a ValueError: damaged data is not bad input (exit 3, not 2)
        print(f"tfrecorder: error: corrupt data: {exc}", file=sys.stderr)
        return EXIT_CORRUPT_DATA
    except ValueError as exc:
        print(f"tfrecorder: error: {exc}", file=sys.stderr)
        return EXIT_INPUT_ERROR
    except OutputWriteError as exc:
        print(f"tfrecorder: error: {exc.strerror}", file=sys.stderr)
        return EXIT_OUTPUT_ERROR
    except InfrastructureError as exc:  # a storage outage after retries, TensorFlow that does not load
        print(f"tfrecorder: error: {exc.strerror}", file=sys.stderr)
        return EXIT_FAILURE
    except DataflowJobError as exc:
        print(f"tfrecorder: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt as exc:  # convert and upgrade remove their unfinished output, or keep it resumable
        kept = getattr(exc, "kept_job", None)
        print("tfrecorder: interrupted; nothing was published"
              + (f"; its committed work is kept in {kept}: the same command continues it" if kept else ""),
              file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
