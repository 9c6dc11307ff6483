"""Reading back what was logged, with the tools' own readers: TensorBoard's and W&B's (05)."""
from __future__ import annotations

import json
from pathlib import Path

from ..core.i18n import tr
from ..core.logger import _wandb_chunks, wandb_file_complete

__all__ = ["read_back", "summarize_read_back", "read_wandb_run", "ops_table", "callee_memory_line"]


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
        ea = EventAccumulator(str(folder), size_guidance={"scalars": 0, "histograms": 0, "images": 0, "audio": 0,
                                                          "tensors": 0})
        ea.Reload()
        tags = ea.Tags()
        run = {"scalars": {t: [(e.step, e.value) for e in ea.Scalars(t)] for t in tags["scalars"]},
               "histograms": {t: len(ea.Histograms(t)) for t in tags["histograms"]},
               "images": {t: len(ea.Images(t)) for t in tags["images"]},
               "audio": {t: [(a.sample_rate, a.length_frames) for a in ea.Audio(t)] for t in tags["audio"]},
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
    """Active plugins of a run, its hparams/metrics and custom-scalar layout, decoded from the plugins' own protos."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    ea = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    ea.Reload()
    out: dict = {"plugins": sorted(ea.ActivePlugins()), "hparams": {}, "hparam_metrics": [], "custom_scalars": {}}
    if "custom_scalars" in out["plugins"]:
        from tensorboard.plugins.custom_scalar import layout_pb2, metadata
        from tensorboard.util import tensor_util

        for event in ea.Tensors(metadata.CONFIG_SUMMARY_TAG):
            layout = layout_pb2.Layout.FromString(tensor_util.make_ndarray(event.tensor_proto).item())
            out["custom_scalars"] = {c.title: {ch.title: _chart_tags(ch) for ch in c.chart} for c in layout.category}
    if "hparams" in out["plugins"]:
        for content in ea.PluginTagToContent("hparams").values():
            pd = plugin_data_pb2.HParamsPluginData.FromString(content)
            if pd.HasField("session_start_info"):
                out["hparams"] = {k: (v.number_value if v.HasField("number_value") else v.string_value)
                                  for k, v in pd.session_start_info.hparams.items()}
            if pd.HasField("experiment"):
                out["hparam_metrics"] = [m.name.tag for m in pd.experiment.metric_infos]
    return out


def _chart_tags(chart) -> list[str]:
    """The scalar tags a custom-scalars chart draws: a multiline chart's tags, or a margin chart's value, lower,
    upper."""
    if chart.HasField("multiline"):
        return list(chart.multiline.tag)
    return [tag for s in chart.margin.series for tag in (s.value, s.lower, s.upper)]


def summarize_read_back(back: dict) -> str:
    """A per-run table of what TensorBoard found (05)."""
    lines = []
    for name, r in back["runs"].items():
        lines.append(tr("05.read_back_run", "run {name!r}: scalar tags: {scalars}, histogram tags: {histograms}, image tags: "
                        "{images}, audio tags: {audio}, graph: {graph}", name=name, scalars=len(r["scalars"]),
                        histograms=len(r["histograms"]), images=len(r["images"]), audio=len(r["audio"]), graph=r["graph"]))
        lines.append(tr("05.read_back_plugins", "    plugins {plugins}", plugins=", ".join(r["plugins"])))
    for e in back["embeddings"]:
        lines.append(tr("05.read_back_embedding", "embedding {tag!r}: {points} points × {dims} dims, sprite {sprite}, "
                        "labels {labels}", tag=e["tag"], points=e["points"], dims=e["dims"], sprite=e["sprite"],
                        labels=e["metadata"]))
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
        raise FileNotFoundError(tr("05.wandb_no_run_file", "no run-*.wandb file in {run_dir}; pass the run folder "
                                   "(…/wandb/offline-run-…)", run_dir=run_dir))
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


def ops_table(averages, sort_by: str = "self_cpu_time_total", rows: int = 8, shapes: bool = False) -> str:
    """The profiler's top events (operators, and ranges such as ``ProfilerStep*``), in columns narrow enough not to
    wrap (at most 107 characters) (05).

    ``averages`` is ``prof.key_averages()`` (with ``group_by_input_shape=True`` for ``shapes``, which prints each
    row's input shapes on a line of their own below it).
    The columns are the event fields of ``FunctionEventAvg``: self and total CPU time, calls, and
    the self CUDA time when a GPU was profiled, or the self CPU memory (``profile_memory``).
    """
    events = sorted(averages, key=lambda e: getattr(e, sort_by), reverse=True)[:rows]
    total = sum(e.self_cpu_time_total for e in averages) or 1
    gpu = any(getattr(e, "self_device_time_total", 0) for e in averages)
    longest = max((len(e.key) for e in events), default=0)  # names whole where they fit: 60 columns
    name_w = max(len("event"), min(longest, 60))
    head = f"{'event':<{name_w}}"
    head += f" {'self CPU':>9} {'%':>5} {'CPU total':>10} {'calls':>5}"
    head += f" {'self CUDA':>10}" if gpu else f" {'self mem KiB':>13}"
    # the header in the reader's language, its columns as wide as the English ones (a Korean character is two)
    pad = " " * (name_w - len("event"))
    said = tr("05.ops_head_cuda", "event{pad}  self CPU     %  CPU total calls  self CUDA", pad=pad) if gpu else \
        tr("05.ops_head_mem", "event{pad}  self CPU     %  CPU total calls  self mem KiB", pad=pad)
    lines = [said, "-" * len(head)]
    for e in events:
        name = e.key if len(e.key) <= name_w else e.key[:name_w - 1] + "…"
        row = f"{name:<{name_w}}"
        row += f" {_ms(e.self_cpu_time_total):>9} {100 * e.self_cpu_time_total / total:>4.1f}%"
        row += f" {_ms(e.cpu_time_total):>10} {e.count:>5}"
        row += f" {_ms(e.self_device_time_total):>10}" if gpu else f" {_kib(e.self_cpu_memory_usage):>13}"
        lines.append(row)
        if shapes:
            text = ", ".join("×".join(map(str, s)) for s in e.input_shapes if s) or tr("05.ops_no_shapes", "none")
            text = tr("05.ops_shapes", "    input shapes (non-empty): {shapes}", shapes=text)
            lines.append(text if len(text) <= 107 else text[:106] + "…")
    units = tr("05.ops_units_cuda", "times in ms, summed over the calls") if gpu else \
        tr("05.ops_units_mem", "times in ms, memory in KiB net (negative: more freed), each summed over the calls")
    share = tr("05.ops_share", "%: each row's self CPU time as a share of the self CPU total, {total} ms (the sum over "
               "every event)", total=_ms(total))
    return "\n".join(lines + ["-" * len(head), share, units])


def callee_memory_line(rows) -> str:
    """One line on the first of ``rows`` (``key_averages()`` events) with 0 self CPU memory that still allocates,
    net, through the operators it calls; where no row does, what was measured instead (05).

    On a GPU the tensors of the convolutions live in device memory, so their CPU memory can be 0
    everywhere: the line then says so, with the largest device-memory row, instead of saying nothing.
    """
    rows = list(rows)
    for e in rows:
        if e.cpu_memory_usage > 0 and e.self_cpu_memory_usage == 0:
            return tr("05.callee_memory", "{event}: self CPU memory 0, but {kib} KiB net allocated by the operators "
                      "it calls", event=e.key, kib=_kib(e.cpu_memory_usage))
    cpu = max(rows, key=lambda e: e.cpu_memory_usage)
    dev = max(rows, key=lambda e: getattr(e, "device_memory_usage", 0))
    device = ""
    if getattr(dev, "device_memory_usage", 0) > 0:
        device = tr("05.callee_memory_device", "; the largest total device memory: {event}, {kib} KiB ({own} KiB "
                    "its own)", event=dev.key, kib=_kib(dev.device_memory_usage),
                    own=_kib(dev.self_device_memory_usage))
    return tr("05.callee_memory_none", "no row above has 0 self CPU memory and a net CPU allocation through the "
              "operators it calls; the largest total CPU memory among them: {event}, {kib} KiB{device}",
              event=cpu.key, kib=_kib(cpu.cpu_memory_usage), device=device)


def _ms(us: float) -> str:
    return f"{us / 1000:.3f}"


def _kib(b: float) -> str:
    return f"{b / 1024:.1f}"
