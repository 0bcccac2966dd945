"""Byte-level mutations of image files for fuzzing (hypothesis strategies + applying them)."""
from __future__ import annotations

from hypothesis import strategies as st

mutation = st.tuples(st.sampled_from(["set", "delete", "insert"]), st.floats(0, 1), st.binary(min_size=1, max_size=16))
mutations = st.lists(mutation, min_size=1, max_size=6)


def mutate(data: bytes, changes) -> bytes:
    out = bytearray(data)
    for kind, where, payload in changes:
        pos = min(int(where * len(out)), len(out) - 1)
        if kind == "set":
            out[pos] = payload[0]
        elif kind == "delete":
            del out[pos : pos + len(payload) * 3]
        else:
            out[pos:pos] = payload
    return bytes(out)


def tf_decodes(tf, data: bytes) -> bool:
    try:
        tf.io.decode_image(data, expand_animations=False)
        return True
    except Exception:  # noqa: BLE001 - any decoder error means "not decodable"
        return False


def _segments(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of the structural units of an image file: JPEG marker segments before the scan,
    PNG chunks, WebP RIFF chunks; [] for formats without such units (GIF, BMP)."""
    spans = []
    if data[:2] == b"\xff\xd8":
        pos = 2
        while pos + 4 <= len(data) and data[pos] == 0xFF and data[pos + 1] != 0xDA:
            end = pos + 2 + int.from_bytes(data[pos + 2 : pos + 4], "big")
            spans.append((pos, end))
            pos = end
        if pos + 4 <= len(data):
            spans.append((pos, pos + 2 + int.from_bytes(data[pos + 2 : pos + 4], "big")))  # the SOS header
    elif data[:8] == b"\x89PNG\r\n\x1a\n" or data[:4] == b"RIFF":
        png = data[:4] != b"RIFF"
        pos = 8 if png else 12
        while pos + 8 <= len(data):
            length = int.from_bytes(data[pos : pos + 4], "big") if png else int.from_bytes(data[pos + 4 : pos + 8], "little")
            end = pos + (12 + length if png else 8 + length + (length & 1))
            spans.append((pos, min(end, len(data))))
            pos = end
    return spans


def random_mutation(rng, data: bytes) -> bytes:
    """One to four seeded changes: byte flips, truncation, inserted/removed/duplicated bytes, and
    removed, duplicated or moved markers / chunks, plus inserted JPEG markers."""
    out = bytes(data)
    for _ in range(rng.randint(1, 4)):
        if not out:
            break
        kind = rng.choice(["flip", "flip", "truncate", "insert", "delete", "segment", "segment", "marker"])
        pos = rng.randrange(len(out))
        spans = _segments(out)
        if kind == "flip":
            out = out[:pos] + bytes([rng.randrange(256)]) + out[pos + 1 :]
        elif kind == "truncate":
            out = out[:pos]
        elif kind == "insert":
            out = out[:pos] + rng.randbytes(rng.randint(1, 8)) + out[pos:]
        elif kind == "delete":
            out = out[:pos] + out[pos + rng.randint(1, 64) :]
        elif kind == "marker" and out[:2] == b"\xff\xd8":  # a marker segment where markers live
            at = rng.choice([s for s, _ in spans] or [2])
            marker = bytes([0xFF, rng.choice([0xC4, 0xDB, 0xDD, 0xE1, 0xFE, 0xD9, 0xDA, 0xC0, 0xC2, rng.randrange(256)])])
            out = out[:at] + marker + rng.randbytes(rng.choice([0, 2, 4])) + out[at:]
        elif spans:
            start, end = rng.choice(spans)
            action = rng.choice(["remove", "duplicate", "move"])
            if action == "remove":
                out = out[:start] + out[end:]
            elif action == "duplicate":
                out = out[:end] + out[start:end] + out[end:]
            else:
                rest = out[:start] + out[end:]
                to = rng.randrange(len(rest) + 1)
                out = rest[:to] + out[start:end] + rest[to:]
        else:
            out = out[:pos] + bytes([out[pos] ^ (1 << rng.randrange(8))]) + out[pos + 1 :]
    return out
