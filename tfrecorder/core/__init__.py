"""The core layer: values every layer shares (column roles, Schema, splits, quiet logging, TensorFlow import, version, progress bar)."""
