"""The report's real-size section (cells whose model's weights are large enough to plan
for, or whose exporters were timed in pairs): per cell what a user plans by (the weights,
the export's time and peak memory over them, the graph's bytes over them and the weights it
stores twice), the ORT latency with how well it is known (its median's interval and the
samples, at the cell's threads and the protocol's others), the graph's speed against the
fastest exporter's, flagged past `SLOWER`, and a CUDA cell's export peak on the device and
host<->device copy nodes; then
where each cell's time went, stage by stage."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from harness.report.document import Paragraph, Section, Table, Text, fmt, sub, table
from harness.report.layout import unique_cells
from harness.report.measures import latency_text
from harness.store.details import SLOWER_THAN_FASTEST, ExporterSpeed
from harness.store.records import Record

SLOWER = SLOWER_THAN_FASTEST  # flagged in the report, as `harness compare` flags it
MIN_WEIGHTS_MB = 64.0  # a model this large is planned for: its export memory is a figure
STAGES = ("build", "reference", "export", "check", "ort_session", "ort_run", "latency")


def real_size(r: Record) -> bool:
    return (r.export.weights_mb or 0.0) >= MIN_WEIGHTS_MB or r.exporter_speed is not None


def slower_than_fastest(r: Record) -> bool:
    return r.exporter_speed is not None and r.exporter_speed.slower()


def _ratio(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else fmt(None)


def _speed_text(r: Record) -> str:
    speed = r.exporter_speed
    if speed is None:
        return fmt(None)
    if speed.error is not None:
        return f"not timed: {speed.error}"
    if speed.ratio == 1.0 and speed.ci_low is None:
        return "fastest"
    interval = f" ({_ratio(speed.ci_low)}–{_ratio(speed.ci_high)}, {speed.pairs} pairs)"
    flag = f" **slower than {speed.fastest}**" if slower_than_fastest(r) else ""
    return f"{_ratio(speed.ratio)} of {speed.fastest}{interval}{flag}"


def _duplicates(r: Record) -> str:
    groups = r.export.duplicate_initializers
    if groups is None:
        return fmt(None)
    if not groups:
        return "none"
    names = ", ".join(" = ".join(g) for g in groups[:2]) + (" ..." if len(groups) > 2 else "")
    return f"{(r.export.duplicate_bytes or 0) / 1e6:,.0f} MB: {names}"


def _threads_text(r: Record) -> str:
    found = r.thread_latency or {}
    return "; ".join(
        f"{n} thread{'' if n == '1' else 's'} {latency_text(s.ort_latency_ms)},"
        f" eager {latency_text(s.eager_latency_ms)}"
        for n, s in found.items()
    ) or fmt(None)


def _transfers_text(r: Record) -> str:
    found = r.ort.host_transfers
    if found is None:
        return fmt(None)
    return f"{sum(found.values())} (" + ", ".join(f"{op} {n}" for op, n in found.items()) + ")"


def _weights_text(r: Record) -> str:
    weights = r.export.weights_mb
    return fmt(None) if weights is None else f"{weights / 1024:.2f}"


# The figures table's columns: a header and what a cell shows under it. The CUDA ones are
# shown only where a CUDA cell is among the rows (a CPU cell has none to show).
FIGURES: tuple[tuple[str, Callable[[Record], Text]], ...] = (
    ("model", lambda r: Text(r.model)),
    ("exporter", lambda r: Text(r.exporter)),
    ("cell", lambda r: Text(_axes_text(r))),
    ("status", lambda r: Text(r.status.value, status=r.status)),
    ("weights GiB", lambda r: Text(_weights_text(r))),
    ("export s", lambda r: Text(fmt(r.export.seconds))),
    ("export peak / weights", lambda r: Text(_ratio(r.export.peak_over_weights))),
    ("export CUDA peak / weights", lambda r: Text(_ratio(r.export.peak_cuda_over_weights))),
    ("graph / weights", lambda r: Text(_ratio(r.export.graph_over_weights))),
    ("stored twice", lambda r: Text(_duplicates(r))),
    ("ORT p50 ms", lambda r: Text(latency_text(r.ort.latency))),
    ("eager p50 ms", lambda r: Text(latency_text(r.eager.latency))),
    ("at other threads", lambda r: Text(_threads_text(r))),
    ("speed vs fastest exporter", lambda r: Text(_speed_text(r))),
    ("CUDA host copies", lambda r: Text(_transfers_text(r))),
)
CUDA_ONLY = frozenset({"export CUDA peak / weights", "CUDA host copies"})


def _axes_text(r: Record) -> str:
    """The cell's opset, device and the axes it varies (a batch, a dynamic shape): what
    tells apart the rows of one model and exporter."""
    return r.cell.label().removeprefix(f"{r.model} {r.exporter}").strip()


def _time_row(r: Record) -> tuple[Text, ...]:
    spent = r.stage_s or {}
    other = (r.duration_s or 0.0) - sum(spent.values())
    named = [Text(fmt(spent.get(s))) for s in STAGES]
    waited = r.worker.node_wait_s if r.worker else None
    return (
        Text(r.cell.label()),
        Text(fmt(r.duration_s)),
        *named,
        Text(fmt(max(0.0, other))),
        Text(fmt(waited)),
        Text(_beside_text(r.worker.timed_beside if r.worker else None)),
        Text(_pair_time_text(r.exporter_speed)),
    )


def _beside_text(beside: tuple[str, ...] | None) -> str:
    """The other cells whose work went on while this one timed on a core of its own, each
    with the phases it was seen in: "m torchscript@18 cpu (export, check)"."""
    phases: dict[str, list[str]] = {}
    for seen in beside or ():
        who, _, phase = seen.rpartition(": ")
        phases.setdefault(who or phase, []).extend([phase] if who else [])
    return "; ".join(
        f"{who} ({', '.join(dict.fromkeys(found))})" if found else who
        for who, found in phases.items()
    ) or fmt(None)


def _pair_time_text(speed: ExporterSpeed | None) -> str:
    """The pair's own seconds, and of them its waits for the node where it waited."""
    if speed is None or speed.seconds is None:
        return fmt(None)
    waited = f" ({fmt(speed.node_wait_s)} waiting for the node)" if speed.node_wait_s else ""
    return fmt(speed.seconds) + waited


