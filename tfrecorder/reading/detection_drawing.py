"""`inspect()` for detection jobs: each image with its boxes and class names drawn, plus a CSV row.

Boxes are drawn on the thumbnail (not the full image) so lines and names stay readable at contact
sheet size; the image file written next to records.csv keeps its original bytes.
"""
from __future__ import annotations

import io
import json
from typing import Any, Sequence

from tfrecorder.format import detection_keys
from tfrecorder.io import storage

EXTENSIONS = {"jpeg": "jpg", "png": "png", "gif": "gif", "bmp": "bmp", "webp": "webp"}
COLOURS = ("#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#9a6324")


def _first(example: dict, key: str, default: Any = None) -> Any:
    values = example.get(key) or []
    return values[0] if values else default


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def draw_boxes(data: bytes, boxes: list[tuple[float, float, float, float]], names: list[str], size: int,
               masks: Sequence[bytes] = ()) -> bytes:
    """A PNG thumbnail (longest side `size`) of the image with each [ymin, xmin, ymax, xmax] box and its name,
    and each instance mask (a 0/1 PNG, dataset jobs) filled in its box's colour, half transparent."""
    from PIL import Image, ImageDraw

    with Image.open(io.BytesIO(data)) as image:
        scale = size / max(image.width, image.height)  # small images are enlarged so names stay readable
        thumb = image.convert("RGB").resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))))
    for i, mask_png in enumerate(masks):
        with Image.open(io.BytesIO(mask_png)) as mask:
            alpha = mask.convert("L").resize(thumb.size, Image.Resampling.NEAREST).point(lambda v: 110 if v else 0)
        thumb.paste(Image.new("RGB", thumb.size, COLOURS[i % len(COLOURS)]), (0, 0), alpha)
    draw = ImageDraw.Draw(thumb)
    for i, ((ymin, xmin, ymax, xmax), name) in enumerate(zip(boxes, names)):
        colour = COLOURS[i % len(COLOURS)]
        left, top = xmin * (thumb.width - 1), ymin * (thumb.height - 1)
        draw.rectangle([left, top, xmax * (thumb.width - 1), ymax * (thumb.height - 1)], outline=colour, width=2)
        text_box = draw.textbbox((left + 2, top + 1), name)
        draw.rectangle(text_box, fill=colour)
        draw.text((left + 2, top + 1), name, fill="white")
    out = io.BytesIO()
    thumb.save(out, format="PNG")
    return out.getvalue()


def detection_boxes(example: dict) -> tuple[list[tuple[float, float, float, float]], list[str]]:
    """A parsed detection Example's boxes ([ymin, xmin, ymax, xmax]) and class names."""
    keys = (detection_keys.YMIN, detection_keys.XMIN, detection_keys.YMAX, detection_keys.XMAX)
    return list(zip(*(example.get(k, []) for k in keys))), [_text(t) for t in example.get(detection_keys.CLASS_TEXT, [])]


def detection_rows_and_tiles(examples: list[dict], output_dir: str, thumbnail: int
                             ) -> tuple[list[dict[str, Any]], list[tuple[bytes, list[str]]]]:
    """records.csv rows and contact-sheet tiles (boxes drawn) of parsed detection Examples; writes the images."""
    rows, tiles = [], []
    for index, example in enumerate(examples):
        data = _first(example, detection_keys.ENCODED)
        image_format = _text(_first(example, detection_keys.FORMAT, b""))
        boxes, names = detection_boxes(example)
        row: dict[str, Any] = {"record": index}
        if data is not None:
            name = f"{index:04d}_image.{EXTENSIONS.get(image_format, 'bin')}"
            storage.write_bytes(storage.join(output_dir, name), data)
            row["image_file"] = name
            caption = [f"#{index} {len(boxes)} box{'es' if len(boxes) != 1 else ''}"]
            try:
                masks = [bytes(m) for m in example.get(detection_keys.MASK, [])]
                tiles.append((draw_boxes(data, boxes, names, thumbnail, masks), caption))
            except (OSError, ValueError):
                tiles.append((data, caption))
        row.update({
            "uri": _text(_first(example, detection_keys.URI, None) or _first(example, detection_keys.SOURCE_ID, b"")),
            "source_id": _text(_first(example, detection_keys.SOURCE_ID, b"")),
            "filename": _text(_first(example, detection_keys.FILENAME, b"")),
            "height": _first(example, detection_keys.HEIGHT, ""),
            "width": _first(example, detection_keys.WIDTH, ""),
            "boxes_ymin_xmin_ymax_xmax": json.dumps([[round(v, 6) for v in box] for box in boxes]),
            "classes": json.dumps(list(example.get(detection_keys.CLASS_LABEL, []))),
            "class_names": json.dumps(names),
        })
        rows.append(row)
    return rows, tiles
