"""`python -m tfrecorder` runs the command-line interface."""
import sys

from tfrecorder.cli import main

sys.exit(main())
