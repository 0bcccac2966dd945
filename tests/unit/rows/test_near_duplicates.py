"""LSH banding with one-bit probes: every pair within 7 bits is a candidate; groups confirmed by distance."""
import random

from tfrecorder.rows.near_duplicates import BANDS, BUCKETS, MAX_GUARANTEED, band_keys, bucketed, near_groups


def _groups(entries, distance=MAX_GUARANTEED):
    found = {}
    for bucket, keyed in bucketed(entries).items():
        assert 0 <= bucket < BUCKETS
        for group in near_groups(keyed, distance):
            found[group.group_id] = group
    return list(found.values())


def _flip(value, bits):
    for bit in bits:
        value ^= 1 << bit
    return value


def test_every_pair_within_the_guarantee_is_found():
    rng = random.Random(4)
    for _ in range(200):
        base = rng.getrandbits(64)
        near = _flip(base, rng.sample(range(64), rng.randint(1, MAX_GUARANTEED)))
        [group] = _groups([(base, b"a", "TRAIN", "a.jpg"), (near, b"b", "TEST", "b.jpg")])
        assert group.kind == "near" and group.leaks and group.kept == "a.jpg"
    assert len(list(band_keys(0))) == BANDS * 17


def test_far_pairs_and_identical_bytes_are_not_near_duplicates():
    base = 0x0123456789ABCDEF
    assert _groups([(base, b"a", "TRAIN", "a"), (_flip(base, range(0, 64, 4)), b"b", "TRAIN", "b")]) == []
    assert _groups([(base, b"same", "TRAIN", "a"), (base, b"same", "TRAIN", "b")]) == []
    assert _groups([(base, b"a", "TRAIN", "a"), (_flip(base, [1, 2, 3]), b"b", "TRAIN", "b")], distance=2) == []


def test_chains_join_into_one_group_per_bucket():
    base = 0
    entries = [(base, b"a", "TRAIN", "a"), (_flip(base, [0]), b"b", "TRAIN", "b"), (_flip(base, [0, 1]), b"c", "TRAIN", "c")]
    groups = _groups(entries)
    assert any(group.members == (("TRAIN", "a"), ("TRAIN", "b"), ("TRAIN", "c")) for group in groups)


def test_with_places_a_digest_stands_by_the_row_its_exact_group_keeps_and_the_others_are_dropped():
    """duplicates="drop": of byte-identical copies the one the exact group keeps (smallest row id) stands
    for them; the near group drops every member but its kept one, with places."""
    base = 0x0F0F
    entries = [(base, b"a", "TRAIN", "z.jpg", ("p1", 0, 0, ("z.jpg",))),
               (base, b"a", "TRAIN", "a.jpg", ("p1", 1, 0, ("a.jpg",))),  # z.jpg's exact duplicate, kept
               (_flip(base, [3]), b"b", "TEST", "m.jpg", ("p2", 0, 0, ("m.jpg",)))]
    groups = _groups(entries)
    assert groups and all(group.members == (("TRAIN", "a.jpg"), ("TEST", "m.jpg")) for group in groups)
    assert [list(group.dropped()) for group in groups][0] == [(("p2", 0, 0, ("m.jpg",)), "duplicate of a.jpg")]


def test_blocks_hold_every_band_key_once_and_join_across_flushes():
    """bucketed files each image's 68 band keys (band_keys) in their buckets, each image once per block;
    joined blocks of two flushes iterate as the block of both at once."""
    from tfrecorder.rows.near_duplicates import bucket_of_key, joined

    rng = random.Random(9)
    entries = [(rng.getrandbits(64), bytes([i]) * 8, "TRAIN", f"{i}.jpg") for i in range(150)]
    expected = sorted((key, home, entry[3]) for entry in entries for key, home in band_keys(entry[0]))
    blocks = bucketed(entries)
    found = []
    for bucket, block in blocks.items():
        assert len(set(block.entries)) == len(block.entries)
        found.extend((key, home, entry[3]) for key, home, entry in block)
        assert all(bucket_of_key(key) == bucket for key, _home, _entry in block)
    assert sorted(found) == expected
    assert sum(len(block.entries) for block in blocks.values()) == 150 * 36  # 1 + 8 buckets a band
    first, second = bucketed(entries[:60]), bucketed(entries[60:])
    for bucket in set(first) | set(second):
        parts = [found[bucket] for found in (first, second) if bucket in found]
        assert sorted(joined(parts), key=repr) == sorted(blocks[bucket], key=repr)


