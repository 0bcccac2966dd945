"""The Apache Beam graph that converts rows into sharded TFRecords (local and Dataflow alike)."""
