"""Any project module can be the first one a process imports: a Beam worker unpickling a step imports
that step's module before anything else, so no import order may meet a half-initialised module."""
from __future__ import annotations

import subprocess
import sys

from support.paths import REPO

PROBE = """
import importlib, pathlib, sys
root = pathlib.Path(sys.argv[1])
modules = sorted(".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
                 for package in ("tfrecorder", "beam_pipelines") for p in (root / package).rglob("*.py")
                 if p.name != "__main__.py")
failed = []
for name in modules:
    for loaded in [m for m in sys.modules if m.split(".")[0] in ("tfrecorder", "beam_pipelines")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print(len(modules))
print("\\n".join(failed))
"""


def test_every_module_imports_first_in_a_fresh_project_state():
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", PROBE, str(REPO)], capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr
    count, *failed = done.stdout.strip().split("\n")
    assert int(count) > 60
    assert not [line for line in failed if line], "\n".join(failed)
