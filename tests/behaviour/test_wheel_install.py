"""The built wheel installs into a fresh environment that already has pandas 3, and works there.

README's "Install into an existing environment" path, end to end: `pip wheel --no-deps` of a clean
copy of the source tree; a new venv (no access to this checkout or to the test venv); pandas 3.x
installed first, as in a current data-science environment; then the wheel with all its dependencies
(pinned to the versions this suite runs with, so nothing is resolved differently). A script converts
and loads the generated sample there, once with the console script, once from a DataFrame; then the
DataFrame run is repeated after pandas is moved to the oldest supported major (2.x).

The install is slow (a real install of TensorFlow and Apache Beam: ~1–2 min on an idle 2-core
machine, more when it is shared), hence one module-scoped environment and the `slow` marker
(`pytest -m "not slow"` skips it while developing; `make test` runs it). The pandas-2 test moves the
environment's pandas back a major, so it comes last.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support.paths import REPO

ROOT = REPO
PACKAGES = ("tfrecorder", "beam_pipelines")
PIP_TIMEOUT = 1800  # seconds; a shared machine unpacks TensorFlow slowly

# Run inside the fresh venv, from a directory outside the checkout.
SCRIPT = """
import json, subprocess, sys
from pathlib import Path
import pandas as pd
import beam_pipelines.graphs.image_graph, tfrecorder
from tfrecorder.format.finished_job import JobInfo
from tfrecorder.sample_data import make_sample_dataset

work, with_cli = Path(sys.argv[1]), sys.argv[2] == "with_cli"
csv_path = make_sample_dataset(str(work / "sample"), count=12)
jobs, cli_stdout = {}, None
if with_cli:  # the console script, in its own process
    cli = subprocess.run([str(Path(sys.executable).with_name("tfrecorder")), "convert", "--source", str(csv_path),
                          "--output_dir", str(work / "cli"), "--job_label", "cli"], capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    jobs["cli"], cli_stdout = str(next((work / "cli").iterdir())), cli.stdout
frame = pd.read_csv(csv_path)
jobs["dataframe"] = frame.tensorflow.to_tfrecord(output_dir=str(work / "frame"))["tfrecord_dir"]
loaded = {}
for name, job in jobs.items():
    expected = {split: info["records"] for split, info in JobInfo.read(job).metadata["splits"].items()}
    got = {split: sum(1 for _ in dataset) for split, dataset in tfrecorder.load(job).items()}
    loaded[name] = (got, expected)
print(json.dumps({"pandas": pd.__version__, "column_dtype": str(frame["image_uri"].dtype),
                  "modules": [tfrecorder.__file__, beam_pipelines.graphs.image_graph.__file__],
                  "cli_stdout": cli_stdout, "loaded": loaded}))
"""


def _run(*command, cwd, timeout=PIP_TIMEOUT) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing from the checkout
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env=env)
    assert done.returncode == 0, f"{command}: {done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done


def _source_files() -> list[str]:
    """Every file of both packages in the checkout (data files too), as paths inside the wheel."""
    return sorted(path.relative_to(ROOT).as_posix() for package in PACKAGES for path in (ROOT / package).rglob("*")
                  if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """`pip wheel --no-deps` of a clean copy of the source tree (no build/, egg-info or caches)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package, ignore=ignore)
    for name in ("setup.py", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    # --no-build-isolation: build with the test venv's setuptools instead of fetching one.
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", work / "dist", source,
         cwd=work)
    (built,) = (work / "dist").glob("tfrecorder-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_env(wheel, tmp_path_factory) -> Path:
    """A new venv holding pandas 3.x, then the wheel installed with its dependencies; returns its python."""
    work = tmp_path_factory.mktemp("venv")
    _run(sys.executable, "-m", "venv", work / "venv", cwd=work)
    python = work / "venv" / "bin" / "python"
    pins = [f"{dist.metadata['Name']}=={dist.version}" for dist in importlib.metadata.distributions()
            if dist.metadata["Name"] and dist.metadata["Name"].lower() != "tfrecorder"]
    (work / "constraints.txt").write_text("\n".join(pins) + "\n")
    pip = (python, "-m", "pip", "install", "--quiet", "--no-compile", "-c", work / "constraints.txt")
    _run(*pip, f"pandas=={importlib.metadata.version('pandas')}", cwd=work)
    _run(*pip, wheel, cwd=work)
    return python


def _pandas_version(python: Path) -> str:
    return _run(python, "-c", "import pandas; print(pandas.__version__)", cwd=python.parent).stdout.strip()


def test_wheel_holds_both_packages_their_data_files_and_the_console_script(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert [n for n in _source_files() if n not in names] == []
    assert "tfrecorder = tfrecorder.cli:main" in entry_points


def test_suite_runs_under_pandas_3():
    """`make test` installs the newest pandas setup.py allows; pandas 3 is the point of this module."""
    assert int(importlib.metadata.version("pandas").split(".")[0]) >= 3


def _convert_and_load(python: Path, work: Path, with_cli: bool) -> dict:
    work.mkdir()
    done = _run(python, "-c", SCRIPT, work, "with_cli" if with_cli else "", cwd=work, timeout=900)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow
def test_installed_wheel_converts_and_loads_with_pandas_3_kept(fresh_env, tmp_path):
    pandas_before = importlib.metadata.version("pandas")
    assert _pandas_version(fresh_env) == pandas_before  # installing tfrecorder did not move pandas
    report = _convert_and_load(fresh_env, tmp_path / "run", with_cli=True)
    assert sorted(report["loaded"]) == ["cli", "dataframe"]
    site_packages = str(fresh_env.parent.parent / "lib")
    assert all(module.startswith(site_packages) for module in report["modules"]), report["modules"]
    assert report["pandas"] == pandas_before
    assert report["column_dtype"] == "str"  # pandas 3's string dtype went through the DataFrame path
    assert "rows in: 12" in report["cli_stdout"]
    for name, (got, expected) in report["loaded"].items():
        assert got == expected and sum(got.values()) == 12, name


@pytest.mark.slow
def test_installed_wheel_works_with_the_oldest_supported_pandas_major(fresh_env, tmp_path):
    _run(fresh_env, "-m", "pip", "install", "--quiet", "--no-compile", "pandas>=2.0,<3", cwd=tmp_path)
    assert _pandas_version(fresh_env).startswith("2.")
    report = _convert_and_load(fresh_env, tmp_path / "run", with_cli=False)  # the console script: tested above
    assert report["pandas"].startswith("2.") and report["column_dtype"] == "object"
    for name, (got, expected) in report["loaded"].items():
        assert got == expected and sum(got.values()) == 12, name
