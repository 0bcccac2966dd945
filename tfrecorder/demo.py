"""`make demo`: generate a small image dataset, convert it, read it back, print a summary."""
from __future__ import annotations

import os
import sys

DEMO_DIR = os.path.join(os.getcwd(), "demo_output")


def main() -> int:
    import tfrecorder
    from tfrecorder.sample_data import make_sample_dataset

    csv_path = make_sample_dataset(os.path.join(DEMO_DIR, "sample"), count=60)
    print(f"sample dataset: {csv_path} (60 generated JPEG/PNG images)")
    result = tfrecorder.convert(str(csv_path), os.path.join(DEMO_DIR, "tfrecords"), job_label="demo")
    print(result)
    print(read_back(result["tfrecord_dir"]))
    return 0


def read_back(tfrecord_dir: str) -> str:
    """Load every split with tfrecorder.load and decode each image: proof the shards are usable."""
    import tfrecorder
    from tfrecorder.format.finished_job import JobInfo

    job = JobInfo.read(tfrecord_dir)
    lines = ["read back with tfrecorder.load:"]
    for split, dataset in tfrecorder.load(tfrecord_dir, deterministic=True).items():
        shapes, labels = set(), []
        for example in dataset:
            shapes.add(tuple(example["image"].shape))
            labels.append(job.label_name("label", int(example["label"])))
        counts = {label: labels.count(label) for label in sorted(set(labels))}
        lines.append(f"  {split}: {len(labels)} records decoded, image shapes {sorted(shapes)}, labels {counts}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
