"""tfrecorder.reading.detection_drawing: detection records shown with their boxes and class names drawn."""
from __future__ import annotations

import base64
import csv
import io
import json
import re
from pathlib import Path

import numpy as np
from PIL import Image

import tfrecorder
from tfrecorder.format import detection_keys
from tfrecorder.reading.detection_drawing import COLOURS, detection_boxes, detection_rows_and_tiles, draw_boxes
from tfrecorder.sample_data import encode_image, photo_array


def test_inspect_draws_boxes_and_class_names(detection_job, tmp_path):
    out = tfrecorder.inspect(detection_job["tfrecord_dir"], "train", num_records=5, output_dir=str(tmp_path / "look"))
    rows = list(csv.DictReader(open(Path(out) / "records.csv", newline="")))
    assert len(rows) == 2
    by_name = {row["filename"]: row for row in rows}
    assert by_name["a.jpg"]["uri"].endswith("a.jpg") and by_name["a.jpg"]["source_id"] == detection_keys.source_id(
        by_name["a.jpg"]["uri"])
    assert sorted(json.loads(by_name["a.jpg"]["class_names"])) == ["cat", "dog"]
    assert json.loads(by_name["b.png"]["boxes_ymin_xmin_ymax_xmax"]) == [[0.5, 0.25, 1.0, 0.75]]
    written = (Path(out) / by_name["a.jpg"]["image_file"]).read_bytes()
    assert written[:2] == b"\xff\xd8"  # the original JPEG, not the drawing
    sheet = np.asarray(Image.open(Path(out) / "contact_sheet.png").convert("RGB"))
    first_colour = tuple(int(COLOURS[0][i:i + 2], 16) for i in (1, 3, 5))
    assert (sheet == first_colour).all(axis=-1).sum() > 100  # box outlines and name labels drawn


def test_result_html_shows_images_with_their_boxes(detection_job):
    page = detection_job._repr_html_()
    sources = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(sources) == 2 and ("cat, dog" in page or "dog, cat" in page)
    colour = tuple(int(COLOURS[0][i:i + 2], 16) for i in (1, 3, 5))
    drawn = [np.asarray(Image.open(io.BytesIO(base64.b64decode(s))).convert("RGB")) for s in sources]
    assert all((image == colour).all(axis=-1).sum() > 20 for image in drawn)


def colour_pixels(png: bytes, colour: str) -> int:
    rgb = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return int((np.asarray(Image.open(io.BytesIO(png)).convert("RGB")) == rgb).all(axis=-1).sum())


def test_draw_boxes_scales_to_the_thumbnail_and_colours_each_box():
    data = encode_image(Image.fromarray(photo_array(40, 80, 2)), "JPEG")
    drawn = draw_boxes(data, [(0.0, 0.0, 0.5, 0.5), (0.5, 0.5, 1.0, 1.0)], ["cat", "dog"], size=160)
    with Image.open(io.BytesIO(drawn)) as image:
        assert image.format == "PNG" and image.size == (160, 80)  # longest side `size`, small images enlarged
    assert colour_pixels(drawn, COLOURS[0]) > 50 and colour_pixels(drawn, COLOURS[1]) > 50
    assert colour_pixels(draw_boxes(data, [], [], size=160), COLOURS[0]) < colour_pixels(drawn, COLOURS[0])


def test_detection_boxes_are_ymin_xmin_ymax_xmax_with_names():
    example = {detection_keys.XMIN: [0.1, 0.5], detection_keys.YMIN: [0.2, 0.6], detection_keys.XMAX: [0.3, 0.7],
               detection_keys.YMAX: [0.4, 0.8], detection_keys.CLASS_TEXT: [b"cat", "d\xc3\xb6g".encode("latin-1")]}
    boxes, names = detection_boxes(example)
    assert boxes == [(0.2, 0.1, 0.4, 0.3), (0.6, 0.5, 0.8, 0.7)] and names == ["cat", "dög"]
    assert detection_boxes({}) == ([], [])


def test_rows_and_tiles_write_original_bytes_and_keep_undrawable_images(tmp_path):
    jpeg = encode_image(Image.fromarray(photo_array(30, 30, 1)), "JPEG")
    examples = [
        {detection_keys.ENCODED: [jpeg], detection_keys.FORMAT: [b"jpeg"], detection_keys.SOURCE_ID: [b"a.jpg"],
         detection_keys.HEIGHT: [30], detection_keys.WIDTH: [30], detection_keys.XMIN: [0.1], detection_keys.YMIN: [0.1],
         detection_keys.XMAX: [0.9], detection_keys.YMAX: [0.9], detection_keys.CLASS_TEXT: [b"cat"], detection_keys.CLASS_LABEL: [1]},
        {detection_keys.ENCODED: [b"not an image"], detection_keys.FORMAT: [b"tiff"], detection_keys.SOURCE_ID: [b"b"]},
    ]
    rows, tiles = detection_rows_and_tiles(examples, str(tmp_path), thumbnail=64)
    assert [row["image_file"] for row in rows] == ["0000_image.jpg", "0001_image.bin"]
    assert (tmp_path / "0000_image.jpg").read_bytes() == jpeg and (tmp_path / "0001_image.bin").read_bytes() == b"not an image"
    assert rows[0]["class_names"] == '["cat"]' and rows[0]["classes"] == "[1]" and rows[1]["boxes_ymin_xmin_ymax_xmax"] == "[]"
    assert [caption for _, caption in tiles] == [["#0 1 box"], ["#1 0 boxes"]]
    assert tiles[0][0][:8] == b"\x89PNG\r\n\x1a\n" and tiles[1][0] == b"not an image"  # undrawable: kept as stored


def test_instance_masks_are_filled_in_their_box_colour():
    from tfrecorder.rows.instance_masks import encode_png

    image = encode_image(Image.fromarray(np.zeros((20, 20, 3), np.uint8)), "PNG")
    mask = np.zeros((20, 20), np.uint8)
    mask[:10, :10] = 1
    drawn = Image.open(io.BytesIO(draw_boxes(image, [(0.0, 0.0, 0.5, 0.5)], ["cat"], 40, [encode_png(mask)])))
    inside, outside = np.asarray(drawn.convert("RGB"))[12, 12], np.asarray(drawn.convert("RGB"))[30, 30]
    assert inside.sum() > 0 and outside.sum() == 0
