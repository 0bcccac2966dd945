"""TFRecorder 2.0 compatibility: everything that exists only for the archived package's users, deletable as a unit."""
