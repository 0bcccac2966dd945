"""TFRecorder 2.0's on-disk format: its directories and base64 raw-pixel records, read as this package's jobs."""
