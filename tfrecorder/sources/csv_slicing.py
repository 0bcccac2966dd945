"""Split a CSV file into byte ranges that workers parse in parallel, exactly as one sequential parse.

A byte offset can fall inside a quoted field that holds newlines, so a range cannot simply start at
its next newline. Python's csv module (the parser `tables.iter_csv_rows` uses) is inside quotes
exactly when the count of '"' bytes since the data start is odd (RFC 4180 escapes a quote as ""),
with one exception: a quote inside an unquoted field (`12" pipe`) is a literal character. Such a
quote is always an odd-length run of quotes preceded by something other than a separator while
outside quotes; each one found is a "flip" that corrects the parity from there on.

The plan runs in three steps, all but the middle one in parallel:
1. `read_scan` (per range): count the quotes and flips, and find the first record start under
   both hypotheses (range starts outside / inside quotes). Numpy does the byte work; once both starts
   are found, the range's later blocks are scanned for their quotes alone (a 16 MB range: 26 → 16 ms).
2. `plan_slices` (tiny, O(ranges)): prefix sums pick each range's true starting state, giving every
   range the byte slice [first record start, next range's first record start).
3. Each slice is parsed with the csv module (`tables.CsvRecords`); line numbers of malformed rows
   are fixed afterwards from the record count of every earlier slice.
The driver uses the same scan on the file's head (`header_end`, `last_record_end`, `record_count`).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Sequence

import numpy as np

from tfrecorder.sources.source_protocol import balanced_count

QUOTE, COMMA, CR, LF = 34, 44, 13, 10
RANGE_BYTES = 16 * 1024 * 1024  # bytes per range, scanned in SCAN_BLOCK_BYTES blocks; a range is one part of the
# job (what a worker reads, encodes and commits at once): each part costs a fixed amount (its pieces, its
# commit, its duplicate digests by bucket), so parts of 16 MB rather than 4 MB cut a CSV job's CPU time ~20%
MAX_RANGES = 20_000  # bigger files (over 320 GB) get bigger ranges, so the plan stays small
SCAN_BLOCK_BYTES = 512 * 1024  # a range is scanned in blocks of this size (numpy temporaries a few times it)
BOM = b"\xef\xbb\xbf"


@dataclasses.dataclass(frozen=True)
class ByteRange:
    index: int
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class RangeScan:
    """What one range tells the plan, for each hypothesis h (0: starts outside quotes, 1: inside)."""

    index: int
    quotes: int  # '"' bytes in [start, end)
    flips: tuple[int, int]  # literal-quote runs (mod 2) under each hypothesis
    first_record: tuple[Optional[int], Optional[int]]  # first record start in [start, end), or None


@dataclasses.dataclass(frozen=True)
class Slice:
    """Bytes [start, end) of the file hold whole records only; `index` orders slices in the file."""

    index: int
    start: int
    end: int


def byte_ranges(data_start: int, file_size: int, range_bytes: Optional[int] = None) -> list[ByteRange]:
    """Cut [data_start, file_size) into equal ranges of at most `range_bytes` (default RANGE_BYTES), as many
    as `balanced_count` gives (at most MAX_RANGES: bigger files get bigger ranges; a span of a few bytes,
    fewer than its ranges would be, has as many as ranges of the equal size fill)."""
    span = file_size - data_start
    if span <= 0:
        return []
    size = max(range_bytes or RANGE_BYTES, -(-span // MAX_RANGES))
    count = -(-span // size)
    count = min(balanced_count(count), MAX_RANGES)
    size = -(-span // count)
    starts = list(range(data_start, file_size, size))
    return [ByteRange(i, s, min(s + size, file_size)) for i, s in enumerate(starts)]


def _scan(previous: Optional[int], body: bytes, after: bytes, start: int, index: int,
          records: bool = True) -> RangeScan:
    """The range's scan; without `records` its quotes alone (its first record starts left None: what a
    scan needs of a block after the blocks where both hypotheses found theirs, `read_scan`)."""
    return _scan_all(previous, body, after, start, index, records)[0]


def _scan_all(previous: Optional[int], body: bytes, after: bytes, start: int,
              index: int, records: bool = True) -> tuple[RangeScan, list[np.ndarray]]:
    """The range's scan, and every record start (file offsets) under each hypothesis (none without
    `records`: then only its quotes are looked at, not its newlines)."""
    arr = np.frombuffer(body, dtype=np.uint8)
    n = len(arr)
    if records:
        marks = np.flatnonzero((arr == QUOTE) | (arr <= CR))  # the few bytes that matter (and other control bytes)
        marked = arr[marks]
        wanted = (marked == QUOTE) | (marked == LF) | (marked == CR)
        if not wanted.all():
            marks, marked = marks[wanted], marked[wanted]
        at_quote = marked == QUOTE
        quote_positions = marks[at_quote]
    else:
        quote_positions = np.flatnonzero(arr == QUOTE)
    quotes = len(quote_positions)
    lead_quote = previous == QUOTE
    # maximal runs of quotes that start inside this range, with their full length
    gaps = np.diff(quote_positions) != 1
    run_starts = quote_positions[np.concatenate(([not (lead_quote and quote_positions[0] == 0)], gaps))] \
        if quotes else quote_positions
    last_continues = quotes and quote_positions[-1] == n - 1 and bool(after) and after[0] == QUOTE
    run_ends = quote_positions[np.concatenate((gaps, [not last_continues]))] if quotes else quote_positions
    lead_length = 0
    if lead_quote and len(run_ends) and (not len(run_starts) or run_ends[0] < run_starts[0]):
        lead_length = int(run_ends[0]) + 1
        run_ends = run_ends[1:]
    elif lead_quote and n and quotes == n:
        lead_length = n
    in_body = np.empty(len(run_starts), dtype=np.int64)
    in_body[: len(run_ends)] = run_ends - run_starts[: len(run_ends)] + 1
    lengths = in_body.copy()
    if len(run_ends) < len(run_starts):  # the last run continues past the range end
        tail = _leading_quotes(after)
        in_body[-1] = n - run_starts[-1]
        lengths[-1] = in_body[-1] + tail
    quotes_before_run = lead_length + np.cumsum(in_body) - in_body
    prev_bytes = np.where(run_starts > 0, arr[np.maximum(run_starts - 1, 0)].astype(np.int16),
                          -1 if previous is None else previous)
    after_separator = (prev_bytes == -1) | (prev_bytes == COMMA) | (prev_bytes == CR) | (prev_bytes == LF)
    candidate = (lengths % 2 == 1) & ~after_separator  # literal quotes, if outside quotes there
    candidate_positions = run_starts[candidate]
    candidate_parity = quotes_before_run[candidate] % 2
    if not records:
        flips = tuple(len(_literal_quotes(candidate_positions, candidate_parity, h)) % 2 for h in (0, 1))
        return RangeScan(index, quotes, flips, (None, None)), []
    newlines = marks[~at_quote]
    # "\r\n" ends one record: a \r followed by \n is not a record end by itself
    next_bytes = np.where(newlines + 1 < n, arr[np.minimum(newlines + 1, n - 1)].astype(np.int16),
                          after[0] if after else -1)
    ends_record = ~((arr[newlines] == CR) & (next_bytes == LF))
    newlines = newlines[ends_record]
    cumulative = np.concatenate(([lead_length], lead_length + np.cumsum(in_body))).astype(np.int64)
    quotes_before_newline = cumulative[np.searchsorted(run_starts, newlines)]

    flips, starts = [0, 0], []
    for h in (0, 1):
        literal = _literal_quotes(candidate_positions, candidate_parity, h)
        flips[h] = len(literal) % 2
        inside = (h + quotes_before_newline + np.searchsorted(literal, newlines)) % 2 == 1
        found = newlines[~inside] + 1
        if previous in (CR, LF) and h == 0 and not (previous == CR and n and arr[0] == LF):
            found = np.concatenate(([0], found))
        starts.append(start + found)
    return RangeScan(index, quotes, (flips[0], flips[1]), tuple(_first_below(s, start + n) for s in starts)), starts


def _first_below(starts: np.ndarray, end: int) -> Optional[int]:
    return int(starts[0]) if len(starts) and starts[0] < end else None


def _record_starts(previous: Optional[int], body: bytes, after: bytes, start: int) -> np.ndarray:
    """Every record start in (start, start + len(body)] and at `start` itself, for a range met outside quotes."""
    return _scan_all(previous, body, after, start, -1)[1][0]


def _literal_quotes(positions: np.ndarray, parity: np.ndarray, h: int) -> np.ndarray:
    """Positions of the candidate runs that are met outside quotes (each one flips the parity after it)."""
    by_parity = (positions[parity == 0], positions[parity == 1])
    found, flipped, at = [], 0, -1
    while True:
        pool = by_parity[(h + flipped) % 2]  # outside quotes when h + parity + flips so far is even
        k = int(np.searchsorted(pool, at, side="right"))
        if k == len(pool):
            return np.asarray(found, dtype=np.int64)
        at = int(pool[k])
        found.append(at)
        flipped ^= 1


def plan_slices(scans: Sequence[RangeScan], data_start: int, file_size: int) -> list[Slice]:
    """The slice of each range from every range's scan (any order): exact record boundaries."""
    ordered = sorted(scans, key=lambda s: s.index)
    firsts, h = [], 0
    for scan in ordered:
        firsts.append(scan.first_record[h])
        h = (h + scan.quotes + scan.flips[h]) % 2
    bounds = [file_size] * (len(ordered) + 1)
    for i in range(len(ordered) - 1, -1, -1):
        found = data_start if i == 0 else firsts[i]
        bounds[i] = found if found is not None else bounds[i + 1]
    return [Slice(scan.index, bounds[i], bounds[i + 1]) for i, scan in enumerate(ordered)]


