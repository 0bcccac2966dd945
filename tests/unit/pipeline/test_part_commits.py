import apache_beam as beam
import pytest

from beam_pipelines.steps import part_commits
from beam_pipelines.steps.discard_files import DiscardPart
from beam_pipelines.steps.shard_planning import Piece
from support.job_configs import job_config
from tfrecorder.rows.table_stats import TableStats


def test_a_part_is_committed_once_and_every_attempt_emits_the_first(tmp_path):
    config = job_config(temp_dir=str(tmp_path), resumable=True)
    assert part_commits.committed(config, ("part", 1)) is None
    piece = Piece("TRAIN", str(tmp_path / "_pieces" / "p.part"), 3, 30, 1, "abc-3-30")
    discards = DiscardPart(str(tmp_path / "_discards" / "d.part"), 2, (("missing file", 2),))
    first = part_commits.commit(config, ("part", 1), 5, [piece], discards, (0, 5), [(0, {"a": "1"}, 4, 2)])
    second = part_commits.commit(config, ("part", 1), 5, [], None)  # a replayed attempt's own work loses
    assert second == first == part_commits.committed(config, ("part", 1))
    assert first["pieces"][0]["file"] == "_pieces/p.part"  # names relative to the job's directory
    emitted = list(part_commits.emit(config, second))
    assert emitted[0] == piece
    tagged = {output.tag: output.value for output in emitted[1:] if isinstance(output, beam.pvalue.TaggedOutput)}
    assert tagged[part_commits.DISCARD_PARTS] == discards
    assert tagged[part_commits.RECORDS] == (0, 5)
    assert tagged[part_commits.MALFORMED] == (0, {"a": "1"}, 4, 2)


def test_part_stats_are_counted_once_per_resumable_job(tmp_path):
    config = job_config(temp_dir=str(tmp_path), resumable=True)
    counted = []

    def count():
        counted.append(1)
        return TableStats(rows=4, malformed=1, nullable={"n"}, train_found=True, labels={"label": {"b", "a"}})

    first = part_commits.part_stats(config, "p", count)
    again = part_commits.part_stats(config, "p", count)
    assert counted == [1] and first == again and again.labels == {"label": {"a", "b"}}
    assert part_commits.part_stats(job_config(temp_dir=str(tmp_path)), "p", count) is not None
    assert counted == [1, 1]  # a job that is not resumable always counts


def test_a_parts_quality_output_is_committed_with_it_and_emitted_from_its_file(tmp_path):
    """Issue 29: the part's statistics (merged into one, keyed by the part for an ordered merge) and its
    digests are written before the manifest and emitted from the file the winning manifest names."""
    from beam_pipelines.steps.collect_statistics import QUALITY, STATISTICS_KEY
    from beam_pipelines.steps.find_duplicates import statistics_in_order
    from tfrecorder.core.schema import Schema
    from tfrecorder.rows.dataset_statistics import DatasetStatistics

    schema = Schema({"n": "IntegerInput"})
    config = job_config(temp_dir=str(tmp_path), resumable=True, schema=schema)
    batches = [DatasetStatistics(schema), DatasetStatistics(schema)]
    batches[0].rows, batches[1].rows = {"TRAIN": 2}, {"TRAIN": 3}
    pairs = [(STATISTICS_KEY, batches[0]), (7, [(b"d" * 16, "TRAIN", "a.png")]), (STATISTICS_KEY, batches[1])]
    first = part_commits.commit(config, ("part", 2), 5, [], None, quality=pairs)
    lost = part_commits.commit(config, ("part", 2), 5, [], None, quality=[(8, [])])  # a replay's own file
    assert lost == first and first["quality"].startswith("_parts/") and (tmp_path / first["quality"]).is_file()
    emitted = [out.value for out in part_commits.emit(config, lost) if out.tag == QUALITY]
    assert emitted[0] == (7, [(b"d" * 16, "TRAIN", "a.png")])
    key, (order, merged) = emitted[1]
    assert key == STATISTICS_KEY and order == first["quality"].split("/")[1].split(".")[0] and merged.rows == {"TRAIN": 5}
    later = DatasetStatistics(schema)
    assert list(statistics_in_order([("b", later), ("a", merged)])) == [merged, later]  # merged in part order
    assert part_commits.commit(config, ("part", 3), 1, [], None).get("quality") is None  # statistics=False


