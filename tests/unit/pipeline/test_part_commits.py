import apache_beam as beam

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


def test_a_keyed_piece_stays_keyed_through_its_manifest(tmp_path):
    config = job_config(temp_dir=str(tmp_path), resumable=True)
    piece = Piece("TRAIN", str(tmp_path / "_pieces" / "k.part"), 2, 20, 0, "def-2-20", keyed=True)
    manifest = part_commits.commit(config, ("part", 2), 2, [piece], None)
    assert part_commits.pieces_of(config, manifest) == [piece]