def _leading_quotes(data) -> int:
    """How many '"' bytes `data` (bytes or a memoryview) starts with."""
    count, step = 0, 64
    while count < len(data):
        chunk = bytes(data[count : count + step])
        quotes = len(chunk) - len(chunk.lstrip(b'"'))
        count += quotes
        if quotes < len(chunk):
            break
        step *= 2
    return count


def read_scan(read_at: Callable[[int, int], bytes], byte_range: ByteRange, data_start: int,
              file_size: int) -> RangeScan:
    """Scan one range, reading it (plus one byte either side, and any quote run crossing its end).

    The range is scanned in blocks of SCAN_BLOCK_BYTES (composed like ranges are), so numpy's
    temporaries stay a few times the block size.
    """
    first = byte_range.start - 1 if byte_range.start > data_start else byte_range.start
    block = read_at(first, byte_range.end + 1 - first)
    while (len(block) > byte_range.end - first and _leading_quotes(memoryview(block)[byte_range.end - first :])
           == len(block) - (byte_range.end - first) and first + len(block) < file_size):
        block += read_at(first + len(block), 64 * 1024)
    view = memoryview(block)
    scans: list[RangeScan] = []
    records = True  # until both hypotheses found their first record start, newlines are looked at too
    for start in range(byte_range.start, byte_range.end, SCAN_BLOCK_BYTES):
        end = min(start + SCAN_BLOCK_BYTES, byte_range.end)
        previous = block[start - first - 1] if start > first else None
        scans.append(_scan(previous, view[start - first : end - first], view[end - first :], start, byte_range.index,
                           records))
        records = records and None in _compose(byte_range.index, scans).first_record
    return _compose(byte_range.index, scans)


