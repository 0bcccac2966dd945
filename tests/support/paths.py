"""Where the repository's own files are, for tests that read the README, docs, notebooks or setup.py."""
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
