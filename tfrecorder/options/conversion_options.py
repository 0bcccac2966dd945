"""convert()'s options, checked once into one frozen value before any table is opened.

`ConvertOptions.check` raises one ValueError per bad option (the CLI's exit 2) and ends with the only
I/O, a real write under `output_dir`; the driver then reads every option from the value it returns.
`output_dir` becomes one `OutputLocation` before anything else: normalised once, constrained by the
launch (Dataflow writes only to Cloud Storage), checked writable once, and passed down as that value.
upgrade() shares the shard options and the output location.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Optional, Sequence, Union

from tfrecorder.rows import detection_encoder
from tfrecorder.io import storage
from tfrecorder.io.decode_check import VALIDATIONS
from tfrecorder.core.splits import validate_split_ratios
from tfrecorder.sources import csv_text

COMPRESSIONS = (None, "gzip")
DEFAULT_MAX_SHARD_BYTES = 150 * 1024 * 1024  # a shard is cut at this size (TensorFlow's guide: 100–200 MB)
MAX_FETCH_CONCURRENCY = 128
EXAMPLE_BYTES_LIMIT = (1 << 31) - 1  # a protobuf message, so one Example, holds less than 2 GiB


def normalise_output_dir(output_dir: Union[str, os.PathLike]) -> str:
    """The one form of `output_dir` every later step uses: an absolute local path (`~` expanded), or a
    URL without a trailing '/' (nothing is created here; a name too long for a file system is refused)."""
    output_dir = storage.user_path(output_dir, "output_dir")
    if not output_dir:
        return output_dir  # refused by check_output_dir (or, for Dataflow, by its request check)
    return output_dir.rstrip("/") if storage.is_remote(output_dir) else os.path.abspath(output_dir)


def check_output_dir(output_dir: str) -> str:
    """A normalised `output_dir` that names a directory files can be created in (checked by a real write;
    a local file at or above it is refused there, with one message)."""
    if not output_dir:
        raise ValueError("output_dir must not be empty")
    storage.check_writable_dir(output_dir)
    return output_dir


_GCS_URL = re.compile(r"gs://[a-z0-9][-a-z0-9_.]{1,220}[a-z0-9](/.*)?")


@dataclasses.dataclass(frozen=True)
class OutputLocation:
    """Where job directories are written: normalised once (an absolute local path, or a URL without a
    trailing '/'); `checked()` says it is writable, `require_gcs` applies a launch's constraint."""

    path: str

    @classmethod
    def of(cls, output_dir: Union[str, os.PathLike]) -> "OutputLocation":
        """The normalised location (pure: nothing is checked or created)."""
        return cls(normalise_output_dir(output_dir))

    def require_gcs(self, who: str) -> None:
        """Refuse (ValueError) a location that is not a gs:// URL, for a launch that writes only there."""
        if not _GCS_URL.fullmatch(self.path):
            raise ValueError(f"{who} writes to Cloud Storage: output_dir must be gs://bucket/..., got {self.path!r}")

    def checked(self) -> "OutputLocation":
        """This location, once a real write has shown files can be created in it (ValueError otherwise)."""
        check_output_dir(self.path)
        return self


def check_shard_options(num_shards: int, max_shard_bytes: int, compression: Optional[str],
                        image_size: Optional[Sequence[int]], validate: str) -> Optional[tuple[int, int]]:
    """Raise ValueError for a bad shard, compression, resize or validation option; returns image_size as a tuple."""
    if not isinstance(num_shards, int) or num_shards < 0:
        raise ValueError(f"num_shards must be an integer >= 0 (0 = automatic), got {num_shards!r}")
    if not isinstance(max_shard_bytes, int) or max_shard_bytes <= 0:
        raise ValueError(f"max_shard_bytes must be a positive integer, got {max_shard_bytes!r}")
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression must be None or 'gzip', got {compression!r}")
    if validate not in VALIDATIONS:
        raise ValueError(f"validate must be one of {VALIDATIONS}, got {validate!r}")
    if image_size is None:
        return None
    if len(image_size) != 2 or not all(isinstance(v, int) and v > 0 for v in image_size):
        raise ValueError(f"image_size must be (height, width) with positive integers, got {image_size!r}")
    return int(image_size[0]), int(image_size[1])


def check_fetch_concurrency(requested: Optional[int]) -> Optional[int]:
    """An explicit bound from 1 to MAX_FETCH_CONCURRENCY, or None (chosen once the table is seen)."""
    if requested is None:
        return None
    if isinstance(requested, bool) or not isinstance(requested, int) or not 1 <= requested <= MAX_FETCH_CONCURRENCY:
        raise ValueError(f"fetch_concurrency must be an integer from 1 to {MAX_FETCH_CONCURRENCY}, got {requested!r}")
    return requested


