"""`tfrecorder.report(job_dir)`: what a job wrote, as one self-contained HTML page (issue 29).

From the job's statistics.json and duplicates.csv: label distribution per split (bars), missing-value
rates, numeric histograms, image size distributions, duplicate groups and train/test leaks with their
thumbnails side by side. Charts are inline SVG (tfrecorder.statistics_charts) and thumbnails PNG data
URIs: no script, no network. A job written before statistics.json existed gets its statistics
recomputed from its records (one pass, memory bounded by the sketches); its duplicates are unknown.
"""
from __future__ import annotations

import csv
import dataclasses
import html
import io
import itertools
from typing import Any, Iterator, Mapping, Optional, Union

from tfrecorder.core import types
from tfrecorder.core.splits import SPLITS
from tfrecorder.errors import InvalidImage
from tfrecorder.format import detection_keys
from tfrecorder.format.feature_spec import image_feature_prefix
from tfrecorder.format.finished_job import JobInfo
from tfrecorder.format.job_directory import job_file
from tfrecorder.format.statistics_files import DUPLICATES_FILE, read_statistics
from tfrecorder.format.typed_values import record_values
from tfrecorder.io import storage
from tfrecorder.io.image_probe import probe_image
from tfrecorder.rows.dataset_statistics import DatasetStatistics
from tfrecorder.rows.detection_statistics import IMAGE, DetectionStatistics, image_row
from tfrecorder.rows.duplicate_groups import leak_warning
from tfrecorder.statistics_charts import SPLIT_COLOURS, bar_chart, grouped_bars, histogram
from tfrecorder.views import thumbnail_uri

GROUPS_SHOWN = 8  # leaking groups shown, and as many other groups
MEMBERS_SHOWN = 4
THUMBNAIL_BYTES = 32 * 1024 * 1024  # a duplicate's image file read for its thumbnail only up to this size
RECOMPUTE_BATCH = 512

STYLE = ("<style>.tfr-report{font-family:sans-serif;font-size:13px}.tfr-report h3{margin:14px 0 6px}"
         ".tfr-report .tfr-warn{color:#b00;font-weight:bold}.tfr-report figure{display:inline-block;margin:3px;"
         "text-align:center;font-size:10px;max-width:110px;word-break:break-all}.tfr-report .tfr-group"
         "{border:1px solid #ddd;margin:4px 0;padding:4px}.tfr-report svg{margin:2px 8px 2px 0}</style>")


@dataclasses.dataclass
class JobReport:
    """A job's report: `html` (a whole page), `save(path)`, and shown inline by notebooks."""

    tfrecord_dir: str
    statistics: Mapping[str, Any]
    duplicates: Optional[Mapping[str, int]]  # metadata.json's counts; None: not computed for this job
    groups: list  # the duplicate groups shown: {"group", "kind", "leak", "members": [(split, row, kept)]}
    recomputed: bool

    @property
    def fragment(self) -> str:
        return f'<div class="tfr-report">{STYLE}{self._body()}</div>'

    @property
    def html(self) -> str:
        title = html.escape(f"tfrecorder report: {self.tfrecord_dir}")
        return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title></head>'
                f"<body>{self.fragment}</body></html>")

    def _repr_html_(self) -> str:
        return self.fragment

    def save(self, path: str) -> str:
        """Write the page to `path` (local or gs://); returns the path."""
        storage.write_bytes(path, self.html.encode("utf-8"))
        return path

    def _body(self) -> str:
        parts = [f"<h3>Statistics of {html.escape(self.tfrecord_dir)}</h3>"]
        if self.recomputed:
            parts.append("<div>(recomputed from the records: this job was written without statistics.json)</div>")
        parts.append(duplicates_html(self.duplicates, self.groups))
        parts.append(statistics_html(self.statistics))
        return "".join(parts)


def report(job_dir: Union[str, Any]) -> JobReport:
    """The report of a finished job directory (local or gs://). Show it in a notebook, or `.save("out.html")`."""
    job = JobInfo.read(str(job_dir))
    statistics = read_statistics(job.tfrecord_dir)
    recomputed = statistics is None
    if statistics is None:
        statistics = recompute_statistics(job)
    duplicates = job.metadata.get("duplicates")
    groups = read_groups(job.tfrecord_dir) if duplicates is not None else []
    return JobReport(job.tfrecord_dir, statistics, duplicates, groups, recomputed)


def recompute_statistics(job: JobInfo) -> dict[str, Any]:
    """statistics.json's document from a job's records (for jobs written before it existed)."""
    if job.metadata.get("task") == detection_keys.TASK:
        return recompute_detection_statistics(job)
    schema = job.schema
    stats = DatasetStatistics(schema)
    features = job.features
    for split, chunk in _record_batches(job):
        rows, images = [], {}
        for record in chunk:
            row, facts = _row_of(record_values(record, features), schema, job)
            rows.append(row)
            for column, fact in facts.items():
                images.setdefault(column, []).append(fact)
        stats.add_rows(split, rows, images)
    return stats.to_json(job.metadata.get("vocabularies", {}))


