"""Who may import whom (ARCHITECTURE.md), checked from the source with `ast`: no import cycles, no
layer importing a higher one, and no module using another module's private (`_name`) names.

Every `import` counts, at module level or inside a function: a deferred import still makes the
importer depend on the imported module. Layers, lowest first:

- core: value types every layer shares (errors, column roles and Schema, splits, quiet, TensorFlow import);
- io: `tfrecorder/io/`, local and gs:// storage, image probing and checks;
- format: `tfrecorder/format/`, the on-disk contract (framing, Examples, feature spec, file names,
  metadata.json, index);
- rows: the Beam-free table and row logic of `tfrecorder/` (tables, staging, row encoding, annotations);
- pipeline: `beam_pipelines/` (the graph, sharding, job config, the local and Dataflow launches);
- user: the API users call (`convert`, `load`, `inspect`, `verify`, results, CLI, ...).

A module of tfrecorder/ not named below is in the rows layer, one of beam_pipelines/ in the pipeline layer.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tfrecorder", "beam_pipelines")
CORE, IO, FORMAT, ROWS, PIPELINE, USER = range(6)
LAYER_NAMES = {CORE: "core", IO: "io", FORMAT: "format", ROWS: "rows", PIPELINE: "pipeline", USER: "user"}
SUBPACKAGE_LAYERS = {"io": IO, "format": FORMAT}

CORE_MODULES = {"errors", "quiet", "schema", "splits", "tensorflow_import", "types", "version"}

USER_MODULES = {"__init__", "__main__", "accessor", "cli", "compat", "convert", "data_source", "demo",
                "detection_inspect", "detection_load", "input_schema", "inspection", "legacy_verify", "load",
                "result", "round_trip", "sample_data", "shard_checks", "upgrade", "verify", "views"}

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
    package, _, name = module.partition(".")
    if package == "beam_pipelines":
        return PIPELINE
    name = name or "__init__"
    subpackage = name.partition(".")[0]
    if subpackage in SUBPACKAGE_LAYERS:
        return SUBPACKAGE_LAYERS[subpackage]
    if name in USER_MODULES:
        return USER
    if name in CORE_MODULES:
        return CORE
    return ROWS


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


def test_format_and_io_are_subpackages_below_the_row_logic():
    """The on-disk contract and storage each live in their own subpackage, under everything that uses them."""
    modules = all_modules()
    assert {"tfrecorder.io.storage", "tfrecorder.io.images", "tfrecorder.format.framing",
            "tfrecorder.format.feature_spec", "tfrecorder.format.jobdir"} <= set(modules)
    assert layer("tfrecorder.io.storage") < layer("tfrecorder.format.jobdir") < layer("tfrecorder.row_encoder")
    assert layer("tfrecorder.schema") < layer("tfrecorder.io.gcs")


def test_the_graph_sees_every_kind_of_import(tmp_path):
    """`import a.b`, `from a import module`, `from a.b import name` and imports inside functions all count."""
    modules = {"tfrecorder", "tfrecorder.io", "tfrecorder.io.storage", "tfrecorder.format", "tfrecorder.format.jobdir",
               "tfrecorder.load", "beam_pipelines.pipeline"}
    source = tmp_path / "tfrecorder" / "probe.py"
    source.parent.mkdir()
    source.write_text("import tfrecorder.io.storage\nfrom tfrecorder.format import jobdir\nfrom tfrecorder import __version__\n"
                      "def f():\n    from beam_pipelines.pipeline import build\n    from tfrecorder.load import load\n")
    assert imports_of(source, modules) == {"tfrecorder.io.storage", "tfrecorder.format.jobdir", "tfrecorder",
                                           "beam_pipelines.pipeline", "tfrecorder.load"}
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
    modules = {"tfrecorder", "tfrecorder.io", "tfrecorder.io.images", "tfrecorder.tables", "tfrecorder.probe"}
    source = tmp_path / "tfrecorder" / "probe.py"
    source.parent.mkdir()
    source.write_text("from tfrecorder.io.images import _channels, PIL_FORMATS\nfrom tfrecorder import tables\n"
                      "import tfrecorder.io.images as im\nimport tfrecorder\n"
                      "def f():\n    return tables._parent, im._PIL_OPEN, tfrecorder.tables._x, tables.parent_dir, _own\n"
                      "def _own():\n    return tables.__name__\n")
    assert private_names_used(source, modules) == {"tfrecorder.io.images._channels", "tfrecorder.tables._parent",
                                                   "tfrecorder.io.images._PIL_OPEN", "tfrecorder.tables._x"}