def _has_cuda(records: Sequence[Record]) -> bool:
    return any(r.cell.device == "cuda" for r in records)


def figures_table(records: Sequence[Record]) -> Table:
    cuda = _has_cuda(records)
    columns = [(h, shown) for h, shown in FIGURES if cuda or h not in CUDA_ONLY]
    rows = [tuple(shown(r) for _, shown in columns) for r in records]
    return table([h for h, _ in columns], rows)


def time_table(records: Sequence[Record]) -> Table:
    # what the cell spent while another timed alone: within its stages' seconds and other's;
    # then its exporter pair's own time, after the cell (on the cell it was timed for)
    headers = ("cell", "cell s", *STAGES, "other", "of which waiting for the node",
               "timed beside", "exporter pair after")  # fmt: skip
    return table(headers, [_time_row(r) for r in records if r.duration_s is not None])


def real_size_section(records: Sequence[Record]) -> Section | None:
    chosen = sorted((r for r in unique_cells(records) if real_size(r)), key=lambda r: r.cell)
    if not chosen:
        return None
    slower = [r for r in chosen if slower_than_fastest(r)]
    intro = (
        "What a user plans by: the model's weights, the export's time and its peak memory"
        " over them, the graph's size over them and the weights it stores twice. ORT's p50"
        " comes with the median's 95% interval where fewer samples were taken than a p90"
        " needs; the speed against the fastest exporter's graph was timed in interleaved"
        f" pairs. {len(slower)} graph(s) slower than another exporter's by {SLOWER}x or more."
    )
    if _has_cuda(chosen):
        intro += (
            " A CUDA cell also has its export's peak on the device over the weights, and counts"
            " the host<->device copies (Memcpy nodes) ORT put in its graph."
        )
    return sub(
        "Real-size figures",
        Paragraph(intro),
        figures_table(chosen),
        sub("Where each cell's time went (s)", time_table(chosen)),
    )
