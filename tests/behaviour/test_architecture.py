"""Who may import whom (ARCHITECTURE.md), checked from the source with `ast`: no import cycles, no
layer importing a higher one, and no module using another module's private (`_name`) names.

Every `import` counts, at module level or inside a function: a deferred import still makes the
importer depend on the imported module. A module's layer is its folder, lowest first:

- core: `tfrecorder/core/`, values every layer shares (column roles and Schema, splits, quiet, TensorFlow import),
  and `tfrecorder/errors.py`, the exception hierarchy every layer raises (users import it by that name);
- io: `tfrecorder/io/`, local and gs:// storage, image probing and checks;
- format: `tfrecorder/format/` (with `format/legacy/`), the on-disk contract;
- rows: `tfrecorder/rows/`, Beam-free row and batch encoding;
- sources: `tfrecorder/sources/`, one plug-in per source kind;
- reading: `tfrecorder/reading/`, what the readers of a job directory share;
- options: `tfrecorder/options/`, convert()'s options checked once;
- pipeline: `beam_pipelines/` (graphs, steps, workers, launches);
- legacy: `tfrecorder/legacy/`, TFRecorder 2.0 compatibility;
- user: the modules at the top of `tfrecorder/`, the entry points users call.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Optional
from support.paths import REPO

ROOT = REPO
PACKAGES = ("tfrecorder", "beam_pipelines")
LAYER_FOLDERS = ("core", "io", "format", "rows", "sources", "reading", "options", "pipeline", "legacy", "user")
LAYER = {name: rank for rank, name in enumerate(LAYER_FOLDERS)}
LAYER_NAMES = dict(enumerate(LAYER_FOLDERS))
CORE, IO, FORMAT, ROWS, SOURCES, READING, OPTIONS, PIPELINE, LEGACY, USER = range(len(LAYER_FOLDERS))
EXCEPTIONS_MODULE = "tfrecorder.errors"  # at the top for users, imported by every layer

# Imports that point to a higher layer or close a cycle, each with its reason. Phase 2 of issue 17 emptied
# it; the list may only shrink (test_known_violations_are_still_real).
KNOWN_VIOLATIONS: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    parts = path.with_suffix("").parts
    parts = parts[max(i for i, part in enumerate(parts) if part in PACKAGES):]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The project modules `path` imports (`from tfrecorder.io import storage` is tfrecorder.io.storage)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules else node.module)
    return {name for name in found if name in modules and name != module_name(path)}


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {name: imports_of(path, set(modules)) for name, path in modules.items()}


def layer(module: str) -> int:
    """The module's layer, from its folder: beam_pipelines/ is the pipeline, a subpackage of tfrecorder/ is
    the layer of its name, and a module at the top of tfrecorder/ is the user layer."""
    package, _, name = module.partition(".")
    if package == "beam_pipelines":
        return PIPELINE
    if module == EXCEPTIONS_MODULE:
        return CORE
    folder, dot, _ = name.partition(".")
    if not dot and module not in all_packages():
        return USER
    return LAYER.get(folder, USER)


def all_packages() -> set[str]:
    """Dotted names of the project's packages (folders with an __init__.py)."""
    return {module_name(path) for package in PACKAGES for path in (ROOT / package).rglob("__init__.py")}


def test_every_folder_is_a_layer():
    """A new subpackage of tfrecorder/ must be placed among the layers (LAYER_FOLDERS) before it is used."""
    folders = {path.parent.name for path in (ROOT / "tfrecorder").glob("*/__init__.py")}
    assert folders <= set(LAYER_FOLDERS), folders - set(LAYER_FOLDERS)


def find_cycle(graph: dict[str, set[str]]) -> Optional[list[str]]:
    """One import cycle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> Optional[list[str]]:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return None


def without_known_violations(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return {name: {target for target in targets if (name, target) not in KNOWN_VIOLATIONS}
            for name, targets in graph.items()}


def test_no_import_cycles():
    cycle = find_cycle(without_known_violations(import_graph()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_no_layer_imports_a_higher_one():
    upward = [f"{name} ({LAYER_NAMES[layer(name)]}) imports {target} ({LAYER_NAMES[layer(target)]})"
              for name, targets in without_known_violations(import_graph()).items()
              for target in sorted(targets) if layer(target) > layer(name)]
    assert not upward, "\n".join(upward)


def test_the_lower_layers_never_import_beam_pipelines():
    """Stated on its own because it is the package rule: tfrecorder's Beam-free layers stay Beam-free."""
    graph = without_known_violations(import_graph())
    offending = [(name, target) for name, targets in graph.items() if layer(name) < PIPELINE
                 for target in targets if target.startswith("beam_pipelines")]
    assert not offending


def test_known_violations_are_still_real():
    """An allow-listed import that is gone must leave the list, so the list only ever shrinks."""
    graph = import_graph()
    gone = [edge for edge in KNOWN_VIOLATIONS if edge[1] not in graph.get(edge[0], set())]
    assert not gone, f"fixed, remove from KNOWN_VIOLATIONS: {gone}"


def test_layers_are_ordered_as_documented():
    """The on-disk contract and storage each live in their own subpackage, under everything that uses them."""
    modules = all_modules()
    assert {"tfrecorder.io.storage", "tfrecorder.io.image_probe", "tfrecorder.format.framing",
            "tfrecorder.format.feature_spec", "tfrecorder.format.job_directory"} <= set(modules)
    assert (layer("tfrecorder.core.schema") < layer("tfrecorder.io.gcs") < layer("tfrecorder.format.job_directory")
            < layer("tfrecorder.rows.row_encoding") < layer("tfrecorder.sources.csv_slicing")
            < layer("tfrecorder.options.job_config") < layer("tfrecorder.convert"))
    assert layer("tfrecorder.errors") == CORE and layer("tfrecorder.format.legacy.v2_records") == FORMAT


