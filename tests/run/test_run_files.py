"""Only regular files of their own inside a run: a FIFO where a run keeps a file (its lock,
``metrics.csv``) would block the reader for good, and a hard link to a file elsewhere would
be cut or appended to by a resume. Each is refused in one line, exit 2, every file as it
was. And what writing a run can meet: a read-only disk under ``shoal plot`` (one line, the
first error kept), ``shoal upgrade`` beside a process that holds the run."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import pytest

from shoal.cli import main
from shoal.run.lock import DirectoryLock

pytestmark = pytest.mark.timeout(120)

DATA = Path(__file__).parent / "data"

COMMANDS = {
    "resume": ["train", "--resume", "{run}", "--set", "run.total_steps=600", "--no-progress"],
    "eval": ["eval", "{run}", "--episodes", "2"],
    "plot": ["plot", "{run}"],
}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return Path(shutil.copytree(DATA / "v1_cartpole", tmp_path / "run"))


def _files(run: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and not p.is_fifo()}


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], needle: str) -> None:
    assert main(argv) == 2, argv
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("shoal: error: ") and needle in err[0], err


@pytest.mark.parametrize("name", [".lock", "metrics.csv"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_fifo_in_a_run_is_one_line_not_a_hang(name, command, run, tmp_path, capsys):
    target = run / name
    if target.exists():
        target.unlink()
    os.mkfifo(target)
    before = _files(run)
    argv = [a.format(run=run) for a in COMMANDS[command]]
    _refused(argv, capsys, f"'{target}' is a FIFO, not a regular file")
    assert _files(run) == before and target.is_fifo()


@pytest.mark.parametrize("name", [".lock", "metrics.csv"])
def test_a_hard_linked_file_a_resume_writes_in_place_is_refused(name, run, tmp_path, capsys):
    """A resume appends to metrics.csv (and cuts a torn last row) and rewrites the lock:
    through a hard link it would change a file outside the run."""
    outside = tmp_path / "precious"
    outside.write_bytes(b"precious line 1\nprecious line 2, with no newline")
    (run / name).unlink(missing_ok=True)
    os.link(outside, run / name)
    before = {**_files(run), outside: outside.read_bytes()}
    argv = [a.format(run=run) for a in COMMANDS["resume"]]
    _refused(argv, capsys, "has 2 hard links; writing it in place would change the file")
    assert {p: p.read_bytes() for p in before} == before


def test_plot_on_a_read_only_disk_is_one_line_with_the_first_error(run, capsys, monkeypatch):
    """On a read-only file system the temp file cannot be made, and removing it (though it
    does not exist) fails too: the first error is the one said."""
    import shoal.run.files as files

    def read_only(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    def open_read_only(file: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        if "r" not in mode:
            read_only()
        return open(file, mode, *args, **kwargs)  # noqa: SIM115 - returned to its caller

    monkeypatch.setattr(files, "open", open_read_only, raising=False)
    monkeypatch.setattr(Path, "unlink", read_only)
    _refused(["plot", str(run)], capsys, "cannot write curve.png (Read-only file system)")


def test_plot_says_where_it_wrote(run, capsys):
    assert main(["plot", str(run)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {run / 'curve.png'}"


def test_upgrade_beside_a_process_holding_the_run_is_one_line(run, capsys):
    before = _files(run)
    with DirectoryLock(run):
        _refused(["upgrade", str(run), "--trust"], capsys, "is in use by process")
    assert {p: p.read_bytes() for p in before} == before
