"""Mergeable summaries of a stream of values whose size does not grow with the stream.

Statistics of a converted table are computed by many workers, each over its own rows, and merged
(beam_pipelines.steps.collect_statistics): every summary here has `add` (a batch of values at once,
numpy-vectorised), `merge` (another summary of the same kind) and a JSON-ready `summary()`, and holds a
bounded amount of state however many values it saw:

- `NumericSketch`: exact count, min, max, mean, standard deviation and zeros, plus a KLL-style
  compactor sketch (levels of at most K sorted values, each level's values standing for 2**level of
  the input) for approximate quantiles and an equal-width histogram.
- `UniqueSketch`: a HyperLogLog estimate of the number of distinct values (2**11 registers, ~2% error).
- `TopValues`: the most frequent values with their counts (Misra-Gries / space-saving with CAPACITY
  counters: exact while there are fewer distinct values, otherwise counts are lower bounds).
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

K = 256  # values kept per compactor level: rank error ~ 1/K of the count
HISTOGRAM_BINS = 10
QUANTILES = (0.0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)


class NumericSketch:
    """Moments (exact) and a quantile sketch (approximate, bounded) of a numeric stream."""

    def __init__(self) -> None:
        self.count = 0
        self.zeros = 0
        self.mean = 0.0
        self.m2 = 0.0  # sum of squared deviations from the mean (Chan et al.'s parallel update: no overflow
        # of a sum of squares, and exact merging)
        self.low = math.inf
        self.high = -math.inf
        self.levels: list[np.ndarray] = []  # level i: sorted values, each standing for 2**i inputs
        self._flip = 0  # alternates which half a compaction keeps (deterministic, unbiased on average)

    def add(self, values: Any) -> "NumericSketch":
        """Add a sequence (or numpy array) of finite numbers; NaN and infinities are skipped."""
        ordered = np.sort(np.asarray(values, dtype=np.float64).ravel())  # -inf first, then +inf, then NaN
        array = ordered[np.searchsorted(ordered, -np.inf, side="right"):np.searchsorted(ordered, np.inf)]
        if not array.size:
            return self
        with np.errstate(over="ignore", invalid="ignore"):
            mean = float(np.mean(array))
            self._combine(int(array.size), mean, float(np.sum(np.square(array - mean))))
        self.zeros += int(np.searchsorted(array, 0.0, side="right") - np.searchsorted(array, 0.0))
        self.low = min(self.low, float(array[0]))
        self.high = max(self.high, float(array[-1]))
        self._push(0, array)
        return self

    def _push(self, level: int, values: np.ndarray) -> None:
        """Add sorted `values` to `level`, compacting upwards while a level holds more than K. Every sort
        here joins two sorted runs: numpy's stable sort (timsort) merges them in linear time."""
        while len(self.levels) <= level:
            self.levels.append(np.empty(0))
        merged = np.sort(np.concatenate([self.levels[level], values]), kind="stable")
        while merged.size > K:
            keep = merged.size - (merged.size % 2)  # an odd value out stays on this level
            promoted = merged[self._flip:keep:2]
            self._flip ^= 1
            rest = merged[keep:]
            self.levels[level] = rest
            level += 1
            while len(self.levels) <= level:
                self.levels.append(np.empty(0))
            merged = np.sort(np.concatenate([self.levels[level], promoted]), kind="stable")
        self.levels[level] = merged

    def _combine(self, count: int, mean: float, m2: float) -> None:
        total = self.count + count
        delta = mean - self.mean
        self.mean += delta * count / total
        self.m2 += m2 + delta * delta * self.count * count / total
        self.count = total

    def merge(self, other: "NumericSketch") -> "NumericSketch":
        if other.count:
            with np.errstate(over="ignore", invalid="ignore"):
                self._combine(other.count, other.mean, other.m2)
        self.zeros += other.zeros
        self.low = min(self.low, other.low)
        self.high = max(self.high, other.high)
        for level, values in enumerate(other.levels):
            if values.size:
                self._push(level, values)
        return self

    def _weighted(self) -> tuple[np.ndarray, np.ndarray]:
        values = np.concatenate([v for v in self.levels] or [np.empty(0)])
        weights = np.concatenate([np.full(v.size, 2.0 ** i) for i, v in enumerate(self.levels)] or [np.empty(0)])
        order = np.argsort(values, kind="stable")
        return values[order], weights[order]

    def quantiles(self, fractions: Sequence[float] = QUANTILES) -> list[float]:
        """Approximate values at `fractions` of the sorted stream (the exact min and max at 0 and 1)."""
        if not self.count:
            return []
        values, weights = self._weighted()
        cumulative = np.cumsum(weights) / weights.sum()
        out = []
        for fraction in fractions:
            if fraction <= 0:
                out.append(self.low)
            elif fraction >= 1:
                out.append(self.high)
            else:
                out.append(float(values[min(int(np.searchsorted(cumulative, fraction)), values.size - 1)]))
        return out

    def histogram(self, bins: int = HISTOGRAM_BINS) -> list[dict[str, float]]:
        """Equal-width bins from min to max, each with its approximate count (counts sum to `count`)."""
        if not self.count:
            return []
        values, weights = self._weighted()
        high = self.high if self.high > self.low else self.low + max(1.0, abs(self.low) * 1e-9)
        try:
            with np.errstate(all="ignore"):
                counts, edges = np.histogram(values, bins=bins, range=(self.low, high), weights=weights)
            if not np.all(np.isfinite(edges)):
                raise ValueError("bin edges beyond float range")
        except ValueError:  # a range floats cannot cut in `bins` (huge or nearly equal extremes): one bin
            return [{"low": self.low, "high": self.high, "count": self.count}]
        counts = counts * (self.count / counts.sum()) if counts.sum() else counts
        rounded = _rounded_to_total(counts, self.count)
        return [{"low": float(edges[i]), "high": float(edges[i + 1]), "count": rounded[i]} for i in range(bins)]

    def summary(self) -> dict[str, Any]:
        if not self.count:
            return {"count": 0}
        std_dev = math.sqrt(max(self.m2 / self.count, 0.0)) if math.isfinite(self.m2) else None
        return {
            "count": self.count, "min": self.low, "max": self.high,
            "mean": self.mean if math.isfinite(self.mean) else None, "std_dev": std_dev,  # None: beyond float range
            "zeros": self.zeros,
            "quantiles": [{"fraction": f, "value": v} for f, v in zip(QUANTILES, self.quantiles())],
            "histogram": self.histogram(),
        }


