"""Mergeable sketches: bounded state, merge equals one pass, estimates within their error."""
import numpy as np

from tfrecorder.rows.data_sketches import REGISTER_BITS, K, NumericSketch, TopValues, UniqueSketch, _rank, optional_merge


def test_numeric_sketch_moments_are_exact_and_quantiles_close():
    rng = np.random.default_rng(1)
    data = rng.normal(10, 2, size=50_000)
    sketch = NumericSketch()
    for chunk in np.array_split(data, 40):
        sketch.add(chunk)
    summary = sketch.summary()
    assert summary["count"] == data.size
    assert abs(summary["mean"] - data.mean()) < 1e-9 and abs(summary["std_dev"] - data.std()) < 1e-6
    assert summary["min"] == data.min() and summary["max"] == data.max()
    for entry in summary["quantiles"]:
        exact = np.quantile(data, entry["fraction"])
        assert abs(np.mean(data <= entry["value"]) - np.mean(data <= exact)) < 0.02
    assert sum(b["count"] for b in summary["histogram"]) == data.size
    assert sum(level.size for level in sketch.levels) <= K * (len(sketch.levels) + 1)  # bounded


def test_numeric_sketch_merge_matches_one_pass_and_skips_nan():
    left, right, whole = NumericSketch(), NumericSketch(), NumericSketch()
    left.add([0, 1, 2, float("nan")])
    right.add(range(3, 1000))
    whole.add(range(0, 1000))
    merged = left.merge(right)
    assert merged.count == whole.count == 1000 and merged.zeros == 1
    assert abs(merged.quantiles([0.5])[0] - 500) < 30
    assert NumericSketch().summary() == {"count": 0}


def test_unique_sketch_estimates_and_merges():
    left, right = UniqueSketch().add(range(0, 30_000)), UniqueSketch().add(range(20_000, 60_000))
    assert abs(left.merge(right).estimate() - 60_000) < 60_000 * 0.05
    assert UniqueSketch().add(["a", "b", "a"]).estimate() == 2


def test_hyperloglog_rank_is_one_plus_the_leading_zeros_after_the_register_index():
    rng = np.random.default_rng(5)
    powers = [1 << shift for shift in range(64)]
    hashes = np.array([0, 2**64 - 1, *powers, *(p - 1 for p in powers), *(p + 1 for p in powers[1:])]
                      + rng.integers(0, 2**64 - 1, 500, dtype=np.uint64, endpoint=True).tolist(), dtype=np.uint64)
    width = 64 - REGISTER_BITS
    expected = [1 + width - (int(h) & ((1 << width) - 1)).bit_length() for h in hashes.tolist()]
    assert _rank(hashes).tolist() == expected


def test_top_values_exact_until_capacity_then_lower_bounds():
    top = TopValues(3).add(["a"] * 5 + ["b"] * 3 + ["c"])
    assert top.exact and top.top(2) == [{"value": "a", "count": 5}, {"value": "b", "count": 3}]
    merged = top.merge(TopValues(3).add(["d", "e", "a"]))
    assert not merged.exact and merged.top(1)[0]["value"] == "a" and len(merged.counts) <= 3
    assert optional_merge(None, top) is top and optional_merge(top, None) is top


def test_top_values_reduce_a_batch_before_it_becomes_python_keys():
    values = np.array(["a", "b"] + [f"rare{i}" for i in range(500)], dtype=object)
    counts = np.array([1000, 400] + [1] * 500)
    top = TopValues(10).add_many(values, counts)
    assert len(top.counts) <= 10 and not top.exact
    assert top.top(2) == [{"value": "a", "count": 999}, {"value": "b", "count": 399}]  # lower bounds
    small = TopValues(10).add_many(values[:3], counts[:3])
    assert small.exact and small.top(3)[2] == {"value": "rare0", "count": 1}


def test_extreme_values_summarise_without_errors():
    import json

    huge = NumericSketch().add([1.7e18, 1.7e18, 1.7e18])  # nanosecond datetimes: equal, beyond float's unit steps
    assert len(huge.histogram()) in (1, 10) and huge.summary()["std_dev"] == 0.0
    wide = NumericSketch().add([-1.7e308, 1.7e308, 0.0])
    summary = wide.summary()
    assert sum(b["count"] for b in summary["histogram"]) == 3 and summary["min"] == -1.7e308
    json.dumps(summary, allow_nan=False)  # statistics.json stays valid JSON


def test_top_values_take_arrow_text_and_hashes_of_utf8_bytes_match_text():
    """Arrow text (only the kept values become str) counts as the same values given as python strings,
    and a text's UTF-8 bytes hash as the text does (the statistics hash an Arrow column's bytes)."""
    import numpy as np
    import pyarrow as pa

    from tfrecorder.rows.data_sketches import TopValues, value_hashes

    texts = [f"v{i}" for i in range(300)] + ["é", ""]
    counts = np.arange(1, len(texts) + 1)
    for capacity in (5, 1000):
        from_arrow = TopValues(capacity).add_many(pa.array(texts), counts)
        from_python = TopValues(capacity).add_many(np.asarray(texts, dtype=object), counts)
        assert from_arrow.counts == from_python.counts and from_arrow.exact == from_python.exact
    as_bytes = np.asarray([text.encode("utf-8") for text in texts], dtype=object)
    assert (value_hashes(as_bytes, all_text=True) == value_hashes(np.asarray(texts, dtype=object), all_text=True)).all()
