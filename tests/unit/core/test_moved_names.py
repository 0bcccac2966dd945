"""tfrecorder.core.moved_names: old import paths give the same classes with a DeprecationWarning naming the new one."""
from __future__ import annotations

import importlib

import pytest

from tfrecorder import errors
from tfrecorder.core.moved_names import moved

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


def test_moved_looks_each_name_up_in_its_own_new_home_and_warns_at_the_callers_line():
    lookup = moved("old.place", {"OrderedDict": "collections", "dedent": "textwrap"})
    with pytest.warns(DeprecationWarning) as warned:
        found = lookup("OrderedDict"), lookup("dedent")
    import collections
    import textwrap

    assert found == (collections.OrderedDict, textwrap.dedent)
    assert [str(w.message) for w in warned] == ["old.place.OrderedDict moved: import it from collections",
                                                "old.place.dedent moved: import it from textwrap"]
    assert {w.filename for w in warned} == {__file__}  # stacklevel: the warning points at the importer
    with pytest.raises(AttributeError, match="module 'old.place' has no attribute 'Counter'"):
        lookup("Counter")  # only the names listed moved, even if the new home has more
