from __future__ import annotations

import io
import time

from support.cli_runs import run_on_a_terminal
from tfrecorder.core.progress_bar import (ProgressBar, ProgressReporter, directory_counts, report_total,
                                          rows_reported, should_show)


def test_reporters_sum_across_workers(tmp_path):
    first, second = ProgressReporter(str(tmp_path)), ProgressReporter(str(tmp_path))
    first.add(64)
    second.add(10)
    first.add(6)
    assert rows_reported(str(tmp_path)) == 80


def test_bar_follows_reports_and_finishes(tmp_path):
    out = io.StringIO()
    reporter = ProgressReporter(str(tmp_path))
    with ProgressBar(lambda: directory_counts(str(tmp_path)), total=100, file=out) as bar:
        reporter.add(40)
        deadline = time.monotonic() + 10
        while bar.bar.n < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert bar.bar.n == 40
        reporter.add(60)
    assert "100/100" in out.getvalue()


def test_bar_starts_on_an_estimate_and_switches_to_the_counted_total(tmp_path):
    out = io.StringIO()
    reporter = ProgressReporter(str(tmp_path))
    # 1000: the driver's estimate from a CSV's head
    with ProgressBar(lambda: directory_counts(str(tmp_path)), total=1000, file=out) as bar:
        report_total(str(tmp_path), 987)  # the pipeline has counted the rows
        reporter.add(500)
        deadline = time.monotonic() + 10
        while (bar.bar.total, bar.bar.n) != (987, 500) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (bar.bar.total, bar.bar.n) == (987, 500)  # the total file is not counted as rows done
        reporter.add(487)
    assert "987/987" in out.getvalue()


def test_quiet_when_nobody_watches():
    assert should_show(False) is False
    assert should_show(None) is False  # pytest captures stderr: not a terminal, not a notebook


def test_cli_shows_rows_processed_on_a_terminal_only(tmp_path):
    from tfrecorder.sample_data import make_sample_dataset

    csv_path = make_sample_dataset(tmp_path / "data", count=30)
    code, text = run_on_a_terminal(["convert", "--source", str(csv_path), "--output_dir", "out"], tmp_path)
    assert code == 0, text
    assert "converting" in text and "30/30" in text
    code, text = run_on_a_terminal(
        ["convert", "--source", str(csv_path), "--output_dir", "out", "--no_progress"], tmp_path)
    assert code == 0 and "30/30" not in text
