"""The options layer: convert()'s options, checked once into one frozen value before any table is opened."""
