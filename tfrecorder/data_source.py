"""`tfrecorder.data_source()`: random access to a converted split without TensorFlow.

    ds = tfrecorder.data_source(job_dir, "train", decode_images=True)
    len(ds); ds[0]; ds[10:20]; ds[[5, 3, 8]]

Record i is the i-th record of a sequential read (shards in metadata.json order, records in file
order). Each lookup reads one record by a byte-range read located by the job's index files
(`index/<shard>.index`, written during conversion), checks both CRCs and decodes the Example with
the TensorFlow-free parser. The object holds only the job's metadata and the index of each shard it
has touched, pickles without them (worker processes reload what they use), and is a
`torch.utils.data.Dataset` / Grain `RandomAccessDataSource` by protocol (`__len__`, `__getitem__`).

Shards without an index (jobs from before index files, or damaged ones) are indexed by reading their
record headers once. Gzip jobs have no random access: a gzip shard is decompressed whole into memory
when first touched (one at a time), which is slow; convert without compression to read at random.
"""
from __future__ import annotations

import bisect
import gzip
import os
import threading
from typing import Any, Iterator, Optional, Sequence, Union

import numpy as np

from tfrecorder.format import record_index
from tfrecorder.io import storage
from tfrecorder.errors import CorruptDataError
from tfrecorder.format.finished_job import JobInfo
from tfrecorder.format.typed_values import decode_image, record_values
from tfrecorder.reading.dataset_masks import decode_dataset_values, is_dataset_features
from tfrecorder.format.framing import read_records, unframe_record

Index = Union[int, slice, Sequence[int], np.ndarray]


class DataSource:
    """Random access to the records of one split; see the module docstring."""

    def __init__(self, tfrecord_dir: str, split: str, *, decode_images: bool = False,
                 channels: Optional[int] = None) -> None:
        if channels not in (None, 1, 3, 4):
            raise ValueError(f"channels must be None (as stored), 1, 3 or 4, got {channels!r}")
        self._job = JobInfo.read(tfrecord_dir)
        self.split = self._job.split_name(split)
        self.decode_images = bool(decode_images)
        self.channels = channels
        shards = self._job.metadata["splits"][self.split]["shards"]
        self._shards = shards
        self._paths = self._job.shard_paths(self.split)
        self._starts = [0]
        for shard in shards:
            self._starts.append(self._starts[-1] + int(shard["records"]))
        self._reset()

    def _reset(self) -> None:
        self._indexes: dict[int, np.ndarray] = {}
        self._files: dict[int, Any] = {}
        self._gzip_shard: tuple[int, list[bytes]] = (-1, [])
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        for name in ("_indexes", "_files", "_gzip_shard", "_lock"):
            state.pop(name)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._reset()

    def __del__(self) -> None:
        for handle in getattr(self, "_files", {}).values():
            handle.close()

    def __len__(self) -> int:
        return self._starts[-1]

    def __repr__(self) -> str:
        return f"DataSource({self._job.tfrecord_dir!r}, {self.split!r}: {len(self)} records in {len(self._paths)} shards)"

    @property
    def features(self) -> dict[str, dict]:
        """metadata.json's feature spec: what each record's dict holds (plus `<name>_missing` flags)."""
        return dict(self._job.features)

    def __getitem__(self, key: Index) -> Union[dict[str, Any], list[dict[str, Any]]]:
        if isinstance(key, slice):
            return [self._get(i) for i in range(*key.indices(len(self)))]
        if isinstance(key, (int, np.integer)):
            return self._get(int(key))
        if isinstance(key, (list, tuple, np.ndarray)):
            return self.__getitems__(key)
        raise TypeError(f"data source indices must be integers, slices or lists of integers, not {type(key).__name__}")

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """A batch of records at once (PyTorch's DataLoader calls this when it exists)."""
        return [self._get(int(i)) for i in indices]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Every record in order, read sequentially (much faster than indexing one by one)."""
        for path in self._paths:
            with self._job.open_shard(path) as stream:
                for record in read_records(stream):
                    yield self._values(record)

    def _get(self, index: int) -> dict[str, Any]:
        size = len(self)
        if not -size <= index < size:
            raise IndexError(f"record {index} is out of range for {size} records")
        index %= size
        shard = bisect.bisect_right(self._starts, index) - 1
        return self._values(self._record(shard, index - self._starts[shard]))

    def _values(self, record: bytes) -> dict[str, Any]:
        values = record_values(record, self._job.features)
        if self.decode_images and is_dataset_features(self._job.features):  # COCO, VOC, YOLO: masks too
            return decode_dataset_values(values, self.channels)
        if self.decode_images:
            for prefix in self._job.image_prefixes:
                values[prefix] = decode_image(values[prefix], self.channels)
        return values

    def _record(self, shard: int, position: int) -> bytes:
        if self._job.compression == "gzip":
            return self._gzip_records(shard)[position]
        offset, length = (int(v) for v in self._index(shard)[position])
        framed = self._read(shard, offset, length)
        return unframe_record(framed, offset)

    def _read(self, shard: int, offset: int, length: int) -> bytes:
        path = self._paths[shard]
        if storage.is_remote(path):
            return storage.read_range(path, offset, length)
        handle = self._files.get(shard)
        if handle is None:
            with self._lock:
                handle = self._files.setdefault(shard, open(path, "rb"))
        return os.pread(handle.fileno(), length, offset)

    def _index(self, shard: int) -> np.ndarray:
        entries = self._indexes.get(shard)
        if entries is None:
            entries = self._load_index(shard)
            if len(entries) != self._shards[shard]["records"]:
                raise CorruptDataError(f"{self._paths[shard]}: index lists {len(entries)} records, "
                                       f"metadata.json says {self._shards[shard]['records']}")
            self._indexes[shard] = entries
        return entries

    def _load_index(self, shard: int) -> np.ndarray:
        name = self._shards[shard].get("index_file")
        if name:
            path = self._job.path(name)
            if storage.exists(path):
                return record_index.index_array(storage.read_bytes(path))
        with storage.open_read(self._paths[shard]) as stream:  # no index file: read the record headers once
            return np.array(list(record_index.scan_index(stream)), dtype=np.int64).reshape(-1, 2)

    def _gzip_records(self, shard: int) -> list[bytes]:
        if self._gzip_shard[0] != shard:
            with storage.open_read(self._paths[shard]) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as stream:
                self._gzip_shard = (shard, list(read_records(stream)))
        return self._gzip_shard[1]


def data_source(tfrecord_dir: str, split: str, *, decode_images: bool = False,
                channels: Optional[int] = None) -> DataSource:
    """Random access to one split of a converted job, without TensorFlow: `len(ds)`, `ds[i]`, slices,
    lists of indices. Records are dicts of NumPy / Python values named as in metadata.json; images
    are encoded bytes, or uint8 [H, W, C] arrays with `decode_images=True` (C as stored, like `load()`,
    unless `channels` is 1, 3 or 4). Works on local and gs:// jobs; picklable for worker processes.
    """
    return DataSource(tfrecord_dir, split, decode_images=decode_images, channels=channels)