def test_only_keys_that_can_pair_are_iterated_and_the_pairs_are_the_same():
    """candidate_keys drops band keys no home shares: near_pairs finds the same pairs from far fewer."""
    from tfrecorder.rows.near_duplicates import candidate_keys, near_pairs

    rng = random.Random(12)
    entries = []
    for i in range(400):
        base = rng.getrandbits(64)
        entries.append((base, bytes([i % 256, i // 256]) * 4, "TRAIN", f"{i}.jpg"))
        if i % 10 == 0:  # a near copy (3 bits away) and a byte-identical copy under another row id
            entries.append((_flip(base, rng.sample(range(64), 3)), b"n" + bytes([i % 256, i // 256]) * 4, "TEST", f"{i}-n.jpg"))
            entries.append((base, bytes([i % 256, i // 256]) * 4, "TEST", f"{i}-copy.jpg"))
    halves = bucketed(entries[:200]), bucketed(entries[200:])
    kept = total = 0
    found = []
    for bucket in set(halves[0]) | set(halves[1]):
        blocks = [half[bucket] for half in halves if bucket in half]
        everything = [keyed for block in blocks for keyed in block]
        candidates = list(candidate_keys(blocks))
        kept, total = kept + len(candidates), total + len(everything)
        assert near_pairs(candidates, MAX_GUARANTEED) == near_pairs(everything, MAX_GUARANTEED)
        found.extend(near_pairs(candidates, MAX_GUARANTEED))
    assert len({(left[1], right[1]) for left, right in found}) == 40 and kept < total / 5
    assert list(candidate_keys([])) == []


def test_small_and_large_buckets_give_the_same_candidates(monkeypatch):
    """A small bucket is sifted in plain Python, a large one in numpy: the same keys, in the same order."""
    from tfrecorder.rows import near_duplicates

    rng = random.Random(5)
    entries = []
    for i in range(600):
        base = rng.getrandbits(64)
        entries.append((base, b"d%d" % i, "TRAIN", f"{i}.jpg"))
        if i % 7 == 0:
            entries.append((_flip(base, rng.sample(range(64), 2)), b"n%d" % i, "TEST", f"{i}-n.jpg"))
    halves = bucketed(entries[:300]), bucketed(entries[300:])
    small_bucket, found = near_duplicates.SMALL_BUCKET, 0
    for bucket in set(halves[0]) | set(halves[1]):
        blocks = [half[bucket] for half in halves if bucket in half]
        small = list(near_duplicates.candidate_keys(blocks))
        monkeypatch.setattr(near_duplicates, "SMALL_BUCKET", 0)
        assert list(near_duplicates.candidate_keys(blocks)) == small
        monkeypatch.setattr(near_duplicates, "SMALL_BUCKET", small_bucket)
        found += len(small)
    assert found


def test_the_bucket_count_follows_the_rows_and_is_capped():
    """bucket_shift: 16 buckets for a small job, more as rows grow so that a bucket's band keys stay
    within BUCKET_KEYS, and never more than BUCKETS (a large job's buckets are today's)."""
    from tfrecorder.rows.near_duplicates import (BUCKET_KEYS, BUCKET_SHIFT, KEYS_PER_IMAGE, MAX_BUCKET_SHIFT,
                                                 bucket_count, bucket_shift)

    assert bucket_count(BUCKET_SHIFT) == BUCKETS and bucket_count(MAX_BUCKET_SHIFT) == 16
    assert bucket_shift(0) == bucket_shift(2_000) == MAX_BUCKET_SHIFT
    assert bucket_shift(10**6) == bucket_shift(10**9) == BUCKET_SHIFT
    shifts = [bucket_shift(rows) for rows in range(0, 2_000_000, 7_919)]
    assert shifts == sorted(shifts, reverse=True) and set(shifts) == set(range(BUCKET_SHIFT, MAX_BUCKET_SHIFT + 1))
    for rows in (1, 15_000, 16_000, 100_000, 490_000, 500_000):
        assert rows * KEYS_PER_IMAGE <= bucket_count(bucket_shift(rows)) * BUCKET_KEYS


def test_every_bucket_shift_finds_the_same_pairs_and_groups():
    """Whatever the job's shift, the buckets (fewer, each image's entry sent to fewer of them) confirm the
    same pairs and form the same groups as today's 1,024 buckets: random hashes with planted near copies
    (1 to 9 bits away, beyond the guarantee too), chains and byte-identical copies."""
    from tfrecorder.rows.near_duplicates import (BUCKET_SHIFT, MAX_BUCKET_SHIFT, bucket_count, bucket_of_key,
                                                 candidate_keys, groups_of_pairs, near_pairs)

    rng = random.Random(29)
    entries = []
    for i in range(1_500):
        base = rng.getrandbits(64) if i % 5 else rng.getrandbits(64) & 0xFFFF_0000_FFFF_0000  # crowded bands too
        digest = b"d%d" % i
        entries.append((base, digest, "TRAIN", f"{i}.jpg"))
        if i % 6 == 0:
            near = _flip(base, rng.sample(range(64), rng.randint(1, 9)))
            entries.append((near, b"n%d" % i, "TEST", f"{i}-n.jpg"))
            if i % 12 == 0:  # a chain: a copy of the copy
                entries.append((_flip(near, rng.sample(range(64), 2)), b"c%d" % i, "TRAIN", f"{i}-c.jpg"))
        if i % 50 == 0:
            entries.append((base, digest, "VALIDATION", f"{i}-same.jpg"))
    rng.shuffle(entries)

    def found(shift, distance):
        halves = bucketed(entries[:700], shift), bucketed(entries[700:], shift)
        pairs = []
        for bucket in set(halves[0]) | set(halves[1]):
            assert 0 <= bucket < bucket_count(shift) <= BUCKETS
            blocks = [half[bucket] for half in halves if bucket in half]
            assert all(bucket_of_key(key, shift) == bucket for block in blocks for key, _home, _entry in block)
            pairs.extend(near_pairs(candidate_keys(blocks), distance))
        return {(left[1], right[1]): (left, right) for left, right in pairs}, groups_of_pairs(pairs)

    for distance in (3, MAX_GUARANTEED, 9):
        pairs, groups = found(BUCKET_SHIFT, distance)
        assert len(groups) > 100
        for shift in range(BUCKET_SHIFT + 1, MAX_BUCKET_SHIFT + 1):
            assert found(shift, distance) == (pairs, groups), (shift, distance)
    sent = {shift: sum(len(block.entries) for block in bucketed(entries[:100], shift).values())
            for shift in (BUCKET_SHIFT, MAX_BUCKET_SHIFT)}
    assert sent == {BUCKET_SHIFT: 100 * 36, MAX_BUCKET_SHIFT: 100 * 12}  # BANDS × (1 + 16 − shift) buckets each