def _rounded_to_total(counts: np.ndarray, total: int) -> list[int]:
    """Round counts to integers that still sum to `total` (largest remainders first)."""
    floors = np.floor(counts).astype(np.int64)
    short = int(total - floors.sum())
    if short > 0:
        for index in np.argsort(-(counts - floors), kind="stable")[:short]:
            floors[index] += 1
    return [int(c) for c in floors]


REGISTER_BITS = 11


def value_hashes(values: Iterable[Any], all_text: bool = False) -> np.ndarray:
    """Stable 64-bit hashes of values (as their text), the same in every process (unlike hash()):
    pandas' SipHash of each text, vectorised (bytes hash as their UTF-8 text does). `all_text`: `values`
    is a NumPy object array of str, or of their UTF-8 bytes, already (an Arrow string column's), hashed
    without a python pass."""
    import pandas as pd

    if all_text and isinstance(values, np.ndarray) and values.dtype == object:
        texts = values
    else:
        texts = np.asarray([v if isinstance(v, (str, bytes)) else str(v) for v in values], dtype=object)
    if not texts.size:
        return np.zeros(0, dtype=np.uint64)
    return pd.util.hash_array(texts, categorize=False)


class UniqueSketch:
    """HyperLogLog: an estimate of how many distinct values were added, in 2**REGISTER_BITS bytes."""

    def __init__(self) -> None:
        self.registers = np.zeros(1 << REGISTER_BITS, dtype=np.uint8)

    def add_hashes(self, hashes: np.ndarray) -> "UniqueSketch":
        if hashes.size:
            index = (hashes >> np.uint64(64 - REGISTER_BITS)).astype(np.int64)
            rank = _rank(hashes)
            np.maximum.at(self.registers, index, rank.astype(np.uint8))
        return self

    def add(self, values: Iterable[Any]) -> "UniqueSketch":
        return self.add_hashes(value_hashes(values))

    def merge(self, other: "UniqueSketch") -> "UniqueSketch":
        np.maximum(self.registers, other.registers, out=self.registers)
        return self

    def estimate(self) -> int:
        m = self.registers.size
        raw = 0.7213 / (1 + 1.079 / m) * m * m / float(np.sum(2.0 ** -self.registers.astype(np.float64)))
        empty = int(np.count_nonzero(self.registers == 0))
        if raw <= 2.5 * m and empty:
            return int(round(m * math.log(m / empty)))  # linear counting for small sets
        return int(round(raw))


