"""Progress bars in a saved notebook (helpers/core/bars.py): executed the way notebooks are committed
(nbclient, as `jupyter nbconvert --execute` does), a finished bar is stored as its final text line, never as
a widget whose text fallback still reads 0% (what GitHub, nbviewer and JupyterLab without the widget's state
show)."""
from __future__ import annotations

import json

import nbformat
from nbclient import NotebookClient

from conftest import ROOT

WIDGET = "application/vnd.jupyter.widget-view+json"

CELLS = [
    "import helpers\nfrom helpers.core.bars import progress\nfor _ in progress(range(7), desc='loop', unit='step'):\n    pass",
    "for epoch in (1, 2, 3):\n    for _ in progress(range(4), desc=f'epoch {epoch}', leave=False):\n        pass\n"
    "print('after the bars')",
    "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nfrom helpers import MLP, train\n"
    "data = TensorDataset(torch.rand(64, 1, 8, 8), torch.arange(64) % 10)\n"
    "hist = train(MLP(), DataLoader(data, batch_size=16), epochs=2, lr=1e-2, desc='train')",
    "for _ in progress(range(2), desc='next cell', leave=False):\n    pass",
]


def _executed() -> list[list[dict]]:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    NotebookClient(nb, kernel_name="python3", timeout=300,
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    return [c.outputs for c in nb.cells]


def _texts(outputs: list[dict]) -> str:
    return "\n".join(o.get("text", "") if o["output_type"] == "stream" else o.get("data", {}).get("text/plain", "")
                     for o in outputs)


def test_a_finished_bar_is_stored_as_its_final_line_not_a_widget():
    loop, gone, trained, later = _executed()
    for outputs in (loop, gone, trained, later):
        assert not any(WIDGET in o.get("data", {}) for o in outputs), json.dumps(outputs)[:800]
    assert "loop: 100%" in _texts(loop) and "7/7" in _texts(loop) and "0%|" not in _texts(loop).replace("100%|", "")
    # leave=False: the bars of one cell share one slot, where the last one's final line stays (no empty output)
    shown = [o for o in gone if o["output_type"] == "display_data"]
    assert len(shown) == 1 and "epoch 3: 100%" in _texts(shown) and "4/4" in _texts(shown), json.dumps(gone)
    assert _texts(gone).rstrip().endswith("after the bars")
    assert "next cell: 100%" in _texts(later) and "next cell" not in _texts(gone)   # a later cell gets its own slot
    text = _texts(trained)
    assert "train: 100%" in text and "8/8" in text and "train: 2 epochs of 4 batches" in text, text