LOOKAHEAD_BYTES = 64 * 1024  # bytes after a range scanned for the next range's first record start


def outside_quotes_slice(read_at: Callable[[int, int], bytes], byte_range: ByteRange, scan: RangeScan,
                         data_start: int, file_size: int) -> Optional[Slice]:
    """The slice `plan_slices` gives `byte_range` when it and the next range start outside quotes (in a
    CSV whose quoted fields never hold a newline across a range end: nearly every one), from its scan
    and the first record start of the next range (found in its first LOOKAHEAD_BYTES); None when either
    start is not found. A guess a worker can act on before the plan exists: the plan's slice is the same
    one (same bytes, same index) exactly when the guess was right."""
    start = data_start if byte_range.start <= data_start else scan.first_record[0]
    if start is None:
        return None
    end = file_size
    if byte_range.end < file_size:
        ahead = ByteRange(byte_range.index + 1, byte_range.end, min(byte_range.end + LOOKAHEAD_BYTES, file_size))
        found = read_scan(read_at, ahead, data_start, file_size).first_record[0]
        end = found if found is not None or ahead.end < file_size else file_size
    return Slice(byte_range.index, start, end) if end is not None and end > start else None


def _compose(index: int, scans: Sequence[RangeScan]) -> RangeScan:
    """One scan for consecutive scans (in file order), as if their bytes had been scanned at once."""
    quotes = sum(scan.quotes for scan in scans)
    flips, firsts = [], []
    for h in (0, 1):
        state, found = h, None
        for scan in scans:
            if found is None:
                found = scan.first_record[state]
            state = (state + scan.quotes + scan.flips[state]) % 2
        flips.append((state - h - quotes) % 2)
        firsts.append(found)
    return RangeScan(index, quotes, (flips[0], flips[1]), (firsts[0], firsts[1]))


def header_end(head: bytes, complete: bool) -> Optional[int]:
    """Offset of the first data record in `head` (the file's first bytes), None if the header does not
    end inside it. `complete`: head is the whole file (then a header without newline ends at its end)."""
    skip = len(BOM) if head.startswith(BOM) else 0
    scan = _scan(None, head[skip:], b"", skip, 0)
    if scan.first_record[0] is not None:
        return scan.first_record[0]
    return len(head) if complete else None


def last_record_end(head: bytes, data_start: int) -> int:
    """The offset after the last complete record in `head` (the first bytes of a longer file)."""
    previous = head[data_start - 1] if data_start else None
    starts = _record_starts(previous, head[data_start:], b"", data_start)
    return int(starts[-1]) if len(starts) else data_start


def record_count(text: bytes, data_start: int) -> int:
    """Records (blank lines included) from `data_start` to the end of `text` (an unfinished last one too)."""
    previous = text[data_start - 1] if data_start else None
    starts = _record_starts(previous, text[data_start:], b"", data_start)
    return int(np.count_nonzero(starts < len(text))) if len(text) > data_start else 0
