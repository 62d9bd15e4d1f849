"""metrics.csv takes any column (widened atomically), resumes in place, and mirrors numbers
to a TensorBoard event file identical to SummaryWriter's."""

from __future__ import annotations

import csv
import math
import os
import struct
from pathlib import Path

import pytest

from shoal.run import metrics as metrics_mod
from shoal.run.metrics import (
    METRIC_FIELDS,
    EventFileWriter,
    MetricsWriter,
    crc32c,
    read_metrics,
)


def raw_rows(path: Path) -> list[list[str]]:
    """The file as csv.reader sees it: header first."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def assert_rectangular(path: Path) -> None:
    """A valid CSV in the strict sense: every row as wide as the header."""
    rows = raw_rows(path)
    assert all(len(r) == len(rows[0]) for r in rows), [len(r) for r in rows]


def test_new_file_has_the_standard_header_and_empty_cells(tmp_path):
    path = tmp_path / "metrics.csv"
    with MetricsWriter(path) as m:
        m.log("episode", 10, wall_s=0.5, episode=0, length=10, **{"return": 10.0})
        m.log("tick", 20, loss=float("nan"), steps_per_s=1234.5678)
    assert raw_rows(path)[0] == list(METRIC_FIELDS)
    rows = read_metrics(path)
    assert rows[0]["kind"] == "episode" and rows[0]["step"] == "10"
    assert rows[0]["return"] == "10" and rows[0]["loss"] == ""
    assert rows[1]["loss"] == "nan" and rows[1]["steps_per_s"] == "1234.57"
    assert_rectangular(path)


def test_unknown_columns_are_added_after_the_standard_ones(tmp_path):
    path = tmp_path / "metrics.csv"
    with MetricsWriter(path) as m:
        m.log("tick", 1, agent3_return=1.5, efficiency=0.25, loss=0.1)
        assert m.columns == (*METRIC_FIELDS, "agent3_return", "efficiency")
    (row,) = read_metrics(path)
    assert row["agent3_return"] == "1.5" and row["efficiency"] == "0.25"
    assert row["loss"] == "0.1" and row["eval_mean"] == ""
    assert_rectangular(path)


def test_a_column_appearing_late_widens_earlier_rows(tmp_path):
    path = tmp_path / "metrics.csv"
    with MetricsWriter(path) as m:
        for step in range(50):
            m.log("episode", step, episode=step, **{"return": float(step)})
        m.log("eval", 50, eval_mean=3.0, pool_share=0.5)
        m.log("episode", 51, episode=50, pool_share=0.75)
        m.log("episode", 52, episode=51)
    rows = read_metrics(path)
    assert len(rows) == 53
    assert [r["pool_share"] for r in rows[48:]] == ["", "", "0.5", "0.75", ""]
    assert [r["return"] for r in rows[:3]] == ["0", "1", "2"]
    assert raw_rows(path)[0][-1] == "pool_share"
    assert_rectangular(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.csv"]  # no temp file left


def test_resume_appends_and_keeps_column_places(tmp_path):
    path = tmp_path / "metrics.csv"
    with MetricsWriter(path) as m:
        m.log("episode", 10, episode=0, agent1_return=1.0)
        m.log("tick", 20, loss=0.5)
    first_header = raw_rows(path)[0]
    with MetricsWriter(path) as m:  # the resumed run
        assert m.columns == tuple(first_header)
        m.log("episode", 30, episode=1, agent1_return=2.0, agent2_return=-1.0)
        m.log("tick", 40, loss=0.25)
    header = raw_rows(path)[0]
    assert header[: len(first_header)] == first_header and header[-1] == "agent2_return"
    rows = read_metrics(path)
    assert [r["step"] for r in rows] == ["10", "20", "30", "40"]
    assert [r["agent1_return"] for r in rows] == ["1", "", "2", ""]
    assert [r["agent2_return"] for r in rows] == ["", "", "-1", ""]
    assert [r["loss"] for r in rows] == ["", "0.5", "", "0.25"]
    assert_rectangular(path)


def test_resume_of_a_file_with_an_older_header(tmp_path):
    """A file written before some standard columns existed: they are added at the end, the
    old ones stay where they are."""
    path = tmp_path / "metrics.csv"
    path.write_text("kind,step,return\r\nepisode,5,1.0\r\n")
    with MetricsWriter(path) as m:
        m.log("eval", 10, eval_mean=2.0, **{"return": 3.0})
    assert raw_rows(path)[0] == ["kind", "step", "return", "eval_mean"]
    assert read_metrics(path) == [
        {"kind": "episode", "step": "5", "return": "1.0", "eval_mean": ""},
        {"kind": "eval", "step": "10", "return": "3", "eval_mean": "2"},
    ]


def test_resume_after_a_crash_mid_row_drops_the_cut_row(tmp_path):
    path = tmp_path / "metrics.csv"
    with MetricsWriter(path) as m:
        m.log("episode", 1, episode=0)
    with open(path, "a") as f:
        f.write("episode,2,,1")  # a row cut short by a kill: no final newline
    with MetricsWriter(path) as m:
        m.log("episode", 3, episode=2)
    assert [r["step"] for r in read_metrics(path)] == ["1", "3"]
    assert_rectangular(path)


def test_a_header_cut_short_starts_a_new_file(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("kind,st")
    with MetricsWriter(path) as m:
        m.log("episode", 1)
    assert raw_rows(path)[0] == list(METRIC_FIELDS)
    assert len(read_metrics(path)) == 1


def test_values_that_need_quoting_survive_a_widening(tmp_path):
    """Quoted cells (commas, quotes, newlines) take the csv-parsing rewrite path."""
    path = tmp_path / "metrics.csv"
    note = 'a, "b"\nc'
    with MetricsWriter(path) as m:
        m.log("tick", 1, note=note)
        m.log("tick", 2, other=1)
    rows = read_metrics(path)
    assert rows[0]["note"] == note and rows[1]["other"] == "1" and rows[0]["other"] == ""
    assert_rectangular(path)


@pytest.mark.parametrize("fail_in", ["fsync", "replace"])
@pytest.mark.parametrize("error", [OSError, KeyboardInterrupt])
def test_a_failed_widening_leaves_the_old_file_intact(tmp_path, monkeypatch, fail_in, error):
    path = tmp_path / "metrics.csv"
    m = MetricsWriter(path)
    m.log("episode", 1, episode=0, **{"return": 1.0})
    m.flush()
    before = path.read_bytes()

    def broken(*args, **kwargs):
        raise error("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(metrics_mod.os, fail_in, broken)
        with pytest.raises(error):
            m.log("episode", 2, episode=1, brand_new=1.0)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.csv"]
    assert "brand_new" not in m.columns
    m.log("episode", 3, episode=2)  # the writer still works on the old columns
    m.log("episode", 4, episode=3, brand_new=2.0)  # and widens once the disk is back
    m.close()
    rows = read_metrics(path)
    assert [r["step"] for r in rows] == ["1", "3", "4"]
    assert [r["brand_new"] for r in rows] == ["", "", "2"]
    assert_rectangular(path)


def test_close_is_idempotent_and_flush_writes_rows(tmp_path):
    path = tmp_path / "metrics.csv"
    m = MetricsWriter(path)
    m.log("tick", 1, loss=1.0)
    m.flush()
    assert len(read_metrics(path)) == 1
    m.close()
    m.close()


# -- TensorBoard -------------------------------------------------------------------------


def tf_records(path: Path) -> list[bytes]:
    """The records of a TFRecord file, with both checksums verified."""
    data, out, i = path.read_bytes(), [], 0
    while i < len(data):
        header = data[i : i + 8]
        (n,) = struct.unpack("<Q", header)
        (head_crc,) = struct.unpack_from("<I", data, i + 8)
        payload = data[i + 12 : i + 12 + n]
        (data_crc,) = struct.unpack_from("<I", data, i + 12 + n)
        assert head_crc == metrics_mod._masked_crc32c(header)
        assert data_crc == metrics_mod._masked_crc32c(payload)
        out.append(data[i : i + 16 + n])
        i += 16 + n
    return out


def test_crc32c_known_values():
    assert crc32c(b"") == 0
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA


def test_event_file_is_byte_identical_to_summary_writer(tmp_path):
    tb = pytest.importorskip("torch.utils.tensorboard")
    ref_dir, our_dir = tmp_path / "ref", tmp_path / "ours"
    ref, ours = tb.SummaryWriter(str(ref_dir)), EventFileWriter(our_dir)
    points = [
        ("episode/return", 21.0, 300),
        ("tick/loss", 0.0, 0),
        ("tick/updates", 12345, 7),
        ("eval/eval_mean", -3.5e-7, 2**40),
        ("tick/huge", 1e39, 5),
        ("tick/tiny", -1e39, -3),
        ("tick/inf", math.inf, 9),
        ("ünïcode/x", True, 1),
    ]
    for tag, value, step in points:
        ref.add_scalar(tag, value, step, walltime=1_700_000_000.125)
        ours.add_scalar(tag, value, step, wall_time=1_700_000_000.125)
    ref.close()
    ours.close()
    (ref_file,) = ref_dir.iterdir()
    (our_file,) = our_dir.iterdir()
    assert our_file.name.rsplit(".", 1)[0] == ref_file.name.rsplit(".", 1)[0]
    ref_records, our_records = tf_records(ref_file), tf_records(our_file)
    assert our_records[1:] == ref_records[1:]
    # The file_version event differs only in its wall time (bytes 13-20 of the record).
    assert len(our_records[0]) == len(ref_records[0])
    assert our_records[0][:13] == ref_records[0][:13]
    assert our_records[0][21:-4] == ref_records[0][21:-4]


def test_tensorboard_reads_the_mirrored_scalars(tmp_path):
    event_pb2 = pytest.importorskip("tensorboard.compat.proto.event_pb2")
    with MetricsWriter(tmp_path / "metrics.csv", tmp_path / "tb") as m:
        m.log("episode", 10, wall_s=1.0, episode=0, length=10, **{"return": 10.0})
        m.log("tick", 20, loss=float("nan"), agent3_return=-2.5, note="text")
        m.log("eval", 30, eval_mean=9.5, eval_std=0.0)
    (path,) = (tmp_path / "tb").iterdir()
    events = [event_pb2.Event.FromString(r[12:-4]) for r in tf_records(path)]
    assert events[0].file_version == "brain.Event:2"
    got = [(e.summary.value[0].tag, e.step, e.summary.value[0].simple_value) for e in events[1:]]
    assert got == [
        ("episode/length", 10, 10.0),
        ("episode/return", 10, 10.0),
        ("tick/agent3_return", 20, -2.5),
        ("eval/eval_mean", 30, 9.5),
        ("eval/eval_std", 30, 0.0),
    ]


def test_no_event_file_until_a_number_is_mirrored(tmp_path):
    with MetricsWriter(tmp_path / "metrics.csv", tmp_path / "tb") as m:
        m.log("episode", 1, episode=0, wall_s=0.1)  # neither is mirrored
    assert not (tmp_path / "tb").exists()
    with MetricsWriter(tmp_path / "m2.csv") as m:
        m.log("tick", 1, loss=1.0)
    assert not (tmp_path / "tb").exists()


def test_event_file_flushes_after_flush_secs(tmp_path, monkeypatch):
    w = EventFileWriter(tmp_path)
    size = w.path.stat().st_size
    w.add_scalar("a/b", 1.0, 1)
    assert w.path.stat().st_size == size  # buffered
    monkeypatch.setattr(metrics_mod.time, "time", lambda: w._last_flush + 121)
    w.add_scalar("a/b", 2.0, 2)
    assert w.path.stat().st_size > size
    w.close()
    w.close()


def test_writer_is_cheap_per_row(tmp_path):
    """Guards against an accidental O(file) step per row: 20,000 rows, a few columns."""
    import time

    with MetricsWriter(tmp_path / "metrics.csv", tmp_path / "tb") as m:
        t0 = time.perf_counter()
        for i in range(20_000):
            m.log("episode", i, wall_s=0.1, episode=i, length=200, **{"return": 200.0})
        elapsed = time.perf_counter() - t0
    assert elapsed < 20.0  # about 0.3 s on one core; generous for loaded CI machines
    assert len(read_metrics(tmp_path / "metrics.csv")) == 20_000
    assert os.path.getsize(tmp_path / "metrics.csv") > 0


def test_episode_rows_reach_tensorboard_as_means_between_other_rows(tmp_path):
    event_pb2 = pytest.importorskip("tensorboard.compat.proto.event_pb2")
    with MetricsWriter(tmp_path / "metrics.csv", tmp_path / "tb") as m:
        for step, ret in ((5, 1.0), (9, 2.0), (12, 6.0)):
            m.log("episode", step, episode=0, length=step, **{"return": ret})
        m.log("tick", 20, loss=0.5)
        m.log("episode", 30, episode=3, length=4, **{"return": float("nan")})
        m.log("episode", 31, episode=4, length=8, **{"return": 7.0})
    (path,) = (tmp_path / "tb").iterdir()
    events = [event_pb2.Event.FromString(r[12:-4]) for r in tf_records(path)]
    got = [(e.summary.value[0].tag, e.step, e.summary.value[0].simple_value) for e in events[1:]]
    assert got == [
        ("episode/length", 12, pytest.approx(26 / 3)),
        ("episode/return", 12, 3.0),
        ("tick/loss", 20, 0.5),
        ("episode/length", 31, 6.0),  # pending means go out when the writer closes
        ("episode/return", 31, 7.0),  # a NaN return is no point, not a NaN mean
    ]
    rows = list(csv.DictReader(open(tmp_path / "metrics.csv")))
    assert len([r for r in rows if r["kind"] == "episode"]) == 5  # the CSV keeps every row


def test_log_many_writes_what_log_writes_row_by_row(tmp_path):
    event_pb2 = pytest.importorskip("tensorboard.compat.proto.event_pb2")
    rows = [(3, 0, 3, 1.5, "x"), (7, 1, 4, float("nan"), "y"), (7, 2, 2, 2.0, "z")]
    for name, many in (("one", False), ("many", True)):
        with MetricsWriter(tmp_path / f"{name}.csv", tmp_path / name) as m:
            if many:
                m.log_many(
                    "episode",
                    [r[0] for r in rows],
                    wall_s=0.5,
                    episode=range(3),
                    length=[r[2] for r in rows],
                    **{"return": [r[3] for r in rows]},
                    note=[r[4] for r in rows],
                )
                m.log_many("tick", [9, 10], loss=[0.25, 0.5])
            else:
                for step, ep, length, ret, note in rows:
                    m.log(
                        "episode",
                        step,
                        wall_s=0.5,
                        episode=ep,
                        length=length,
                        **{"return": ret},
                        note=note,
                    )
                m.log("tick", 9, loss=0.25)
                m.log("tick", 10, loss=0.5)
    assert (tmp_path / "one.csv").read_text() == (tmp_path / "many.csv").read_text()

    def scalars(name):
        (path,) = (tmp_path / name).iterdir()
        events = [event_pb2.Event.FromString(r[12:-4]) for r in tf_records(path)]
        return [
            (e.summary.value[0].tag, e.step, e.summary.value[0].simple_value) for e in events[1:]
        ]

    assert scalars("one") == scalars("many")