def deprecated_paths() -> set[str]:
    """Modules that only forward old import paths to their new homes (tfrecorder.core.moved_names)."""
    return {name for name, path in all_modules().items() if "__getattr__ = moved(" in path.read_text()}


def test_module_names_are_unique_across_the_tree():
    """A module's file name says what it holds: no two modules (old import paths that only forward aside)
    share one, so `test_<module>.py`, tracebacks and searches are never ambiguous."""
    seen: dict[str, list[str]] = {}
    for name in set(all_modules()) - deprecated_paths() - all_packages():
        seen.setdefault(name.rpartition(".")[2], []).append(name)
    assert not {base: names for base, names in seen.items() if len(names) > 1 and base != "__main__"}


def test_tests_mirror_the_tree():
    """Unit tests live in tests/unit/<layer>/ named after the module they test; behaviour suites in tests/behaviour/."""
    tests = ROOT / "tests"
    assert not list(tests.glob("test_*.py")), "tests go in tests/unit/<layer>/ or tests/behaviour/"
    layer_folders = {path.name for path in (tests / "unit").iterdir() if path.is_dir()}
    assert layer_folders <= set(LAYER_FOLDERS), layer_folders


def test_every_module_has_its_unit_test_file():
    """Each module (packages, __main__ and old import paths that only forward aside) has its own unit tests in
    tests/unit/<its layer>/test_<module>.py."""
    skipped = deprecated_paths() | all_packages()
    missing = [f"{name}: tests/unit/{LAYER_NAMES[layer(name)]}/test_{name.rpartition('.')[2]}.py"
               for name in sorted(set(all_modules()) - skipped) if not name.endswith(".__main__")
               and not (ROOT / "tests" / "unit" / LAYER_NAMES[layer(name)] / f"test_{name.rpartition('.')[2]}.py").is_file()]
    assert not missing, "\n".join(missing)


def test_test_file_names_are_unique_across_the_tests():
    seen: dict[str, list[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}


def test_the_graph_sees_every_kind_of_import(tmp_path):
    """`import a.b`, `from a import module`, `from a.b import name` and imports inside functions all count."""
    modules = {"tfrecorder", "tfrecorder.io", "tfrecorder.io.storage", "tfrecorder.format", "tfrecorder.format.job_directory",
               "tfrecorder.load", "beam_pipelines.graphs.image_graph"}
    source = tmp_path / "tfrecorder" / "probe.py"
    source.parent.mkdir()
    source.write_text("import tfrecorder.io.storage\nfrom tfrecorder.format import job_directory\nfrom tfrecorder import __version__\n"
                      "def f():\n    from beam_pipelines.graphs.image_graph import build\n    from tfrecorder.load import load\n")
    assert imports_of(source, modules) == {"tfrecorder.io.storage", "tfrecorder.format.job_directory", "tfrecorder",
                                           "beam_pipelines.graphs.image_graph", "tfrecorder.load"}
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def dotted_name(node: ast.expr) -> Optional[str]:
    """`a.b.c` for an attribute chain of plain names, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def private_names_used(path: Path, modules: set[str]) -> set[str]:
    """Other project modules' private names `path` uses: `from m import _x`, or `_x` read off an imported module."""
    own = module_name(path)
    tree = ast.parse(path.read_text(), str(path))
    bound: dict[str, str] = {}  # a local name → the project module (or package) it is bound to
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:  # `import a.b as x` binds x to a.b; `import a.b` binds a to a
                top = alias.name.partition(".")[0]
                bound[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if submodule in modules:
                    bound[alias.asname or alias.name] = submodule
                elif node.module in modules and node.module != own and is_private(alias.name):
                    found.add(f"{node.module}.{alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            base = dotted_name(node.value)
            head, _, rest = (base or "").partition(".")
            target = ".".join(filter(None, [bound.get(head), rest])) if head in bound else None
            if target in modules and target != own:
                found.add(f"{target}.{node.attr}")
    return found


def test_no_module_uses_another_modules_private_names():
    """A name another module needs is public, with a docstring, in its home module."""
    modules = all_modules()
    used = [f"{name} uses {private}" for name, path in modules.items()
            for private in sorted(private_names_used(path, set(modules)))]
    assert not used, "\n".join(used)


def test_the_private_name_check_sees_both_forms(tmp_path):
    modules = {"tfrecorder", "tfrecorder.io", "tfrecorder.io.image_probe", "tfrecorder.sources",
               "tfrecorder.sources.csv_source", "tfrecorder.probe"}
    source = tmp_path / "tfrecorder" / "probe.py"
    source.parent.mkdir()
    source.write_text("from tfrecorder.io.image_probe import _channels, PIL_FORMATS\nfrom tfrecorder.sources import csv_source as tables\n"
                      "import tfrecorder.io.image_probe as im\nimport tfrecorder\n"
                      "def f():\n    return tables._parent, im._PIL_OPEN, tfrecorder.sources.csv_source._x, tables.parent_dir, _own\n"
                      "def _own():\n    return tables.__name__\n")
    assert private_names_used(source, modules) == {
        "tfrecorder.io.image_probe._channels", "tfrecorder.sources.csv_source._parent",
        "tfrecorder.io.image_probe._PIL_OPEN", "tfrecorder.sources.csv_source._x"}
