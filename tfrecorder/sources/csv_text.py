"""How a CSV's bytes become text: its encoding, checked once, and bytes invalid in it marked, not fatal.

Every CSV reader (the driver's sample, the row-wise and column-wise slice readers, a gzip stream)
decodes with the `INVALID` error handler: each byte that is not valid text in the source's encoding
becomes one lone surrogate (U+DC00 + the byte), which no valid text decodes to. The csv module parses
such text as usual, so records and line numbers stay exactly those of the file, and a record holding a
marked byte is discarded with its line (`invalid text: line N: ...`) instead of failing the job.

Record boundaries are found by scanning bytes (tfrecorder.sources.csv_slicing) only in encodings where
'"', ',', CR and LF are always those single bytes and no other character contains them: UTF-8 and the
single-byte encodings that agree with ASCII on them (latin-1, cp1252, ...). A file in any other
encoding (UTF-16, Shift JIS, ...) is read as one part.
"""
from __future__ import annotations

import codecs
import functools
import re
from typing import Optional, Sequence

DEFAULT_ENCODING = "utf-8"
INVALID = "tfrecorder.invalid_text"  # the error handler every CSV reader decodes with
_MARKED = re.compile("[\udc00-\udcff]")
_SEPARATORS = '"\r\n,'


def _mark_invalid(error: UnicodeDecodeError) -> tuple[str, int]:
    return "".join(chr(0xDC00 + byte) for byte in error.object[error.start:error.end]), error.end


codecs.register_error(INVALID, _mark_invalid)


def check_encoding(encoding: object) -> str:
    """The codec's canonical name (e.g. 'utf-8', 'iso8859-1'); ValueError unless it names a text encoding."""
    if not isinstance(encoding, str):
        raise ValueError(f"encoding must be the name of a text encoding such as 'utf-8', got {encoding!r}")
    try:
        "".encode(encoding)  # LookupError for unknown codecs and for non-text ones (rot13, base64)
    except LookupError:
        raise ValueError(f"encoding {encoding!r} is not a text encoding Python knows (e.g. 'utf-8', 'latin-1', "
                         "'utf-16')") from None
    return codecs.lookup(encoding).name


def stream_codec(encoding: str) -> str:
    """The codec for text read from the file's first byte: UTF-8 skips a byte-order mark (utf-8-sig)."""
    return "utf-8-sig" if codecs.lookup(encoding).name == "utf-8" else encoding


@functools.lru_cache(maxsize=None)
def byte_scannable(encoding: str) -> bool:
    """Whether records can be found by scanning bytes (UTF-8, or a single-byte encoding ASCII-compatible on
    '"', ',', CR and LF); otherwise a file is read as one part."""
    if codecs.lookup(encoding).name in ("utf-8", "utf-8-sig"):
        return True
    decoder = codecs.getincrementaldecoder(encoding)(INVALID)
    single_byte = all(len(decoder.decode(bytes([byte]))) == 1 for byte in range(256))
    return single_byte and _SEPARATORS.encode("latin-1").decode(encoding, INVALID) == _SEPARATORS


def decode(data: bytes, encoding: str, final: bool = True) -> str:
    """Bytes as text, invalid bytes marked; with final=False an unfinished last character is left out."""
    return codecs.getincrementaldecoder(encoding)(INVALID).decode(data, final)


def has_invalid(text: str) -> bool:
    """Whether decoded text holds a byte that was not valid in its encoding."""
    return not text.isascii() and _MARKED.search(text) is not None


def readable(value: str) -> str:
    """Decoded text with each invalid byte written as \\xNN (for discarded.csv and messages)."""
    return _MARKED.sub(lambda found: f"\\x{ord(found.group()) - 0xDC00:02x}", value)


def invalid_bytes(value: str) -> str:
    """The first invalid bytes marked in decoded text, as `0xff 0xfe` (at most eight)."""
    return " ".join(f"0x{ord(c) - 0xDC00:02x}" for c in _MARKED.findall(value)[:8])


def invalid_fields(fields: Sequence[str], header: Sequence[str], encoding: str) -> Optional[str]:
    """None when every field is valid text; else what is wrong, naming the first bad field's bytes and column.
    (Marks are never ASCII: readers skip the call for a record whose text is all ASCII.)"""
    if not has_invalid("".join(fields)):
        return None
    position, value = next((i, f) for i, f in enumerate(fields) if has_invalid(f))
    found = invalid_bytes(value)
    column = repr(header[position]) if position < len(header) else f"#{position + 1}"
    return f"byte(s) {found} in column {column} are not valid {codecs.lookup(encoding).name}"


def readable_row(header: Sequence[str], fields: Sequence[str]) -> dict[str, Optional[str]]:
    """A record holding invalid bytes as discarded.csv shows it: every value readable (bad bytes as \\xNN)."""
    return {name: (readable(value) if value != "" else None) for name, value in zip(header, fields)}
