"""The graphs' steps, named after the stages of the pipeline: read, prepare, encode, assemble, discards, finalize."""
