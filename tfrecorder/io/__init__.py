"""The I/O layer: local and gs:// storage with retries, and image probing and checks.

Beam-free and format-agnostic: nothing here knows a job directory's layout (that is tfrecorder.format).
"""
