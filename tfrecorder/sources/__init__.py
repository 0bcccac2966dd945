"""The sources layer: opening a conversion source from a sample and reading its parts into rows."""
