"""tfrecorder: DataFrame / CSV / image folder → sharded TFRecords with Apache Beam."""
import re
from pathlib import Path

from setuptools import find_packages, setup

VERSION = re.search(r'__version__ = "([^"]+)"', Path(__file__).with_name("tfrecorder").joinpath("core", "version.py").read_text()).group(1)

INSTALL_REQUIRES = [
    "pandas>=2.0",  # 2.x and 3.x; tfrecorder keeps Beam's DataFrame layer (pandas < 2.4 only) out of its pipelines
    "tensorflow>=2.16",
    "apache-beam[gcp]>=2.60",
    "google-cloud-storage>=2.10",
    "pillow>=10.0",  # header-only image probing and optional resizing
    "google-crc32c>=1.5",  # TFRecord checksums at memory speed, without TensorFlow in workers
    "pyarrow>=14",  # DataFrames are staged as Parquet for the pipeline (also a Beam dependency)
    "numpy>=1.24",
    "pyyaml>=6.0",  # `tfrecorder convert --schema schema.yaml` (JSON needs nothing extra)
    "tqdm>=4.60",  # progress bars that render in Jupyter and terminals alike (tqdm.auto)
    "ijson>=3.2",  # COCO files streamed item by item (COCO 2017 train is one 450 MB JSON line)
]

EXTRAS = {
    "test": [
        "pytest>=8",
        "hypothesis>=6.100",
        "gcp-storage-emulator>=2024.8.3",
        "nbclient>=0.10",
        "nbformat>=5.10",
        "ipykernel>=6.29",
        "tensorflow-datasets>=4.9,<4.10",  # tests that TFDS reads job directories as they are
        "tensorflow-metadata>=1.14",  # parses statistics.pb in tests (tfrecorder writes its wire format itself)
        "tfrecord>=1.14",  # tests that a third-party reader uses our index files (DALI's format)
        "pycocotools>=2.0",  # tests build COCO RLE masks with COCO's own encoder
    ],
}

setup(
    name="tfrecorder",
    version=VERSION,
    description="Convert DataFrames, CSVs and image folders into sharded TFRecords with Apache Beam",
    long_description=Path(__file__).with_name("README.md").read_text(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["tfrecorder", "tfrecorder.*", "beam_pipelines", "beam_pipelines.*"]),
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["tfrecorder=tfrecorder.cli:main"]},
)
