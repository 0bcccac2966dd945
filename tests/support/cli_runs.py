"""Running the command line as a user does: a real subprocess, with the user's environment."""
from __future__ import annotations

import os
import subprocess
import sys

# As a user runs it: no TF_CPP_MIN_LOG_LEVEL, so TensorFlow's start-up lines would show if they leaked.
USER_ENV = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
# Runs the CLI like `python -m tfrecorder`, then fails (exit 99) if TensorFlow was imported.
WITHOUT_TENSORFLOW = ("import sys; from tfrecorder.cli import main; code = main(sys.argv[1:]); "
                      "sys.exit(99 if 'tensorflow' in sys.modules else code)")


def run(*args, cwd=None, entry=("-m", "tfrecorder")):
    return subprocess.run([sys.executable, *entry, *args], capture_output=True, text=True, cwd=cwd,
                          env=USER_ENV, timeout=300)