def recompute_detection_statistics(job: JobInfo) -> dict[str, Any]:
    """statistics.json's document of a detection job (box table, COCO/VOC/YOLO) from its records: each
    record's image and boxes as tfrecorder.rows.detection_statistics describes them (box aspects from
    the written image's size)."""
    stats = DetectionStatistics()
    boxes = (detection_keys.XMIN, detection_keys.YMIN, detection_keys.XMAX, detection_keys.YMAX)
    for split, chunk in _record_batches(job):
        rows, facts = [], []
        for record in chunk:
            values = record_values(record, job.features)
            data, height, width = values[detection_keys.ENCODED], int(values[detection_keys.HEIGHT]), \
                int(values[detection_keys.WIDTH])
            labels = [_text(label) for label in values.get(detection_keys.CLASS_TEXT, [])]
            rows.append(image_row(labels, list(zip(*(list(values.get(key, [])) for key in boxes))), height, width))
            facts.append((_text(values[detection_keys.FORMAT]), height, width, _channels(data), len(data)))
        stats.add_rows(split, rows, {IMAGE: facts})
    return stats.to_json({"label": job.metadata.get("vocabularies", {}).get("label", [])})


def _record_batches(job: JobInfo) -> Iterator[tuple[str, list]]:
    """(split, up to RECOMPUTE_BATCH records) of every split: statistics are recomputed batch by batch."""
    for split in job.splits:
        records = job.iter_records(split)
        while chunk := list(itertools.islice(records, RECOMPUTE_BATCH)):
            yield split, chunk


def _channels(data: bytes) -> int:
    """The channel count TensorFlow decodes an image to, from its header (0 when it cannot be read)."""
    try:
        return probe_image(data).channels
    except (InvalidImage, ValueError, OSError):
        return 0


def _row_of(values: Mapping[str, Any], schema, job: JobInfo) -> tuple[dict, dict]:
    """A record's values as the table row they came from (label names, lists), and its image facts."""
    row: dict[str, Any] = {}
    images: dict[str, tuple] = {}
    for column, role in schema.items():
        if role == types.SplitKey:
            continue
        if role == types.ImageUri:
            prefix = image_feature_prefix(column)
            if prefix in values and not values.get(f"{prefix}_missing"):
                images[column] = (_text(values[f"{prefix}_format"]), int(values[f"{prefix}_height"]),
                                  int(values[f"{prefix}_width"]), int(values[f"{prefix}_channels"]), len(values[prefix]))
                row[column] = _text(values.get(f"{prefix}_uri", b""))
            continue
        if column not in values or values.get(f"{column}_missing"):
            row[column] = None
            continue
        value = values[column]
        if role == types.StringLabel:
            row[column] = job.label_name(column, int(value))
        elif role == types.MultiLabel:
            row[column] = [job.label_name(column, int(v)) for v in value]
        elif hasattr(value, "tolist"):
            row[column] = value.tolist()
        else:
            row[column] = _text(value) if isinstance(value, bytes) else value
    return row, images


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def read_groups(tfrecord_dir: str, shown: int = GROUPS_SHOWN) -> list[dict[str, Any]]:
    """The first `shown` leaking groups and the first `shown` other groups of duplicates.csv (streamed)."""
    path = job_file(tfrecord_dir, DUPLICATES_FILE)
    if not storage.exists(path):
        return []
    leaking, other = [], []
    current: Optional[dict] = None
    with storage.open_read(path) as raw:
        for line in csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8", newline="")):
            if current is None or current["group"] != line["group"]:
                if len(leaking) >= shown and len(other) >= shown:
                    break
                current = {"group": line["group"], "kind": line["kind"], "leak": line["leak"] == "yes", "members": []}
                target = leaking if current["leak"] else other
                if len(target) < shown:
                    target.append(current)
            current["members"].append((line["split"], line["row"], line["kept"] == "yes"))
    return leaking + other


def _thumbnail(row: str) -> str:
    try:
        return f'<img src="{thumbnail_uri(storage.read_bytes(row, THUMBNAIL_BYTES))}"/>'
    except Exception:  # a row id that is no readable image (image-free rows, a moved file): its text only
        return ""


