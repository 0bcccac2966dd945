"""Test helpers shared by the test modules and benchmarks/ — not tests themselves.

gcs_emulator (a real GCS emulator on a free loopback port), gcs_proxy (a fault-injecting, delaying,
counting proxy in front of it), dataflow_stub (a local stand-in for the Dataflow API), imagegen
(real image files of many kinds), mutations (byte-level image mutations for fuzzing), jobbuilder and
readers (hand-built job directories, and readers independent of tfrecorder's), tfrecorder2_writer
(directories in TFRecorder 2.0's format). Import them as `from support import imagegen`.
"""
