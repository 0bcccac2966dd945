"""notebooks/structured-data.ipynb runs end to end in a real Jupyter kernel (it asserts its own results)."""
from __future__ import annotations

from pathlib import Path

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parents[1]


def test_structured_data_notebook_runs_and_is_stored_without_outputs():
    notebook = nbformat.read(ROOT / "notebooks" / "structured-data.ipynb", as_version=4)
    assert all(not cell.get("outputs") and cell.get("execution_count") is None
               for cell in notebook.cells if cell.cell_type == "code")
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    printed = "".join(output.get("text", "") for cell in notebook.cells for output in cell.get("outputs", []))
    assert "all 300 trips match" in printed
