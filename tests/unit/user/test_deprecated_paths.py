"""Old import paths documented in docs/cli.md still give the same classes, with a DeprecationWarning naming
the new path; unknown names still raise AttributeError."""
from __future__ import annotations

import importlib

import pytest

from tfrecorder import errors

OLD_PATHS = [("tfrecorder.tfrecord_format", "CorruptRecordError"), ("tfrecorder.images", "InvalidImage"),
             ("tfrecorder.row_encoder", "RowError")]


@pytest.mark.parametrize("module, name", OLD_PATHS)
def test_the_old_location_names_the_same_class_and_warns(module, name):
    old = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=f"{module}.{name} moved: import it from tfrecorder.errors"):
        found = getattr(old, name)
    assert found is getattr(errors, name)
    assert old.__all__ == [name]


@pytest.mark.parametrize("module, name", OLD_PATHS)
def test_from_import_works_too(module, name):
    with pytest.warns(DeprecationWarning):
        namespace: dict = {}
        exec(f"from {module} import {name}", namespace)
    assert namespace[name] is getattr(errors, name)


def test_other_names_are_not_there():
    with pytest.raises(AttributeError, match="no attribute 'probe_image'"):
        importlib.import_module("tfrecorder.images").probe_image
