"""Running the command line as a user does: a real subprocess, with the user's environment."""
from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time

# As a user runs it: no TF_CPP_MIN_LOG_LEVEL, so TensorFlow's start-up lines would show if they leaked.
USER_ENV = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
# Runs the CLI like `python -m tfrecorder`, then fails (exit 99) if TensorFlow was imported.
WITHOUT_TENSORFLOW = ("import sys; from tfrecorder.cli import main; code = main(sys.argv[1:]); "
                      "sys.exit(99 if 'tensorflow' in sys.modules else code)")


def run(*args, cwd=None, entry=("-m", "tfrecorder")):
    return subprocess.run([sys.executable, *entry, *args], capture_output=True, text=True, cwd=cwd,
                          env=USER_ENV, timeout=300)


def run_on_a_terminal(args, cwd, seconds: float = 300):
    """Run the CLI with stderr on a pseudo-terminal (so a person 'watches'); returns (code, terminal text).
    A CLI still running after `seconds` is killed (its code is then negative)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a real terminal's size
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": os.getcwd()}
    process = subprocess.Popen([sys.executable, "-m", "tfrecorder", *args], stdout=subprocess.DEVNULL,
                               stderr=follower, cwd=cwd, env=env)
    os.close(follower)
    chunks, deadline = [], time.monotonic() + seconds
    while True:
        if not select.select([leader], [], [], max(0.0, deadline - time.monotonic()))[0]:
            process.kill()  # silent past the deadline
            break
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed: the process is gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return process.wait(timeout=60), b"".join(chunks).decode(errors="replace")
