"""Launching a graph: locally on Beam's in-process runner or on Google Cloud Dataflow."""
