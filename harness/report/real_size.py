"""The report's real-size section (cells whose model's weights are large enough to plan
for, or whose exporters were timed in pairs): per cell what a user plans by (the weights,
the export's time and peak memory over them, the graph's bytes over them and the weights it
stores twice), the ORT latency with how well it is known (its median's interval and the
samples, at the cell's threads and the protocol's others), the graph's speed against the
fastest exporter's, flagged past `SLOWER`, and a CUDA cell's export peak on the device and
host<->device copy nodes; then where each cell's time went, stage by stage."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

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


def _axes_text(r: Record) -> str:
    """The cell's opset, device and the axes it varies (a batch, a dynamic shape): what
    tells apart the rows of one model and exporter."""
    return r.cell.label().removeprefix(f"{r.model} {r.exporter}").strip()


@dataclass(frozen=True)
class Figure:
    """A column of the figures table: its header and what a cell shows under it."""

    header: str
    shown: Callable[[Record], str]
    cuda: bool = False  # shown only where a CUDA cell is among the rows (a CPU cell has none)
    coloured: bool = False  # by the cell's status, in HTML

    def text(self, r: Record) -> Text:
        return Text(self.shown(r), status=r.status if self.coloured else None)


FIGURES = (
    Figure("model", lambda r: r.model),
    Figure("exporter", lambda r: r.exporter),
    Figure("cell", _axes_text),
    Figure("status", lambda r: r.status.value, coloured=True),
    Figure("weights GiB", _weights_text),
    Figure("export s", lambda r: fmt(r.export.seconds)),
    Figure("export peak RSS / weights", lambda r: _ratio(r.export.peak_over_weights)),
    Figure(
        "export peak CUDA / weights", lambda r: _ratio(r.export.peak_cuda_over_weights), cuda=True
    ),
    Figure("graph / weights", lambda r: _ratio(r.export.graph_over_weights)),
    Figure("stored twice", _duplicates),
    Figure("ORT p50 ms", lambda r: latency_text(r.ort.latency)),
    Figure("eager p50 ms", lambda r: latency_text(r.eager.latency)),
    Figure("at other threads", _threads_text),
    Figure("speed vs fastest exporter", _speed_text),
    Figure("CUDA host copies", _transfers_text, cuda=True),
)


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
    columns = [f for f in FIGURES if cuda or not f.cuda]
    rows = [tuple(f.text(r) for f in columns) for r in records]
    return table([f.header for f in columns], rows)


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
