"""Cheap structural checks that predict whether TensorFlow's decoders will accept an image.

A full decode costs ~1.5 ms for a 500×375 JPEG; these walks over the file's markers or chunks cost a
few microseconds. Fuzzing shows what they must catch: TensorFlow's JPEG decoder fails on structural
damage (unknown markers, missing scan, unsupported coding process, truncation) and tolerates damage
inside the entropy-coded data; libpng in TensorFlow rejects any chunk whose CRC does not match.
Each function returns None for a sound file, else the reason it is not.
"""
from __future__ import annotations

import re
import struct
import zlib
from typing import Optional

# Markers with a length-prefixed segment that libjpeg-turbo accepts before/between scans.
_SOF_SUPPORTED = {0xC0, 0xC1, 0xC2}  # baseline, extended sequential, progressive (Huffman)
_SOF_UNSUPPORTED = {0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
_SEGMENTS = {0xC4, 0xCC, 0xDB, 0xDC, 0xDD, 0xDE, 0xDF, 0xFE} | set(range(0xE0, 0xF0))
_STANDALONE = set(range(0xD0, 0xD8)) | {0x01}
_SKIPPABLE = set(range(0xE0, 0xF0)) | {0xFE}  # APPn and COM: application data libjpeg only skips
# The scan data runs to the end of the file. TensorFlow still decodes it if every block is there (only
# the end-of-image marker was lost); only a decode can tell, so callers decode such files.
JPEG_EOI_MISSING = "truncated image: JPEG end-of-image marker missing"


# A marker: 0xFF followed by anything but stuffing (0x00), fill (0xFF) or a restart marker (RSTn).
_MARKER = re.compile(rb"\xff[^\x00\xff\xd0-\xd7]")


def _next_marker(data: bytes, pos: int) -> int:
    """Index of the first marker at or after `pos`, or -1 (libjpeg skips anything in between)."""
    found = _MARKER.search(data, pos)
    return found.start() if found else -1


def jpeg_structure_error(data: bytes) -> Optional[str]:
    """Walk the JPEG's markers from SOI to EOI; None when TensorFlow can decode the structure.

    A sequential JPEG passes once its scan ends, so the walk never rejects what TensorFlow decodes.
    """
    if data[:2] != b"\xff\xd8":
        return "corrupt image: JPEG start-of-image marker missing"
    pos, seen_frame, seen_scan, progressive = 2, False, False, False
    while True:
        if pos + 1 >= len(data):
            return "truncated image: JPEG ends before its end-of-image marker"
        if data[pos] != 0xFF or data[pos + 1] in (0x00, 0xFF):
            pos = _next_marker(data, pos)  # garbage or fill bytes between segments, as libjpeg allows
            if pos < 0:
                return "truncated image: JPEG end-of-image marker missing"
        marker = data[pos + 1]
        if marker == 0xD9:
            return None if seen_scan else "corrupt image: JPEG has no image scan"
        if marker in _STANDALONE:
            pos += 2
            continue
        if pos + 4 > len(data):
            return "truncated image: JPEG segment header cut off"
        length = struct.unpack(">H", data[pos + 2 : pos + 4])[0]
        end = pos + 2 + length
        if marker in _SKIPPABLE and (length < 2 or end > len(data)):
            pos = _next_marker(data, pos + 2)  # libjpeg skips application data and resynchronises
            if pos < 0:
                return "truncated image: JPEG end-of-image marker missing"
            continue
        if length < 2:
            return f"corrupt image: JPEG segment 0x{marker:02X} has an invalid length {length}"
        if end > len(data):
            return f"truncated image: JPEG segment 0x{marker:02X} runs past the end of the file"
        if marker in _SOF_UNSUPPORTED:
            return f"corrupt image: unsupported JPEG coding process (SOF 0x{marker:02X})"
        if marker in _SOF_SUPPORTED:
            seen_frame, progressive = True, marker == 0xC2
            pos = end
        elif marker == 0xDA:
            if not seen_frame:
                return "corrupt image: JPEG scan before frame header"
            seen_scan = True
            if not progressive and len(data) - 2 >= end and data.endswith(b"\xff\xd9"):
                return None  # the scan ends at a marker (at the latest this EOI): no need to scan for it
            pos = _next_marker(data, end)
            if pos < 0:
                return JPEG_EOI_MISSING
            if not progressive:
                # A sequential JPEG has one scan; TensorFlow stops once its blocks are decoded, so
                # whatever follows the scan's terminating marker does not matter.
                return None
        elif marker in _SEGMENTS:
            pos = end
        else:
            return f"corrupt image: unknown JPEG marker 0x{marker:02X} at byte {pos}"


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_structure_error(data: bytes) -> Optional[str]:
    """Check every chunk's length and CRC from IHDR to IEND (libpng rejects a bad CRC)."""
    if not data.startswith(_PNG_SIGNATURE):
        return "corrupt image: PNG signature missing"
    pos, first = len(_PNG_SIGNATURE), True
    while True:
        if pos + 12 > len(data):
            return "truncated image: PNG IEND chunk missing"
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        end = pos + 12 + length
        if end > len(data):
            return f"truncated image: PNG chunk {kind!r} runs past the end of the file"
        if first and kind != b"IHDR":
            return "corrupt image: PNG does not start with IHDR"
        (crc,) = struct.unpack(">I", data[end - 4 : end])
        if zlib.crc32(data[pos + 4 : end - 4]) != crc:
            return f"corrupt image: PNG chunk {kind.decode('latin-1')!r} fails its CRC check"
        if kind == b"IEND":
            return None
        pos, first = end, False