def test_a_parts_batch_statistics_merge_alike_in_any_order():
    """Forked encoders return a part's batches in an order that depends on their number: the part's
    sketch does not (quantile sketches depend on the order they are merged in)."""
    import pyarrow as pa

    from beam_pipelines.steps.collect_statistics import STATISTICS_KEY
    from tfrecorder.core.schema import Schema
    from tfrecorder.rows.dataset_statistics import DatasetStatistics

    schema = Schema({"n": "FloatInput"})
    batches = []
    for start in range(0, 6000, 1000):
        found = DatasetStatistics(schema)
        found.add_batch("TRAIN", pa.record_batch({"n": pa.array([float((i * 7919) % 6007) for i in
                                                                 range(start, start + 1000)])}))
        batches.append(found)

    def merged(order):
        [(_key, statistics)] = part_commits.part_quality([(STATISTICS_KEY, batches[i]) for i in order], schema)
        return statistics.to_json({})

    assert merged(range(6)) == merged([5, 3, 1, 0, 2, 4]) == merged([1, 0, 3, 2, 5, 4])


def test_a_keyed_piece_stays_keyed_through_its_manifest(tmp_path):
    config = job_config(temp_dir=str(tmp_path), resumable=True)
    piece = Piece("TRAIN", str(tmp_path / "_pieces" / "k.part"), 2, 20, 0, "def-2-20", keyed=True)
    manifest = part_commits.commit(config, ("part", 2), 2, [piece], None)
    assert part_commits.pieces_of(config, manifest) == [piece]


def test_a_parts_outputs_are_gathered_into_one_commit(tmp_path):
    """PartWork: pieces, discards (to the part's own discard file), rows written, image kinds and QUALITY
    pairs of a part's batches, committed as one manifest."""
    from beam_pipelines.steps.collect_statistics import QUALITY
    from beam_pipelines.steps.discard_files import DISCARD

    config = job_config(temp_dir=str(tmp_path), resumable=True, statistics=False)
    work = part_commits.PartWork(config)
    piece = Piece("TRAIN", str(tmp_path / "_pieces" / "p.part"), 2, 20, 0, "abc-2-20")
    work.add([piece, beam.pvalue.TaggedOutput(part_commits.ROWS_WRITTEN, 3),
              beam.pvalue.TaggedOutput(DISCARD, ({"image_uri": "x.jpg"}, "missing file"))])
    work.add([beam.pvalue.TaggedOutput(part_commits.ROWS_WRITTEN, 2), beam.pvalue.TaggedOutput(QUALITY, (1, [])),
              beam.pvalue.TaggedOutput(part_commits.IMAGE_KINDS, [["image", "png", 3]])])
    assert work.pieces == [piece] and work.rows_written == 5 and work.quality == [(1, [])]
    assert work.image_kinds == {("image", "png", 3)}
    with pytest.raises(ValueError, match="tagged 'progress'"):  # nothing is lost silently
        work.add([beam.pvalue.TaggedOutput("progress", 1)])
    manifest = work.commit(("bucket", 0), 6)
    assert manifest == part_commits.committed(config, ("bucket", 0))
    assert manifest["rows"] == 6 and manifest["pieces"][0]["file"] == "_pieces/p.part"
    tagged = {o.tag: o.value for o in part_commits.emit(config, manifest) if isinstance(o, beam.pvalue.TaggedOutput)}
    assert tagged[part_commits.DISCARD_PARTS].rows == 1 and tagged[part_commits.ROWS_WRITTEN] == 5


