"""TensorFlow's start-up lines are dropped; anything else written to stderr meanwhile comes through, in order."""
from __future__ import annotations

import os

from tfrecorder.core.tensorflow_import import stderr_without_start_up_lines, without_start_up_lines

# Lines TensorFlow 2.21 printed on this machine (no GPU) when imported and its devices first listed.
START_UP = """\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1795455128.055645   13059 port.cc:153] oneDNN custom operations are on. You may see slightly \
different numerical results due to floating-point round-off errors from different computation orders. To turn \
them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.
I0000 00:00:1795455128.055985   13059 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
I0000 00:00:1795455129.005521   13059 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use available \
CPU instructions in performance-critical operations.
To enable the following instructions: AVX2 AVX512F AVX512_VNNI AVX512_BF16 FMA, in other operations, rebuild \
TensorFlow with the appropriate compiler flags.
E0000 00:00:1795455151.608165   13059 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed call \
to cuInit: UNKNOWN ERROR (303)
"""
# Lines that must survive: a real TensorFlow error, a warning, and output that only resembles start-up text.
OTHER = """\
E0000 00:00:1795455151.700000   13059 op_kernel.cc:1857] OP_REQUIRES failed: Not found: /data/x.tfrecord
/usr/lib/python3.11/site-packages/keras/src/x.py:12: UserWarning: something changed
hostname: my-machine (not a CUDA diagnostic: no log prefix)
"""


def test_only_the_start_up_lines_are_dropped():
    mixed = "".join(a + b for a, b in zip(START_UP.splitlines(keepends=True), OTHER.splitlines(keepends=True) + [""] * 9))
    assert without_start_up_lines(START_UP) == ""
    assert without_start_up_lines(mixed) == OTHER
    assert without_start_up_lines(OTHER) == OTHER


def test_stderr_is_filtered_at_the_file_descriptor_and_replayed_in_order(capfd):
    """Native code writes straight to file descriptor 2, as TensorFlow's C++ logging does."""
    os.write(2, b"before\n")
    with stderr_without_start_up_lines():
        os.write(2, START_UP[:200].encode())  # a line split across writes is still one line
        os.write(2, (START_UP[200:] + OTHER).encode())
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "before\n" + OTHER + "after\n"
