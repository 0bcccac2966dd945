"""The rows layer: Beam-free row and batch encoding into tf.train.Example bytes, value coercion and whole-table facts."""