def check_image_limits(max_image_pixels: int, max_image_bytes: int,
                       image_size: Optional[tuple[int, int]]) -> None:
    """ValueError unless both limits are positive integers, a file's under the 2 GiB an Example can hold,
    and a requested `image_size` (already checked) within the pixel limit."""
    if isinstance(max_image_pixels, bool) or not isinstance(max_image_pixels, int) or max_image_pixels < 1:
        raise ValueError(f"max_image_pixels must be a positive integer, got {max_image_pixels!r}")
    if (isinstance(max_image_bytes, bool) or not isinstance(max_image_bytes, int)
            or not 1 <= max_image_bytes < EXAMPLE_BYTES_LIMIT):
        raise ValueError(f"max_image_bytes must be an integer from 1 to {EXAMPLE_BYTES_LIMIT - 1:,} (an Example "
                         f"holds less than 2 GiB), got {max_image_bytes!r}")
    if image_size is not None and image_size[0] * image_size[1] > max_image_pixels:
        raise ValueError(f"image_size {image_size[0]}x{image_size[1]} is more than max_image_pixels={max_image_pixels:,}")


DUPLICATE_MODES = ("report", "drop", "fail")  # issue 29 (docs/statistics.md)
MAX_NEAR_DISTANCE = 7  # the LSH banding finds every pair this close (tfrecorder.rows.near_duplicates)


@dataclasses.dataclass(frozen=True)
class ConvertOptions:
    """convert()'s job options, each checked once (the source and the schema are checked with the table)."""

    output_dir: str  # normalised and writable
    job_label: Optional[str]
    num_shards: int
    max_shard_bytes: int
    compression: Optional[str]
    image_size: Optional[tuple[int, int]]
    validate: str
    split_ratios: tuple[float, float, float]
    fetch_concurrency: Optional[int]  # None: chosen by where the table's images live
    max_image_pixels: int  # images declaring more are discarded before any decoder sees them
    max_image_bytes: int  # image files larger are discarded unread
    box_units: str
    annotation_format: Optional[str]
    encoding: str  # a CSV source's text encoding: a codec name Python knows (csv_text.check_encoding)
    verbose: bool
    progress: bool
    duplicates: str = "report"  # what duplicate groups do: "report", "drop" all rows but one, "fail" on a leak
    near_duplicate_distance: int = 0  # pHash bits two near-duplicate images differ in at most (0: no search)
    statistics: bool = True  # False: no statistics.json/.pb, duplicates.csv (the cost of issue 29 saved)

    @classmethod
    def check(cls, output: OutputLocation, *, job_label: Optional[str], num_shards: int, max_shard_bytes: int,
              compression: Optional[str], image_size: Optional[Sequence[int]], validate: str,
              split_ratios: Sequence[float], fetch_concurrency: Optional[int], max_image_pixels: int,
              max_image_bytes: int, box_units: str, annotation_format: Optional[str], encoding: str,
              verbose: bool, progress: bool, duplicates: str = "report",
              near_duplicate_distance: int = 0, statistics: bool = True) -> "ConvertOptions":
        """The checked options (ValueError naming the first bad one), the output location's write check last."""
        image_size = check_shard_options(num_shards, max_shard_bytes, compression, image_size, validate)
        check_image_limits(max_image_pixels, max_image_bytes, image_size)
        ratios = validate_split_ratios(split_ratios)
        box_units = detection_encoder.check_box_units(box_units)
        fetch_concurrency = check_fetch_concurrency(fetch_concurrency)
        encoding = csv_text.check_encoding(encoding)
        if duplicates not in DUPLICATE_MODES:
            raise ValueError(f"duplicates must be one of {DUPLICATE_MODES}, got {duplicates!r}")
        if (isinstance(near_duplicate_distance, bool) or not isinstance(near_duplicate_distance, int)
                or not 0 <= near_duplicate_distance <= MAX_NEAR_DISTANCE):
            raise ValueError(f"near_duplicate_distance must be an integer from 0 (off) to {MAX_NEAR_DISTANCE}, "
                             f"got {near_duplicate_distance!r}")
        if not isinstance(statistics, bool):
            raise ValueError(f"statistics must be True or False, got {statistics!r}")
        if not statistics and duplicates != "report":
            raise ValueError(f"duplicates={duplicates!r} needs statistics=True: duplicates are found with the statistics")
        return cls(output.checked().path, job_label, num_shards, max_shard_bytes, compression, image_size,
                   validate, ratios, fetch_concurrency, max_image_pixels, max_image_bytes, box_units,
                   annotation_format, encoding, verbose, progress, duplicates, near_duplicate_distance,
                   statistics)
