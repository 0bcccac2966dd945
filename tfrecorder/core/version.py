"""The package version, in a module of its own so that any layer can read it without importing the
package's `__init__` (which imports the whole user API, and so the pipeline)."""
__version__ = "0.1.0"