def duplicates_html(counts: Optional[Mapping[str, int]], groups: list) -> str:
    """The duplicates section: counts (exact and near), the leak warning, then groups with thumbnails side by side."""
    if counts is None:
        return "<h3>Duplicates</h3><div>not computed for this job (written before tfrecorder found duplicates)</div>"
    near = counts.get("near") or {}
    parts = [f"<h3>Duplicates</h3><div>{counts.get('groups', 0):,} groups of identical rows "
             f"({counts.get('rows', 0):,} rows, {counts.get('redundant', 0):,} beyond the first of each group); "
             f"{near.get('groups', 0):,} groups of near-duplicate images ({near.get('rows', 0):,} rows)</div>"]
    if "dropped" in counts:  # duplicates="drop": the groups below were found, then all but the kept row dropped
        parts.append(f"<div>{counts['dropped']:,} rows dropped (duplicates=\"drop\"): only each group's kept row "
                     "was written, the others are in discarded.csv; no group is left spanning splits</div>")
    warning = leak_warning(counts)
    if warning:
        parts.append(f'<div class="tfr-warn">{html.escape(warning)}</div>')
    if groups:
        parts.append("<h3>Duplicate groups (leaks first)</h3>")
    for group in groups:
        figures = "".join(
            f'<figure>{_thumbnail(row)}<figcaption style="color:{SPLIT_COLOURS.get(split, "#333")}">'
            f'{html.escape(split)}{" (kept)" if kept else ""}<br/>{html.escape(row[-60:])}</figcaption></figure>'
            for split, row, kept in group["members"][:MEMBERS_SHOWN])
        more = len(group["members"]) - MEMBERS_SHOWN
        label = "leak" if group["leak"] else "duplicates"
        parts.append(f'<div class="tfr-group"><b>{label}</b> {html.escape(group["kind"])} group '
                     f'{html.escape(group["group"])}{f" (+{more} more)" if more > 0 else ""}<br/>{figures}</div>')
    return "".join(parts)


def statistics_html(statistics: Mapping[str, Any]) -> str:
    """Labels per split, missing-value rates, numeric histograms, image sizes, top strings."""
    splits = {split: info for split, info in statistics.get("splits", {}).items() if split in SPLITS}
    if not splits:
        return "<div>no statistics: nothing was written</div>"
    if all("boxes" in info for info in splits.values()):  # a detection job: images and their boxes (issue 29)
        rows = ", ".join(f"{split.lower()} {info['rows']:,} ({info['boxes']:,} boxes)" for split, info in splits.items())
        parts = [f"<div>images written: {rows}</div>"]
    else:
        rows = ", ".join(f"{split.lower()} {info['rows']:,}" for split, info in splits.items())
        parts = [f"<div>rows written: {rows}</div>"]
    columns = list(next(iter(splits.values()))["features"])
    kinds = {c: next(iter(splits.values()))["features"][c]["kind"] for c in columns}
    for column in (c for c in columns if kinds[c] == "label"):
        series = {split: {e["value"]: e["count"] for e in info["features"][column]["labels"]["counts"]}
                  for split, info in splits.items()}
        labels = sorted({label for counts in series.values() for label in counts},
                        key=lambda label: -sum(counts.get(label, 0) for counts in series.values()))
        parts.append(f"<h3>Labels: {html.escape(column)}</h3>" + grouped_bars(f"{column} per split", labels, series))
        for split, info in splits.items():
            missing = info["features"][column]["labels"].get("missing_classes")
            if missing:
                parts.append(f'<div class="tfr-warn">{html.escape(split)} has no row of {len(missing)} class(es): '
                             f"{html.escape(', '.join(missing[:20]))}</div>")
    missing_rates = []
    for column in columns:
        present = sum(info["features"][column]["count"] for info in splits.values())
        missing = sum(info["features"][column]["missing"] for info in splits.values())
        if present + missing:
            missing_rates.append((column, round(100.0 * missing / (present + missing), 2)))
    parts.append("<h3>Missing values</h3>" + bar_chart("missing values (% of rows)", missing_rates, unit="%"))
    for column in columns:
        charts = []
        for split, info in splits.items():
            feature = info["features"][column]
            colour = SPLIT_COLOURS.get(split, "#4c78a8")
            if kinds[column] == "numeric" and feature.get("numeric", {}).get("count"):
                charts.append(histogram(f"{column} ({split.lower()})", feature["numeric"]["histogram"], colour))
            elif kinds[column] == "image" and feature.get("image", {}).get("width", {}).get("count"):
                for dimension in ("width", "height", "bytes"):
                    charts.append(histogram(f"{column} {dimension} ({split.lower()})",
                                            feature["image"][dimension]["histogram"], colour))
            elif kinds[column] == "string" and feature.get("string", {}).get("top_values"):
                top = [(e["value"], e["count"]) for e in feature["string"]["top_values"][:10]]
                charts.append(bar_chart(f"{column} top values ({split.lower()})", top, colour=colour))
            if feature.get("list_lengths", {}).get("count"):
                charts.append(histogram(f"{column} list length ({split.lower()})", feature["list_lengths"]["histogram"],
                                        colour))
        if charts:
            heading = "Image sizes" if kinds[column] == "image" else "Values"
            parts.append(f"<h3>{heading}: {html.escape(column)}</h3><div>{''.join(charts)}</div>")
    return "".join(parts)
