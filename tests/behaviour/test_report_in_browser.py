"""The report renders in headless Chromium: every chart is present and laid out with its size (issue 29)."""
import json
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

import tfrecorder

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
MEASURE = """<script>
document.addEventListener('DOMContentLoaded', () => {
  const boxes = [...document.querySelectorAll('svg.tfr-chart')].map(s => {
    const r = s.getBoundingClientRect(); return [Math.round(r.width), Math.round(r.height), s.querySelectorAll('rect').length];
  });
  const out = document.createElement('pre'); out.id = 'measured'; out.textContent = JSON.stringify(boxes);
  document.body.appendChild(out);
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_charts_render_with_their_sizes(tmp_path):
    frame = pd.DataFrame({"x": np.arange(60) % 7 * 1.5, "s": [f"v{i % 4}" for i in range(60)],
                          "label": ["a", "b", "c"] * 20})
    result = tfrecorder.convert(frame, tmp_path / "out", progress=False)
    page = tfrecorder.report(result.tfrecord_dir).html
    expected = page.count('class="tfr-chart"')
    measured_page = tmp_path / "measured.html"
    measured_page.write_text(page.replace("</head>", MEASURE + "</head>"))
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                          measured_page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    boxes = json.loads(re.search(r'<pre id="measured">(.*?)</pre>', dom).group(1))
    assert expected >= 4 and len(boxes) == expected
    assert all(width >= 200 and height >= 40 and rects >= 1 for width, height, rects in boxes), boxes
