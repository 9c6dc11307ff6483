"""Reading back what was logged, with the tools' own readers: TensorBoard's and W&B's (05)."""
from __future__ import annotations

import json
from pathlib import Path

from ..core.logger import _wandb_chunks, wandb_file_complete

__all__ = ["read_back", "summarize_read_back", "read_wandb_run"]


def read_back(log_dir: str | Path) -> dict:
    """Everything under ``log_dir`` as TensorBoard itself reads it: per run, tags and values (05).

    Uses ``EventAccumulator`` (TensorBoard's event reader) on every run folder — ``add_scalars``
    and ``add_hparams`` create sub-runs — and the projector plugin's config for the embedding.
    """
    from google.protobuf import text_format
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

    log_dir = Path(log_dir)
    runs = {}
    for folder in sorted({p.parent for p in log_dir.rglob("events.out.tfevents.*")}):
        ea = EventAccumulator(str(folder), size_guidance={"scalars": 0, "histograms": 0, "images": 0, "tensors": 0})
        ea.Reload()
        tags = ea.Tags()
        run = {"scalars": {t: [(e.step, e.value) for e in ea.Scalars(t)] for t in tags["scalars"]},
               "histograms": {t: len(ea.Histograms(t)) for t in tags["histograms"]},
               "images": {t: len(ea.Images(t)) for t in tags["images"]},
               "tensors": {t: len(ea.Tensors(t)) for t in tags["tensors"]},
               "graph": tags["graph"]}
        run.update(_plugins_and_hparams(folder))
        runs[str(folder.relative_to(log_dir)) or "."] = run
    config_path = log_dir / "projector_config.pbtxt"
    embeddings = []
    if config_path.exists():
        cfg = text_format.Parse(config_path.read_text(), ProjectorConfig())
        for e in cfg.embeddings:
            rows = (log_dir / e.tensor_path).read_text().strip().splitlines()
            embeddings.append({"tag": e.tensor_name, "points": len(rows), "dims": len(rows[0].split("\t")),
                               "sprite": bool(e.sprite.image_path), "metadata": bool(e.metadata_path)})
    return {"runs": runs, "embeddings": embeddings}


def _plugins_and_hparams(folder: Path) -> dict:
    """Active plugins of a run, and its hparams/metrics decoded from the hparams plugin's own protos."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    ea = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    ea.Reload()
    out: dict = {"plugins": sorted(ea.ActivePlugins()), "hparams": {}, "hparam_metrics": []}
    if "hparams" in out["plugins"]:
        for content in ea.PluginTagToContent("hparams").values():
            pd = plugin_data_pb2.HParamsPluginData.FromString(content)
            if pd.HasField("session_start_info"):
                out["hparams"] = {k: (v.number_value if v.HasField("number_value") else v.string_value)
                                  for k, v in pd.session_start_info.hparams.items()}
            if pd.HasField("experiment"):
                out["hparam_metrics"] = [m.name.tag for m in pd.experiment.metric_infos]
    return out


def summarize_read_back(back: dict) -> str:
    """A per-run table of what TensorBoard found (05)."""
    lines = []
    for name, r in back["runs"].items():
        parts = [f"{len(r['scalars'])} scalar tags", f"{len(r['histograms'])} histogram tags",
                 f"{len(r['images'])} image tags", f"{len(r['tensors'])} tensor tags", f"graph: {r['graph']}"]
        lines.append(f"run {name!r}: " + ", ".join(parts) + f"; plugins {r['plugins']}")
    for e in back["embeddings"]:
        lines.append(f"embedding {e['tag']!r}: {e['points']} points × {e['dims']} dims, sprite {e['sprite']}, "
                     f"labels {e['metadata']}")
    return "\n".join(lines)


def read_wandb_run(run_dir: str | Path, timeout: float = 30.0) -> dict:
    """History rows, config and record counts of an offline W&B run, from its ``.wandb`` file (05).

    Waits (up to ``timeout`` seconds) until W&B has written the file to its end: wandb-core writes
    the last records when it closes the run, a moment after ``run.finish()`` returns.
    ``"complete"`` says whether it had; False means a run still going, or one that crashed.
    """
    from wandb.proto import wandb_internal_pb2

    files = sorted(Path(run_dir).glob("run-*.wandb"))
    if not files:
        raise FileNotFoundError(f"no run-*.wandb file in {run_dir}; pass the run folder (…/wandb/offline-run-…)")
    complete = wandb_file_complete(run_dir, timeout)
    data = files[0].read_bytes()
    history, config, kinds = [], {}, {}
    for chunk in _wandb_chunks(data) if data else ():
        rec = wandb_internal_pb2.Record()
        rec.ParseFromString(chunk)
        kind = rec.WhichOneof("record_type")
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == "history":
            history.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in rec.history.item})
        elif kind == "run":
            for u in rec.run.config.update:
                config[u.key] = json.loads(u.value_json)
        elif kind == "config":
            for u in rec.config.update:
                config[u.key] = json.loads(u.value_json)
    return {"history": history, "config": config, "records": kinds, "complete": complete}
