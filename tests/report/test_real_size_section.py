"""The report's real-size section from hand-made records: what a user plans by per cell,
ORT's and eager's latency at the protocol's other thread counts, the speed against the fastest
exporter's graph, and a CUDA cell's export peak on the device and host<->device copies."""

from __future__ import annotations

from harness.report.document import Paragraph, Section, Table
from harness.report.real_size import real_size_section
from harness.store.details import ExporterSpeed
from harness.store.measures import EagerMeasures, ExportMeasures, OrtMeasures, ShapeLatency
from harness.store.records import Cell, Latency, Record
from tests.fixtures_compare import measurements

GB = 1024.0  # MiB


def _record(model: str, exporter: str, device: str = "cpu", **changes: object) -> Record:
    cell = Cell(model, exporter, 18, device=device)  # type: ignore[arg-type]
    found = Record.finished(cell, "r", measurements())
    return found.with_changes(**changes)


def _figures(section: Section) -> dict[tuple[str, str], dict[str, str]]:
    table = next(b for b in section.blocks if isinstance(b, Table))
    return {
        (row[0].text, row[1].text): dict(zip(table.headers, (t.text for t in row), strict=True))
        for row in table.rows
    }


def test_each_cell_says_what_its_export_needs_its_threads_speed_and_cuda_copies() -> None:
    latency = Latency.from_samples([100.0, 101.0, 99.0, 100.5, 100.2])
    at_two = ShapeLatency.of(None, [61.0, 60.0, 59.5, 60.2, 60.4], [80.0, 81.0, 79.0])
    dynamo = _record(
        "m",
        "dynamo",
        export=ExportMeasures(seconds=12.0, peak_rss_mb=0.5 * GB, weights_mb=2 * GB),
        ort=OrtMeasures(latency=latency),
        eager=EagerMeasures(latency=Latency.from_samples([200.0, 201.0, 199.0, 200.5, 200.2])),
        thread_latency={"2": at_two},
        exporter_speed=ExporterSpeed(fastest="dynamo", ratio=1.0),
    )
    torchscript = _record(
        "m",
        "torchscript",
        export=ExportMeasures(seconds=30.0, peak_rss_mb=8 * GB, weights_mb=2 * GB),
        ort=OrtMeasures(latency=latency),
        exporter_speed=ExporterSpeed(
            fastest="dynamo", ratio=1.4, ci_low=1.3, ci_high=1.5, pairs=10, verdict="slower"
        ),
    )
    cuda = _record(
        "g",
        "dynamo",
        "cuda",
        export=ExportMeasures(peak_rss_mb=0.1 * GB, peak_cuda_mb=3 * GB, weights_mb=2 * GB),
        ort=OrtMeasures(host_transfers={"MemcpyFromHost": 3, "MemcpyToHost": 1}),
    )
    toy = _record("toy", "dynamo", export=ExportMeasures(weights_mb=1.0))
    section = real_size_section([dynamo, torchscript, cuda, toy])
    assert section is not None
    rows = _figures(section)
    assert ("toy", "dynamo") not in rows  # a toy model is not planned for
    assert rows["m", "dynamo"]["export peak RSS / weights"] == "0.25x"
    assert rows["m", "torchscript"]["export peak RSS / weights"] == "4.00x"
    other = rows["m", "dynamo"]["at other threads"]
    assert other.startswith("2 threads 60.2") and ", eager 80.0" in other
    assert rows["m", "dynamo"]["eager p50 ms"].startswith("200")
    assert rows["m", "torchscript"]["at other threads"] == "—"
    assert rows["m", "dynamo"]["speed vs fastest exporter"] == "fastest"
    slower = rows["m", "torchscript"]["speed vs fastest exporter"]
    assert slower.startswith("1.40x of dynamo (1.30x–1.50x, 10 pairs)") and "slower" in slower
    assert rows["g", "dynamo"]["CUDA host copies"] == "4 (MemcpyFromHost 3, MemcpyToHost 1)"
    assert rows["m", "dynamo"]["CUDA host copies"] == "—"  # a CPU cell has none to count
    assert rows["g", "dynamo"]["export peak CUDA / weights"] == "1.50x"
    assert rows["g", "dynamo"]["export peak RSS / weights"] == "0.05x"  # the host's, beside it
    assert rows["m", "torchscript"]["export peak CUDA / weights"] == "—"


def test_a_section_without_a_cuda_cell_has_no_cuda_columns_and_says_nothing_of_them() -> None:
    cpu = _record("m", "dynamo", export=ExportMeasures(peak_rss_mb=GB, weights_mb=2 * GB))
    section = real_size_section([cpu])
    assert section is not None
    (row,) = _figures(section).values()
    assert row["export peak RSS / weights"] == "0.50x" and row["status"] == "ok"
    assert not [h for h in row if "CUDA" in h]
    (intro,) = [b.text for b in section.blocks if isinstance(b, Paragraph)]
    assert "CUDA" not in intro
    cuda = _record("g", "dynamo", "cuda", export=ExportMeasures(weights_mb=2 * GB))
    both = real_size_section([cpu, cuda])
    assert both is not None
    (intro,) = [b.text for b in both.blocks if isinstance(b, Paragraph)]
    assert "Memcpy" in intro
    assert _figures(both)["m", "dynamo"]["CUDA host copies"] == "—"


def test_rows_of_one_model_and_exporter_say_which_cell_and_how_long_it_waited() -> None:
    """A run of several batch sizes gave rows that read alike ("m | dynamo"); the time
    table said nothing of the waits for the node inside its stages."""
    from harness.store.details import WorkerInfo

    big = ExportMeasures(weights_mb=2 * GB)
    beside = ("m torchscript@18 cpu: export", "m torchscript@18 cpu: check", "a zygote's warm-up",
              "m torchscript@18 cpu: export")  # fmt: skip
    one = _record("m", "dynamo", export=big, duration_s=30.0,
                  worker=WorkerInfo(node_wait_s=12.5, timed_beside=beside),
                  exporter_speed=ExporterSpeed(fastest="torchscript", ratio=1.1, seconds=16.4,
                                                node_wait_s=6.1))  # fmt: skip
    four = Record.finished(Cell("m", "dynamo", 18, batch=4), "r", measurements()).with_changes(
        export=big, duration_s=20.0
    )
    section = real_size_section([one, four])
    assert section is not None
    figures = next(b for b in section.blocks if isinstance(b, Table))
    assert [row[2].text for row in figures.rows] == ["@18 cpu", "@18 cpu batch 4"]
    times = next(b for b in next(s for s in section.blocks if isinstance(s, Section)).blocks)
    assert isinstance(times, Table)
    waited, paired = (times.headers.index(h) for h in ("of which waiting for the node",
                                                      "exporter pair after"))  # fmt: skip
    assert [row[waited].text for row in times.rows] == ["12.5", "—"]
    # each other cell once, with the phases it was seen in
    column = times.headers.index("timed beside")
    assert [row[column].text for row in times.rows] == [
        "m torchscript@18 cpu (export, check); a zygote's warm-up", "—"]  # fmt: skip
    # the pair's own time, and of it the wait for the node
    assert [row[paired].text for row in times.rows] == ["16.4 (6.10 waiting for the node)", "—"]
