"""Synthetic detection scenes written as a COCO file, a Pascal VOC folder and a YOLO folder.

A scene is an image with objects, each an exact 0/1 mask (an ellipse or a rectangle) and a class name;
its box is the mask's bounding box in pixel edges. The same scenes rendered in every format must convert
to the same boxes, classes and masks. COCO masks are written as RLE by pycocotools (its own encoder) or
as polygons; VOC masks as SegmentationObject / SegmentationClass palette PNGs.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Optional

import numpy as np
from PIL import Image, ImageDraw

from tfrecorder.rows.dataset_records import VOC_CLASSES
from tfrecorder.sample_data import photo_array

CLASSES = ("cat", "dog", "person")  # all VOC classes: VOC ids are the OD API's Pascal ids


@dataclasses.dataclass
class SceneObject:
    label: str
    mask: np.ndarray  # uint8 [H, W] of 0/1

    @property
    def box(self) -> tuple[int, int, int, int]:
        """(xmin, ymin, xmax, ymax) pixel edges of the mask."""
        ys, xs = np.nonzero(self.mask)
        return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


@dataclasses.dataclass
class Scene:
    name: str
    image: np.ndarray  # uint8 [H, W, 3]
    objects: list[SceneObject]
    split: str = "train"

    @property
    def height(self) -> int:
        return self.image.shape[0]

    @property
    def width(self) -> int:
        return self.image.shape[1]


def scenes(count: int = 4, size: tuple[int, int] = (48, 64), seed: int = 0) -> list[Scene]:
    """`count` scenes of 1-3 non-overlapping objects each; the last one of each four has none."""
    rng = np.random.default_rng(seed)
    h, w = size
    made = []
    for index in range(count):
        objects = []
        for k in range(0 if index % 4 == 3 else 1 + index % 3):
            canvas = Image.new("L", (w, h), 0)
            x0 = 2 + k * (w // 3)
            y0 = int(rng.integers(1, h // 3))
            shape = [x0, y0, x0 + w // 3 - 6, y0 + h // 2]
            if (index + k) % 2:
                ImageDraw.Draw(canvas).ellipse(shape, fill=1)
            else:
                ImageDraw.Draw(canvas).rectangle(shape, fill=1)
            objects.append(SceneObject(CLASSES[(index + k) % len(CLASSES)], np.asarray(canvas, dtype=np.uint8)))
        made.append(Scene(f"scene{index:03d}", photo_array(h, w, seed + index), objects,
                          "val" if index % 4 == 1 else "train"))
    return made


def _save(image: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image).save(path, format="PNG")  # lossless: tests compare pixels


def rle_of(mask: np.ndarray, compressed: bool = True) -> dict:
    """The COCO RLE of a mask as pycocotools writes it (compressed string), or as a counts list."""
    from pycocotools import mask as mask_utils

    rle = mask_utils.encode(np.asfortranarray(mask))
    if compressed:
        return {"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode("ascii")}
    flat = mask.T.reshape(-1)
    changes = np.flatnonzero(np.diff(np.concatenate([[0], flat, [2]])) != 0)
    counts = np.diff(np.concatenate([[0], changes])).tolist()
    counts[-1] = len(flat) - sum(counts[:-1])
    return {"size": list(mask.shape), "counts": [int(c) for c in counts if c >= 0]}


def coco_document(items: list[Scene], masks: str = "rle", first_id: int = 1) -> dict:
    """A COCO instances document of the scenes (masks: 'rle', 'counts', 'polygon' or 'none');
    category ids are sparse (COCO's are: 1..90 with gaps)."""
    category_ids = {name: 3 * i + 2 for i, name in enumerate(CLASSES)}
    images, annotations = [], []
    next_id = 100
    for number, scene in enumerate(items, start=first_id):
        images.append({"id": number, "file_name": f"{scene.name}.png", "width": scene.width, "height": scene.height})
        for obj in scene.objects:
            x0, y0, x1, y1 = obj.box
            annotation = {"id": next_id, "image_id": number, "category_id": category_ids[obj.label],
                          "bbox": [x0, y0, x1 - x0, y1 - y0], "iscrowd": 0, "area": float(obj.mask.sum())}
            if masks == "rle":
                annotation["segmentation"] = rle_of(obj.mask)
            elif masks == "counts":
                annotation["segmentation"] = rle_of(obj.mask, compressed=False)
            elif masks == "polygon":
                annotation["segmentation"] = [[x0, y0, x1 - 1, y0, x1 - 1, y1 - 1, x0, y1 - 1]]
            annotations.append(annotation)
            next_id += 1
    categories = [{"id": i, "name": name, "supercategory": "animal"} for name, i in category_ids.items()]
    return {"info": {"description": "synthetic"}, "licenses": [], "images": images, "annotations": annotations,
            "categories": categories}


def write_coco(root: Path, items: list[Scene], masks: str = "rle", name: str = "train",
               document: Optional[dict] = None) -> Path:
    """COCO's layout: root/annotations/instances_<name>.json and root/<name>/<scene>.png."""
    for scene in items:
        _save(scene.image, root / name / f"{scene.name}.png")
    path = root / "annotations" / f"instances_{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document if document is not None else coco_document(items, masks)))
    return path


def _voc_palette() -> list[int]:
    palette = [0] * 768
    for index in range(256):
        palette[3 * index:3 * index + 3] = [(index * 37) % 256, (index * 91) % 256, (index * 53) % 256]
    return palette


def _palette_png(values: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.frombytes("P", (values.shape[1], values.shape[0]), values.astype(np.uint8).tobytes())
    image.putpalette(_voc_palette())
    image.save(path, format="PNG")


def write_voc(root: Path, items: list[Scene], segmentation: bool = True) -> Path:
    """Pascal VOC's layout: Annotations/*.xml, JPEGImages/ (PNG bytes here: lossless), ImageSets/Main,
    and with `segmentation` SegmentationObject/ + SegmentationClass/ palette PNGs and ImageSets/Segmentation."""
    sets: dict[str, list[str]] = {"train": [], "val": []}
    for scene in items:
        sets["val" if scene.split == "val" else "train"].append(scene.name)
        _save(scene.image, root / "JPEGImages" / f"{scene.name}.jpg")
        objects = "".join(
            f"<object><name>{obj.label}</name><pose>Frontal</pose><truncated>{k % 2}</truncated>"
            f"<difficult>{int(k == 2)}</difficult><bndbox><xmin>{obj.box[0]}</xmin><ymin>{obj.box[1]}</ymin>"
            f"<xmax>{obj.box[2]}</xmax><ymax>{obj.box[3]}</ymax></bndbox></object>"
            for k, obj in enumerate(scene.objects))
        xml = (f"<annotation><folder>VOC</folder><filename>{scene.name}.jpg</filename><size><width>{scene.width}"
               f"</width><height>{scene.height}</height><depth>3</depth></size>"
               f"<segmented>{int(segmentation)}</segmented>{objects}</annotation>")
        (root / "Annotations").mkdir(parents=True, exist_ok=True)
        (root / "Annotations" / f"{scene.name}.xml").write_text(xml)
        if segmentation:
            instance = np.zeros((scene.height, scene.width), dtype=np.uint8)
            semantic = np.zeros_like(instance)
            for k, obj in enumerate(scene.objects, start=1):
                instance[obj.mask == 1] = k
                semantic[obj.mask == 1] = VOC_CLASSES.index(obj.label) + 1
            _palette_png(instance, root / "SegmentationObject" / f"{scene.name}.png")
            _palette_png(semantic, root / "SegmentationClass" / f"{scene.name}.png")
    (root / "ImageSets" / "Main").mkdir(parents=True, exist_ok=True)
    for split, names in sets.items():
        (root / "ImageSets" / "Main" / f"{split}.txt").write_text("".join(n + "\n" for n in names))
    (root / "ImageSets" / "Main" / "trainval.txt").write_text("".join(n + "\n" for n in sets["train"] + sets["val"]))
    return root


def write_yolo(root: Path, items: list[Scene], polygons: bool = False) -> Path:
    """Ultralytics' layout: data.yaml (names, train/val paths), images/<split>/, labels/<split>/*.txt."""
    for scene in items:
        split = "val" if scene.split == "val" else "train"
        _save(scene.image, root / "images" / split / f"{scene.name}.png")
        lines = []
        for obj in scene.objects:
            x0, y0, x1, y1 = obj.box
            cls = CLASSES.index(obj.label)
            if polygons:
                corners = [x0, y0, x1, y0, x1, y1, x0, y1]
                lines.append(f"{cls} " + " ".join(f"{v / (scene.width if i % 2 == 0 else scene.height):.6f}"
                                                   for i, v in enumerate(corners)))
            else:
                lines.append(f"{cls} {(x0 + x1) / 2 / scene.width:.6f} {(y0 + y1) / 2 / scene.height:.6f} "
                             f"{(x1 - x0) / scene.width:.6f} {(y1 - y0) / scene.height:.6f}")
        label = root / "labels" / split / f"{scene.name}.txt"
        label.parent.mkdir(parents=True, exist_ok=True)
        label.write_text("".join(line + "\n" for line in lines))
    names = "".join(f"  {i}: {name}\n" for i, name in enumerate(CLASSES))
    (root / "data.yaml").write_text(f"path: .\ntrain: images/train\nval: images/val\nnames:\n{names}")
    return root
