"""`tfrecorder.inspect()`: look at a few converted records as plain files.

Writes into `output_dir`: `records.csv` (every non-image feature, label names from the vocabulary,
and the name of each written image file), the images themselves with their original bytes (the
extension from `<image>_format`), and `contact_sheet.png`, a grid of thumbnails with their labels.
Records are read with the CRC-checking reader and every file goes through tfrecorder.io.storage, so
both the job directory and `output_dir` may be gs:// URLs. (The module is not called inspect.py:
that would shadow the standard library module and the exported function.)
"""
from __future__ import annotations

import base64
import csv
import html
import io
import itertools
import json
import os
import struct
from typing import Any, Optional

from tfrecorder.io import storage
from tfrecorder.reading.detection_drawing import detection_rows_and_tiles
from tfrecorder.reading.detection_dataset import is_detection_job
from tfrecorder.format.example_decoder import parse_example
from tfrecorder.format.finished_job import JobInfo
from tfrecorder.core.quiet import leaves_logging_alone

CSV_FILE = "records.csv"
CONTACT_SHEET = "contact_sheet.png"
EXTENSIONS = {"jpeg": "jpg", "png": "png", "gif": "gif", "bmp": "bmp", "webp": "webp"}
THUMBNAIL = 160
SHEET_COLUMNS = 5
CAPTION_HEIGHT = 28


class InspectedPath(str):
    """The directory `inspect()` wrote (a plain path string) that also shows its contact sheet in Jupyter."""

    def _repr_html_(self) -> str:
        sheet = base64.b64encode(storage.read_bytes(storage.join(str(self), CONTACT_SHEET))).decode("ascii")
        return (f"<div><code>{html.escape(str(self))}</code><br/>"
                f'<img src="data:image/png;base64,{sheet}" alt="contact sheet"/></div>')


@leaves_logging_alone
def inspect(tfrecord_dir: str, split: str = "TRAIN", num_records: int = 5, output_dir: Optional[str] = None) -> str:
    """Write the first `num_records` records of `split` as CSV + image files + contact sheet.

    `output_dir` defaults to `./tfrecorder-inspect/<job directory name>-<split>/`. Returns it (a str
    that shows the contact sheet when displayed in Jupyter).
    """
    if not isinstance(num_records, int) or num_records < 1:
        raise ValueError(f"num_records must be a positive integer, got {num_records!r}")
    job = JobInfo.read(tfrecord_dir)
    split = job.split_name(split)
    if output_dir is None:
        job_name = job.tfrecord_dir.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]
        output_dir = os.path.join(os.getcwd(), "tfrecorder-inspect", f"{job_name}-{split.lower()}")
    output_dir = storage.user_path(output_dir, "output_dir")
    examples = [parse_example(record) for record in itertools.islice(job.iter_records(split), num_records)]
    detection_view = is_detection_job(job)  # boxes and class names drawn on each image
    rows, tiles = detection_rows_and_tiles(examples, output_dir, THUMBNAIL) if detection_view else ([], [])
    for index, example in enumerate([] if detection_view else examples):
        row: dict[str, Any] = {"record": index}
        captions = [f"#{index} " + ", ".join(_label_text(job, column, example) for column in job.label_columns)]
        for prefix in job.image_prefixes:
            data = _scalar(example.get(prefix))
            if data is None:
                continue
            image_format = (_scalar(example.get(f"{prefix}_format")) or b"").decode("ascii", "replace")
            if prefix in job.pixel_images:  # TFRecorder 2.0: base64 raw pixels, written out as PNG
                from tfrecorder.format.legacy.v2_records import png_or_raw

                data, image_format = png_or_raw(example, prefix)
            name = f"{index:04d}_{prefix}.{EXTENSIONS.get(image_format, 'bin')}"
            storage.write_bytes(storage.join(output_dir, name), data)
            row[f"{prefix}_file"] = name
            tiles.append((data, captions))
        row.update(_table_values(job, example))
        rows.append(row)
    storage.write_bytes(storage.join(output_dir, CSV_FILE), _csv_bytes(rows))
    storage.write_bytes(storage.join(output_dir, CONTACT_SHEET), contact_sheet(tiles))
    return InspectedPath(output_dir)


def _scalar(values: Optional[list]) -> Any:
    return values[0] if values else None


def _label_text(job: JobInfo, column: str, example: dict[str, list]) -> str:
    if job.features.get(column, {}).get("multi_label"):
        return "+".join(job.label_name(column, int(v)) for v in example.get(column, [])) or "<none>"
    value = _scalar(example.get(column))
    return "<missing>" if value is None else job.label_name(column, int(value))


def _table_values(job: JobInfo, example: dict[str, list]) -> dict[str, str]:
    """CSV cells for every feature except the image bytes, in metadata order."""
    cells = {}
    images = set(job.image_prefixes)
    for name, feature in job.features.items():
        if name in images:
            continue
        values = example.get(name, [])
        if feature.get("stored_as") == "float64_bits":
            values = [struct.unpack("<d", struct.pack("<q", v))[0] for v in values]
        values = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in values]
        if feature["shape"] == [] and len(values) <= 1:
            cells[name] = "" if not values else values[0]
        else:
            cells[name] = json.dumps(values)
        if name in job.label_columns and values:
            cells[f"{name}_name"] = _label_text(job, name, example)
    return cells


def _csv_bytes(rows: list[dict[str, Any]]) -> bytes:
    columns: list[str] = []
    for row in rows:
        columns.extend(c for c in row if c not in columns)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue().encode("utf-8")


def contact_sheet(tiles: list[tuple[bytes, list[str]]]) -> bytes:
    """A PNG grid of thumbnails (encoded image bytes, caption lines), drawn with Pillow."""
    from PIL import Image, ImageDraw

    columns = max(1, min(SHEET_COLUMNS, len(tiles)))
    rows = max(1, -(-len(tiles) // columns))
    cell_h = THUMBNAIL + CAPTION_HEIGHT
    sheet = Image.new("RGB", (columns * THUMBNAIL, rows * cell_h), "white")
    draw = ImageDraw.Draw(sheet)
    for i, (data, captions) in enumerate(tiles):
        x, y = (i % columns) * THUMBNAIL, (i // columns) * cell_h
        try:
            with Image.open(io.BytesIO(data)) as image:
                thumb = image.convert("RGB")
                thumb.thumbnail((THUMBNAIL, THUMBNAIL))
            sheet.paste(thumb, (x + (THUMBNAIL - thumb.width) // 2, y + (THUMBNAIL - thumb.height) // 2))
        except (OSError, ValueError):
            captions = captions + ["(cannot decode)"]
        for line, caption in enumerate(captions):
            draw.text((x + 4, y + THUMBNAIL + 2 + 12 * line), caption[:26], fill="black")
    out = io.BytesIO()
    sheet.save(out, format="PNG")
    return out.getvalue()
