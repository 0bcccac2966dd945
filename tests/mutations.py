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
