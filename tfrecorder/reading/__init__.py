"""The reading layer: what load(), data_source(), inspect() and verify() share to read a job directory back."""
