"""The value a conversion returns: dict-like, with attributes, and readable when printed."""
from __future__ import annotations

import sys
import time
from typing import Any, Callable, Iterator, Mapping, Optional, Union

from tfrecorder.errors import DataflowJobError  # raised by wait(); `tfrecorder.result.DataflowJobError` is documented (docs/cli.md)
from tfrecorder.core.splits import SPLITS


class ConversionResult(Mapping[str, Any]):
    """`result["tfrecord_dir"]` and `result.tfrecord_dir` both work; `repr` summarises the job."""

    def __init__(self, **fields: Any) -> None:
        self._fields = dict(fields)

    @classmethod
    def from_metadata(cls, tfrecord_dir: str, job_id: str, metadata: Mapping[str, Any], elapsed: float) -> "ConversionResult":
        splits = metadata.get("splits", {})
        written = {split: splits[split]["records"] for split in SPLITS if split in splits}
        bytes_written = sum(info["bytes"] for info in splits.values())
        upgraded = metadata.get("upgraded_from")  # tfrecorder.upgrade(): bytes before and after
        sizes = {"input_bytes": upgraded["input_bytes"], "output_bytes": bytes_written} if upgraded else {}
        carried = metadata.get("resumed")  # issue 27: a continued job says what it did not redo
        sizes.update({"resumed": True, "rows_carried_over": carried["rows_carried_over"],
                      "parts_carried_over": carried["parts_carried_over"]} if carried else {"resumed": False})
        return cls(
            tfrecord_dir=tfrecord_dir,
            job_id=job_id,
            rows_in=metadata["rows_in"],
            written=written,
            discarded=metadata["discarded"],
            discard_reasons=dict(metadata.get("discard_reasons", {})),
            bytes_written=bytes_written,
            validate=metadata.get("validate"),
            elapsed_seconds=round(elapsed, 3),
            metadata=dict(metadata),
            **sizes,
        )

    def __getitem__(self, key: str) -> Any:
        try:
            return self._fields[key]
        except KeyError:
            from tfrecorder.legacy.v2_compat import legacy_result_value  # TFRecorder 2.0's metrics, dataflow_url

            return legacy_result_value(self._fields, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_fields"][name]
        except KeyError:
            raise AttributeError(name) from None

    def _repr_html_(self) -> str:
        from tfrecorder.views import result_html

        page = result_html(self._fields)
        metadata = self._fields.get("metadata") or {}
        if metadata.get("splits") and "duplicates" in metadata:  # a job with statistics.json (issue 29)
            from tfrecorder.job_report import report

            try:
                page += report(str(self._fields["tfrecord_dir"])).fragment
            except (OSError, ValueError):  # the directory moved or was removed since: the counts still show
                pass
        return page

    def __repr__(self) -> str:
        f = self._fields
        counts = ", ".join(f"{split}={n}" for split, n in f.get("written", {}).items()) or "none"
        lines = [
            f"{type(self).__name__}({f['job_id']})",
            f"  tfrecord_dir: {f['tfrecord_dir']}",
            f"  rows in: {f.get('rows_in')}  written: {counts}  discarded: {f.get('discarded')}",
        ]
        if f.get("discard_reasons"):
            reasons = ", ".join(f"{reason} ({n})" for reason, n in f["discard_reasons"].items())
            lines.append(f"  discard reasons: {reasons}")
        if "bytes_written" in f:
            lines.append(f"  bytes written: {f['bytes_written']:,}  elapsed: {f['elapsed_seconds']:.1f} s")
        if f.get("resumed"):
            lines.append(f"  resumed: {f['rows_carried_over']:,} rows ({f['parts_carried_over']} parts) carried over")
        if f.get("validate"):
            lines.append(f"  image check: validate={f['validate']!r}")
        duplicates = (f.get("metadata") or {}).get("duplicates")
        near = (duplicates or {}).get("near") or {}
        if duplicates and (duplicates.get("groups") or near.get("groups")):
            from tfrecorder.rows.duplicate_groups import leak_warning

            lines.append(f"  duplicates: {duplicates['groups']} exact groups ({duplicates['rows']} rows), "
                         f"{near.get('groups', 0)} near-duplicate groups ({near.get('rows', 0)} rows); duplicates.csv")
            if leak_warning(duplicates):
                lines.append(f"  WARNING {leak_warning(duplicates)}")
        if "input_bytes" in f:
            ratio = f" ({f['input_bytes'] / f['output_bytes']:.1f}x smaller)" if f["output_bytes"] else ""
            lines.append(f"  upgraded from TFRecorder 2.0: {f['input_bytes']:,} bytes -> {f['output_bytes']:,} bytes{ratio}")
        lineage = (f.get("metadata") or {}).get("lineage")
        if lineage:  # a version made by tfrecorder.append
            added = ", ".join(f"{split}+{n}" for split, n in lineage.get("added", {}).get("records", {}).items())
            lines.append(f"  version {lineage.get('version')} of {lineage.get('parent', {}).get('job_name')}: "
                         f"added {added or 'no records'}")
        return "\n".join(lines)


Progress = Callable[[str, Optional[int], int], None]
TERMINAL_STATES = ("DONE", "FAILED", "CANCELLED", "UPDATED", "DRAINED")


def print_progress(state: str, processed: Optional[int], total: int) -> None:
    """The default progress display: one line on stderr per change."""
    done = "?" if processed is None else f"{processed:,}"
    percent = "" if processed is None or not total else f" ({100 * processed / total:.0f}%)"
    print(f"Dataflow job {state}: {done} / {total:,} rows processed{percent}", file=sys.stderr, flush=True)


class DataflowConversionResult(ConversionResult):
    """A conversion submitted to Dataflow, returned as soon as the job is submitted.

    Known at once: job_id, job_name, console_url, tfrecord_dir, state, rows_in (a DataFrame's length;
    for a CSV an estimate from the driver's sample, flagged by rows_in_estimated).
    `wait()` blocks until the job ends, reports progress, and then adds the final counts from the job's
    metadata.json exactly as a local ConversionResult has them.
    """

    def __init__(self, poll: Optional[Callable[[], tuple[str, Optional[int]]]], pipeline_result: Any,
                 **fields: Any) -> None:
        super().__init__(**fields)
        self._poll = poll  # → (Beam PipelineState name, rows processed so far or None)
        self._pipeline_result = pipeline_result
        self._submitted = time.monotonic()

    @classmethod
    def of(cls, job: Any, **fields: Any) -> "DataflowConversionResult":
        """The result of a submitted job (beam_pipelines.launches.dataflow_job.SubmittedJob), with the caller's own `fields`."""
        return cls(job.poll, job.pipeline_result, **job.fields, **fields)

    @property
    def pipeline_result(self) -> Any:
        """Beam's PipelineResult (for dry runs, `.job` holds the job request that was not sent)."""
        return self._pipeline_result

    def wait(self, poll_seconds: float = 15.0, progress: Union[bool, Progress] = True) -> "DataflowConversionResult":
        """Block until the job ends; raise DataflowJobError unless it is DONE; returns self, completed.

        Polls after 1 s, then doubling up to every `poll_seconds`. `progress`: True prints a line on
        stderr per change, a callable gets (state, rows processed or None, rows in), False is quiet.
        """
        if self._poll is None:
            raise DataflowJobError(f"no Dataflow job was submitted ({self['state']}): there is nothing to wait for")
        report = print_progress if progress is True else (progress or None)
        last, delay = None, min(1.0, poll_seconds)
        while True:
            state, processed = self._poll()
            self._fields["state"] = state
            if report and (state, processed) != last:
                report(state, processed, self["rows_in"])
                last = state, processed
            if state in TERMINAL_STATES:
                break
            time.sleep(delay)
            delay = min(delay * 2, poll_seconds)
        if state != "DONE":
            raise DataflowJobError(f"Dataflow job {self['job_id']} ended {state}; its logs: {self['console_url']}")
        from tfrecorder.format.metadata_file import JobMetadata

        final = ConversionResult.from_metadata(self["tfrecord_dir"], self["job_id"],
                                               JobMetadata.read(self["tfrecord_dir"]).document,
                                               time.monotonic() - self._submitted)
        self._fields.update(final)
        self._fields["rows_in_estimated"] = False
        return self

    def __repr__(self) -> str:
        f = self._fields
        if "written" in f:
            return super().__repr__() + f"\n  Dataflow job {f['job_name']}: {f['state']}  {f['console_url']}"
        lines = [f"{type(self).__name__}({f['job_id']})", f"  tfrecord_dir: {f['tfrecord_dir']} (when DONE)",
                 f"  Dataflow job {f['job_name']}: {f['state']}, {'~' if f.get('rows_in_estimated') else ''}"
                 f"{f['rows_in']:,} rows in"]
        if f.get("console_url"):
            lines.append(f"  console: {f['console_url']}")
        if f.get("template_location"):
            lines.append(f"  template: {f['template_location']}")
        return "\n".join(lines)
