"""HTML views for Jupyter: a conversion result with its counts, discard reasons and image thumbnails.

Thumbnails come from the first records of a split, read through tfrecorder.io.storage and parsed
without TensorFlow; they are embedded as small PNG data URIs so the notebook stays self-contained.
"""
from __future__ import annotations

import base64
import html
import io
import itertools
from typing import Any, Mapping

from tfrecorder.format import detection_keys
from tfrecorder.reading.detection_drawing import detection_boxes
from tfrecorder.reading.detection_dataset import is_detection_job
from tfrecorder.format.example_decoder import parse_example
from tfrecorder.format.finished_job import JobInfo

THUMBNAIL = 96
THUMBNAILS = 8
REASONS_SHOWN = 3


def thumbnail_uri(data: bytes, boxes=(), names=()) -> str:
    """A PNG data URI of the image's thumbnail; detection boxes ([ymin, xmin, ymax, xmax]) drawn when given."""
    from PIL import Image

    if boxes:
        from tfrecorder.reading.detection_drawing import draw_boxes

        return "data:image/png;base64," + base64.b64encode(draw_boxes(data, boxes, names, THUMBNAIL)).decode("ascii")
    with Image.open(io.BytesIO(data)) as image:
        thumb = image.convert("RGB")
        thumb.thumbnail((THUMBNAIL, THUMBNAIL))
    out = io.BytesIO()
    thumb.save(out, format="PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode("ascii")


def thumbnails_html(tfrecord_dir: str, count: int = THUMBNAILS) -> str:
    """A row of the first `count` training images with their label text ('' when there are none)."""
    job = JobInfo.read(tfrecord_dir)
    detection_job = is_detection_job(job)
    if not (job.image_prefixes or detection_job) or not job.splits:
        return ""
    split = "TRAIN" if "TRAIN" in job.splits else job.splits[0]
    prefix = detection_keys.ENCODED if detection_job else job.image_prefixes[0]
    cells = []
    for record in itertools.islice(job.iter_records(split), count):
        example = parse_example(record)
        data = (example.get(prefix) or [None])[0]
        if data is None:
            continue
        boxes, names = detection_boxes(example) if detection_job else ((), ())
        labels = ", ".join(job.label_name(c, int(example[c][0])) for c in job.label_columns if example.get(c))
        labels = labels or ", ".join(dict.fromkeys(names))
        try:
            source = thumbnail_uri(data, boxes, names)
        except (OSError, ValueError):
            continue
        cells.append(f'<figure style="display:inline-block;margin:4px;text-align:center">'
                     f'<img src="{source}" alt="{html.escape(labels)}"/><figcaption>{html.escape(labels)}</figcaption></figure>')
    return f"<div><b>{split.lower()} samples</b><br/>{''.join(cells)}</div>" if cells else ""


def lineage_html(lineage: Mapping[str, Any]) -> str:
    """A version's lineage: its number, its parent, the records it added per split, new labels."""
    added = ", ".join(f"{html.escape(str(split))} +{n:,}" for split, n in lineage.get("added", {}).get("records", {}).items())
    growth = "; ".join(f"{html.escape(str(column))}: {html.escape(', '.join(map(str, labels)))}"
                       for column, labels in lineage.get("vocabulary_growth", {}).items())
    parent = lineage.get("parent", {})
    return (f"<div>version {int(lineage.get('version', 1))} of <code>{html.escape(str(parent.get('job_name')))}</code>"
            f" (v{int(parent.get('version', 1))}) · added {added or 'no records'}"
            + (f" · new labels {growth}" if growth else "") + "</div>")


def result_html(fields: Mapping[str, Any]) -> str:
    """Per-split counts, discards with the first reasons, output path, bytes, time, rate, thumbnails."""
    metadata = fields.get("metadata") or {}
    splits = metadata.get("splits", {})
    rows = "".join(
        f"<tr><td>{html.escape(split)}</td><td>{info['records']:,}</td><td>{len(info['shards'])}</td>"
        f"<td>{info['bytes']:,}</td></tr>" for split, info in splits.items()
    )
    reasons = list(fields.get("discard_reasons", {}).items())[:REASONS_SHOWN]
    reason_text = "; ".join(f"{html.escape(str(r))} ({n})" for r, n in reasons)
    elapsed = fields.get("elapsed_seconds") or 0
    rate = f"{fields.get('rows_in', 0) / elapsed:,.0f} rows/s" if elapsed else ""
    parts = [
        f"<div><b>tfrecorder</b> · {html.escape(str(fields.get('job_id')))} · "
        f"<code>{html.escape(str(fields.get('tfrecord_dir')))}</code></div>",
        "<table><tr><th>split</th><th>records</th><th>shards</th><th>bytes</th></tr>" + rows + "</table>",
        f"<div>rows in: {fields.get('rows_in', 0):,} · discarded: {fields.get('discarded', 0):,}"
        + (f" — {reason_text}" if reason_text else "") + "</div>",
    ]
    lineage = metadata.get("lineage")
    if lineage:  # a version made by tfrecorder.append
        parts.append(lineage_html(lineage))
    if "bytes_written" in fields:
        parts.append(f"<div>{fields['bytes_written']:,} bytes in {elapsed:.1f} s {('· ' + rate) if rate else ''}</div>")
    if splits:
        parts.append(thumbnails_html(str(fields["tfrecord_dir"])))
    return "<div>" + "".join(parts) + "</div>"

