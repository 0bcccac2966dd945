"""The value a conversion returns: dict-like, with attributes, and readable when printed."""
from __future__ import annotations

from typing import Any, Iterator, Mapping

from tfrecorder.splits import SPLITS


class ConversionResult(Mapping[str, Any]):
    """`result["tfrecord_dir"]` and `result.tfrecord_dir` both work; `repr` summarises the job."""

    def __init__(self, **fields: Any) -> None:
        self._fields = dict(fields)

    @classmethod
    def from_metadata(cls, tfrecord_dir: str, job_id: str, metadata: Mapping[str, Any], elapsed: float) -> "ConversionResult":
        splits = metadata.get("splits", {})
        written = {split: splits[split]["records"] for split in SPLITS if split in splits}
        return cls(
            tfrecord_dir=tfrecord_dir,
            job_id=job_id,
            rows_in=metadata["rows_in"],
            written=written,
            discarded=metadata["discarded"],
            discard_reasons=dict(metadata.get("discard_reasons", {})),
            bytes_written=sum(info["bytes"] for info in splits.values()),
            elapsed_seconds=round(elapsed, 3),
            metadata=dict(metadata),
        )

    def __getitem__(self, key: str) -> Any:
        return self._fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_fields"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        f = self._fields
        counts = ", ".join(f"{split}={n}" for split, n in f.get("written", {}).items()) or "none"
        lines = [
            f"ConversionResult({f['job_id']})",
            f"  tfrecord_dir: {f['tfrecord_dir']}",
            f"  rows in: {f.get('rows_in')}  written: {counts}  discarded: {f.get('discarded')}",
        ]
        if f.get("discard_reasons"):
            reasons = ", ".join(f"{reason} ({n})" for reason, n in f["discard_reasons"].items())
            lines.append(f"  discard reasons: {reasons}")
        if "bytes_written" in f:
            lines.append(f"  bytes written: {f['bytes_written']:,}  elapsed: {f['elapsed_seconds']:.1f} s")
        return "\n".join(lines)
