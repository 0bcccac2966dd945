"""`tfrecorder.append()`: new rows become a new, immutable version of a finished job (issue 28).

The version is a new job directory (next to the base by default, `<label>-<timestamp>-v<N>`) holding
every record of the base, whose shards are carried over without being read (hard links locally,
server-side copies on gs://: beam_pipelines.steps.carry_shards), and the records of the new rows,
converted as a fresh conversion would with the base's schema, validate mode, image size and
compression. Label ids never change: the vocabulary is the base's with the new TRAIN labels appended
(tfrecorder.format.lineage). The base is never modified; its metadata.json digest is recorded in the
version's lineage, which `verify()` checks, and `versions()` lists.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Sequence, Union

import pandas as pd

from tfrecorder.convert import convert
from tfrecorder.core.caller_heap import objects_frozen_during
from tfrecorder.core.quiet import leaves_logging_alone
from tfrecorder.format.file_names import METADATA_FILE, JobName
from tfrecorder.format.lineage import LINEAGE_KEY, BaseJob, version_of
from tfrecorder.format.metadata_file import JobMetadata
from tfrecorder.io import storage
from tfrecorder.result import ConversionResult

_INHERITED = ("schema", "compression", "validate", "image_size")  # fixed by the base: a different value is refused


def _parent_dir(tfrecord_dir: str) -> str:
    directory = tfrecord_dir.rstrip("/")
    if storage.is_remote(directory):
        return directory.rsplit("/", 1)[0]
    return os.path.dirname(os.path.abspath(directory))


def _check_inherited(base: BaseJob, options: dict) -> None:
    """Options the base fixes may be repeated with its value only."""
    fixed = {"compression": base.compression, "validate": base.validate,
             "image_size": None if base.image_size is None else tuple(base.image_size)}
    for name, value in fixed.items():
        if name in options and options[name] is not None:
            given = tuple(options[name]) if name == "image_size" else options[name]
            if given != value:
                raise ValueError(f"{name}={options[name]!r} differs from the base job {base.job_name}'s "
                                 f"{name}={value!r}; a version inherits it")
        options.pop(name, None)
    if options.pop("schema", None) is not None:
        raise ValueError(f"schema is inherited from the base job {base.job_name}; the new rows must have its columns")


APPEND_DUPLICATES = ("discard", "report", "drop", "fail", "keep")  # issue 28's two values and issue 29's (docs/options.md)


@leaves_logging_alone
@objects_frozen_during
def append(base_job_dir: Union[str, os.PathLike], source: Union[pd.DataFrame, str, os.PathLike], *,
           output_dir: Optional[Union[str, os.PathLike]] = None, duplicates: str = "discard",
           **options: Any) -> ConversionResult:
    """Append the rows of `source` to the finished job `base_job_dir` as a new version.

    Writes a new job directory (in `output_dir`, by default next to the base, named
    `<base label>-<timestamp>-v<N>`) holding every record of the base (shards carried over without
    being read) plus the new rows' records; the base is left as it was. The new rows must have the
    base's columns (a missing or extra column is a ValueError naming it); schema, validate mode,
    image size and compression are the base's. Existing label ids keep their meaning: labels first seen
    in the new rows' TRAIN split are appended to the vocabulary in sorted order. A new row whose image
    is already in the base is discarded as `already in base: <job>` unless `duplicates="keep"`.
    `duplicates` is convert()'s option (issue 29) plus "keep": "report" (or "discard", its name before
    issue 29; the default), "drop" and "fail" also discard rows already in the base, and report (drop all
    rows but one of, or fail on) duplicates within the new rows as convert() does; "keep" keeps rows already in the base and reports
    the others (docs/versions.md).
    Other `options` are those of `tfrecorder.convert` (runner, num_shards, split_ratios, ...).
    Appending to a version (v3 on v2) works the same way; a TFRecorder 2.0 directory must be
    upgraded first (`tfrecorder.upgrade`). A local append killed part-way is continued by the same call
    (`resume`, as in `convert`), onto the same parent (its metadata digest) with the same `duplicates`.
    """
    if duplicates not in APPEND_DUPLICATES:
        raise ValueError(f"duplicates must be one of {', '.join(APPEND_DUPLICATES)}, got {duplicates!r}")
    base = BaseJob.read(str(base_job_dir), "keep" if duplicates == "keep" else "discard")
    if base.task:
        raise ValueError(f"{base.job_name} is an object-detection job; appending to one is not supported yet "
                         "(convert the whole table)")
    _check_inherited(base, options)
    if (options.get("runner", "DirectRunner") != "DirectRunner" and not storage.is_remote(base.tfrecord_dir)
            and not options.get("shared_filesystem")):
        raise ValueError(f"the base job {base.tfrecord_dir} is on this machine, where {options['runner']}'s workers "
                         "cannot read its shards; append to a job on gs:// (or pass shared_filesystem=True)")
    target = _parent_dir(base.tfrecord_dir) if output_dir is None else output_dir
    options.setdefault("job_label", base.label)
    return convert(source, target, schema=base.schema, compression=base.compression, validate=base.validate,
                   image_size=base.image_size, _base=base,
                   duplicates=duplicates if duplicates in ("fail", "drop") else "report",
                   **options)


def versions(output_dir: Union[str, os.PathLike]) -> list[dict[str, Any]]:
    """The finished jobs in `output_dir` with their lineage, sorted by name (versions of one dataset sort
    together, in the order they were made): dicts with job_name, tfrecord_dir, version, parent,
    records (per split), added (records per split, for a version) and created_utc."""
    directory = storage.user_path(output_dir, "output directory").rstrip("/")
    names = set()
    prefix = len(directory) + 1
    for path in storage.list_files(directory):
        relative = path[prefix:].replace("\\", "/")
        parts = relative.split("/")
        if len(parts) == 2 and parts[1] == METADATA_FILE and JobName.parse(parts[0]):
            names.add(parts[0])
    listed = []
    for name in sorted(names):
        job_dir = storage.join(directory, name)
        try:
            document = JobMetadata.read(job_dir).document
        except ValueError:
            continue
        lineage = document.get(LINEAGE_KEY) or {}
        listed.append({
            "job_name": name,
            "tfrecord_dir": job_dir,
            "version": version_of(document),
            "parent": (lineage.get("parent") or {}).get("job_name"),
            "records": {split: info["records"] for split, info in document.get("splits", {}).items()},
            "added": dict((lineage.get("added") or {}).get("records", {})),
            "created_utc": document.get("created_utc"),
        })
    return listed


def versions_text(listed: Sequence[dict[str, Any]]) -> str:
    """`versions()` as the CLI prints it: one line per job, its parent and records."""
    if not listed:
        return "no finished jobs"
    lines = []
    for job in listed:
        records = ", ".join(f"{split}={n}" for split, n in job["records"].items())
        line = f"{job['job_name']}  v{job['version']}  {records}"
        if job["parent"]:
            added = ", ".join(f"{split}+{n}" for split, n in job["added"].items()) or "no records"
            line += f"  (parent {job['parent']}; added {added})"
        lines.append(line)
    return "\n".join(lines)