def test_a_parts_digest_blocks_go_to_the_grouping_several_buckets_a_key_where_they_lie(tmp_path):
    """A committed part's exact buckets leave its file `buckets_per_key` under one key (Beam's in-process
    runner pays per grouping element): a local job's as where their pickle lies in the part's file (the
    runner copies every grouped value four times), a remote one's as those bytes; the grouping writes each
    bucket's groups as from the blocks themselves."""
    import numpy as np

    from beam_pipelines.steps.collect_statistics import BUCKET_KEYS, QUALITY
    from beam_pipelines.steps.find_duplicates import quality_group, write_bucket
    from tfrecorder.rows.duplicate_groups import DigestBlocks, blocks_by_bucket, content_digest

    config = job_config(temp_dir=str(tmp_path / "job"), final_dir=str(tmp_path / "final"), resumable=True,
                        buckets_per_key=4)
    digests = [content_digest(f"row {i}".encode()) for i in range(40)]
    splits = {"TRAIN": digests, "TEST": digests[::3]}  # every third row in both splits: leaks
    blocks = {split: blocks_by_bucket("part", split, found, np.arange(len(found))) for split, found in splits.items()}
    pairs = [(bucket, DigestBlocks([block])) for found in blocks.values() for bucket, block in found.items()]
    manifest = part_commits.commit(config, ("part", 1), 40, [], None, quality=pairs)
    emitted = [out.value for out in part_commits.emit(config, manifest) if out.tag == QUALITY]
    buckets = sorted({bucket for found in blocks.values() for bucket in found})
    assert sorted(key for key, _ in emitted) == sorted({BUCKET_KEYS + bucket // 4 for bucket in buckets})
    assert all(isinstance(value, part_commits.CommittedBuckets) for _, value in emitted)  # local: where they lie
    assert sorted(bucket for _, value in emitted for bucket, _ in value.load()) == buckets
    as_bytes = dict(part_commits.committed_quality(str(tmp_path / "job" / manifest["quality"])))  # a remote job's
    with open(tmp_path / "job" / manifest["quality"], "rb") as stream:  # workers send these bytes
        assert all(stream.seek(value.offset) >= 0 and stream.read(value.length) == as_bytes[key] for key, value in emitted)
    grouped = sorted((d for item in emitted for d in quality_group((item[0], [item[1]]), config)), key=lambda d: d.bucket)
    direct = [d for bucket in buckets for d in write_bucket(
        (bucket, [DigestBlocks([found[bucket]]) for found in blocks.values() if bucket in found]), config)]
    assert grouped == direct and sum(d.counts.leaking_groups for d in grouped) == 14



def test_a_parts_blocks_spanning_a_keys_buckets_give_each_bucket_the_groups_and_file_it_had(tmp_path):
    """A committed part's digests as one block per grouping key (blocks_by_bucket(span=buckets_per_key)):
    the grouping writes the bucket files and descriptors a block per bucket gives, also when parts
    committed either way meet under one key (a job resumed across the change)."""
    import collections

    import numpy as np

    from beam_pipelines.steps.collect_statistics import QUALITY
    from beam_pipelines.steps.find_duplicates import quality_group
    from tfrecorder.rows.duplicate_groups import DigestBlocks, blocks_by_bucket, content_digest

    config = job_config(temp_dir=str(tmp_path / "job"), final_dir=str(tmp_path / "final"), resumable=True,
                        buckets_per_key=4)
    digests = [content_digest(f"row {i}".encode()) for i in range(400)]
    parts = {"a": {"TRAIN": digests[:300], "TEST": digests[::7]}, "b": {"TRAIN": digests[250:]}}

    def grouped(spans: dict) -> list:
        """Each part committed with its span; the grouping of every key its parts sent."""
        by_key = collections.defaultdict(list)
        for name, span in spans.items():
            pairs = [(bucket, DigestBlocks([block])) for split, found in parts[name].items() for bucket, block
                     in blocks_by_bucket(name, split, found, np.arange(len(found)), span=span).items()]
            manifest = part_commits.commit(config, (name, tuple(spans.items())), 400, [], None, quality=pairs)
            for out in part_commits.emit(config, manifest):
                if out.tag == QUALITY:
                    by_key[out.value[0]].append(out.value[1])
        descriptors = sorted((d for item in by_key.items() for d in quality_group(item, config)),
                             key=lambda d: d.bucket)
        return [(d, open(d.path, "rb").read()) for d in descriptors]

    per_bucket = grouped({"a": 1, "b": 1})
    assert grouped({"a": 4, "b": 4}) == per_bucket == grouped({"a": 1, "b": 4})
    repeated = collections.Counter(d for found in parts.values() for rows in found.values() for d in rows)
    assert sum(d.counts.groups for d, _ in per_bucket) == sum(count > 1 for count in repeated.values()) > 50
    assert len({d.bucket for d, _ in per_bucket}) == len(per_bucket) > 16  # a file per bucket, keys hold several
