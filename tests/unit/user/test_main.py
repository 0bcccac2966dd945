"""tfrecorder.__main__: `python -m tfrecorder` runs the command line and exits with its status."""
from __future__ import annotations

import runpy
import sys

import pytest


@pytest.mark.parametrize("argv, code", [(["--help"], 0), (["no-such-command"], 2)])
def test_python_m_tfrecorder_exits_with_the_cli_status(monkeypatch, capsys, argv, code):
    monkeypatch.setattr(sys, "argv", ["tfrecorder", *argv])
    with pytest.raises(SystemExit) as exited:
        runpy.run_module("tfrecorder", run_name="__main__")
    assert exited.value.code == code
    out, err = capsys.readouterr()
    assert ("convert" in out) if code == 0 else ("invalid choice: 'no-such-command'" in err)
