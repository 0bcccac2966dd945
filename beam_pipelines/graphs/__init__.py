"""The conversion graphs: images, image-free tables, object detection and TFRecorder 2.0 upgrades."""
