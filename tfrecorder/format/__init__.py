"""The format layer: the single home of the on-disk contract (docs/format.md).

TFRecord framing, tf.train.Example encode and decode, the feature spec both ways, every file name of
a job directory and its parsing, metadata.json and the record index. It may use tfrecorder.io for
storage, never the row logic, the pipeline or the user API above it.
"""