def _rank(hashes: np.ndarray) -> np.ndarray:
    """HyperLogLog's rank of each hash: 1 + the leading zero bits of what follows its register index (the
    low 64 - REGISTER_BITS bits), at most 65 - REGISTER_BITS when those are all zero. Those bits fit a
    float64 exactly, whose binary exponent is their bit length: one vectorised pass, not a loop of
    shifts (0.36 → 0.025 ms a 16k-row batch)."""
    low = (hashes & np.uint64((1 << (64 - REGISTER_BITS)) - 1)).astype(np.float64)
    return (65 - REGISTER_BITS) - np.frexp(low)[1]


CAPACITY = 200  # counters kept by TopValues


class TopValues:
    """Frequent values with counts in at most CAPACITY counters (Misra-Gries summary, mergeable)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self.counts: dict[str, int] = {}
        self.exact = True  # no counter was ever decremented: every count is exact

    def add_many(self, values: Sequence[Any], counts: np.ndarray) -> "TopValues":
        """Add distinct `values` (a sequence, or an Arrow array of text) with their `counts` (a batch's
        value counts), reduced first to this summary's capacity as Misra-Gries reduces (the
        (capacity+1)-th count subtracted from all): only `capacity` values ever become python keys,
        however many distinct values the batch holds."""
        counts = np.asarray(counts, dtype=np.int64)
        arrow = hasattr(values, "to_pylist") and not isinstance(values, np.ndarray)  # an Arrow array of text
        if counts.size > self.capacity:
            cut = int(np.partition(counts, counts.size - self.capacity - 1)[counts.size - self.capacity - 1])
            keep = np.flatnonzero(counts > cut)
            values = values.take(keep) if arrow else [values[i] for i in keep.tolist()]
            counts = counts[keep] - cut
            self.exact = self.exact and cut == 0
        if arrow:
            values = values.to_pylist()
        return self.add_counts(dict(zip((str(v) for v in values), counts.tolist())))

    def add_counts(self, counts: Mapping[Any, int]) -> "TopValues":
        for value, count in counts.items():
            key = str(value)
            self.counts[key] = self.counts.get(key, 0) + int(count)
        self._shrink()
        return self

    def add(self, values: Iterable[Any]) -> "TopValues":
        keys, counts = np.unique(np.asarray([str(v) for v in values], dtype=object), return_counts=True)
        return self.add_counts(dict(zip(keys, counts)))

    def merge(self, other: "TopValues") -> "TopValues":
        self.exact = self.exact and other.exact
        return self.add_counts(other.counts)

    def _shrink(self) -> None:
        if len(self.counts) <= self.capacity:
            return
        cut = sorted(self.counts.values(), reverse=True)[self.capacity]  # the (capacity+1)-th count
        self.counts = {v: c - cut for v, c in self.counts.items() if c > cut}
        self.exact = False

    def top(self, n: int = 20) -> list[dict[str, Any]]:
        ranked = sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
        return [{"value": v, "count": c} for v, c in ranked]


def optional_merge(mine: Optional[Any], other: Optional[Any]) -> Optional[Any]:
    """Merge two optional summaries of one kind (None: nothing seen)."""
    if other is None:
        return mine
    if mine is None:
        return other
    return mine.merge(other)
