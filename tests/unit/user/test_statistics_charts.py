"""Inline SVG charts: sized, escaped, self-contained."""
import xml.etree.ElementTree as ElementTree

from tfrecorder.statistics_charts import MAX_BARS, bar_chart, grouped_bars, histogram


def _svg(text):
    root = ElementTree.fromstring(text)
    assert root.tag.endswith("svg") and int(root.get("width")) > 0 and int(root.get("height")) > 0
    assert "http" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")  # no external resource
    return root


def test_bar_chart_escapes_labels_and_caps_bars():
    root = _svg(bar_chart("t<1>", [(f"<b>{i}", i) for i in range(40, 0, -1)]))
    rects = [e for e in root.iter() if e.tag.endswith("rect")]
    assert len(rects) == MAX_BARS and float(rects[0].get("width")) > float(rects[-1].get("width"))
    assert "no values" in bar_chart("empty", [])


def test_grouped_bars_have_a_bar_per_split_and_label():
    root = _svg(grouped_bars("labels", ["cat", "dog"], {"TRAIN": {"cat": 5, "dog": 2}, "TEST": {"cat": 1}}))
    titles = [e.text for e in root.iter() if e.tag.endswith("title")]
    assert "dog in TEST: 0" in titles and "cat in TRAIN: 5" in titles


def test_histogram_bars_scale_with_counts():
    root = _svg(histogram("h", [{"low": 0, "high": 1, "count": 4}, {"low": 1, "high": 2, "count": 2}]))
    heights = [float(e.get("height")) for e in root.iter() if e.tag.endswith("rect")]
    assert heights[0] == 2 * heights[1]
    _svg(histogram("empty", []))
