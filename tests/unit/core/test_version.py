"""tfrecorder.core.version: one version string, the package's and the installed distribution's."""
from __future__ import annotations

from importlib import metadata

import tfrecorder
from tfrecorder.core.version import __version__


def test_the_package_and_the_installed_distribution_have_this_version():
    assert tfrecorder.__version__ == __version__ == metadata.version("tfrecorder")
