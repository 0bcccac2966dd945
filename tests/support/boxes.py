"""Detection test data: photos of known sizes and a box table that holds every kind of box problem."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from PIL import Image

from tfrecorder.sample_data import encode_image, photo_array

SIZES = {"a.jpg": (40, 60), "b.png": (50, 80), "c.jpg": (30, 30), "d.jpg": (20, 40), "e.jpg": (20, 20)}  # (h, w)


def write_photos(directory: Path) -> dict[str, Path]:
    """Write the images of SIZES plus an undecodable broken.jpg into `directory`; returns name → path."""
    paths = {}
    for i, (name, (h, w)) in enumerate(SIZES.items()):
        fmt = "PNG" if name.endswith(".png") else "JPEG"
        paths[name] = directory / name
        paths[name].write_bytes(encode_image(Image.fromarray(photo_array(h, w, i)), fmt))
    (directory / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really")
    paths["broken.jpg"] = directory / "broken.jpg"
    return paths


def box_table(photos) -> pd.DataFrame:
    a, b, c, d, e = (str(photos[n]) for n in ("a.jpg", "b.png", "c.jpg", "d.jpg", "e.jpg"))
    rows = [
        ("TRAIN", a, "dog", 0.1, 0.2, 0.5, 0.6),
        ("TRAIN", a, "cat", 0.0, 0.0, 1.0, 1.0),
        ("TRAIN", a, "cat", 0.7, 0.2, 0.3, 0.9),  # xmin > xmax: this box only is discarded
        ("train", b, "cat", 0.25, 0.5, 0.75, 1.0),
        ("TRAIN", b, "bird", "n/a", 0.5, 0.75, 1.0),  # not a number
        ("VALIDATION", c, None, None, None, None, None),  # an image without boxes
        ("TEST", d, "cat", 0.1, 0.1, 0.2, 0.2),
        ("TRAIN", d, "dog", 0.1, 0.1, 0.2, 0.2),  # d: conflicting splits → both rows discarded
        ("TEST", e, "owl", 0.1, 0.1, 0.2, 0.2),  # owl is not a TRAIN label
        ("TEST", e, "dog", 0.1, 0.1, 1.5, 0.2),  # outside [0, 1]
        ("TRAIN", str(photos["broken.jpg"]), "cat", 0.1, 0.1, 0.2, 0.2),  # the image itself is bad
    ]
    return pd.DataFrame(rows, columns=["split", "image_uri", "label", "xmin", "ymin", "xmax", "ymax"])
