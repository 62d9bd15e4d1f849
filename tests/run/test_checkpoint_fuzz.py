"""Hypothesis over checkpoint files: arbitrary bytes, damaged real checkpoints and
well-formed files of any plain content. Reading one, and opening a run with it, either
works or is a one-line ShoalError; nothing is created or overwritten on error."""

import io

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import shoal
from shoal.cli import main
from shoal.errors import ShoalError
from shoal.run.checkpoint import FORMAT, load_checkpoint
from shoal.run.directory import RunDir

pytestmark = pytest.mark.timeout(600)
SLOW_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
FUZZ = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=SLOW_OK)


def _tiny_run(root):
    out = root / "run"
    overrides = [
        "dqn.hidden=[8]",
        "run.total_steps=300",
        "run.learning_starts=50",
        "run.eval_every=150",
        "run.eval_episodes=1",
        "run.checkpoint_every=150",
        "run.progress=false",
        "run.stop_return=none",
        "env.max_episode_steps=50",
    ]
    shoal.train("cartpole", overrides=overrides, run_dir=out)
    return RunDir(out)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _tiny_run(tmp_path_factory.mktemp("fuzz"))


def _one_line(e):
    return isinstance(e, ShoalError) and "\n" not in str(e)


def _reads_or_refuses(path, best):
    try:
        load_checkpoint(path, best=best)
    except Exception as e:  # noqa: BLE001 - anything but a one-line ShoalError fails
        assert _one_line(e), repr(e)


plain = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | st.builds(torch.zeros, st.integers(0, 3)),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
"""Anything the safe loader can return."""


@FUZZ
@given(data=st.binary(max_size=2048))
def test_arbitrary_bytes(tmp_path, data):
    path = tmp_path / "latest.pt"
    path.write_bytes(data)
    _reads_or_refuses(path, best=False)


@FUZZ
@given(
    cut=st.integers(0, 10**6),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=4),
)
def test_damaged_real_checkpoints(run, tmp_path, cut, flips):
    for source, best in ((run.checkpoint, False), (run.best, True)):
        data = bytearray(source.read_bytes())
        for at, x in flips:
            data[at % len(data)] ^= x
        path = tmp_path / source.name
        path.write_bytes(bytes(data[: max(1, len(data) - cut % len(data))]))
        _reads_or_refuses(path, best)


@FUZZ
@given(
    top=st.dictionaries(st.sampled_from(["config", "loop", "learner", "eval_mean", "x"]), plain),
    loop=st.dictionaries(st.sampled_from(["step", "episode", "wall", "best_eval", "x"]), plain),
)
def test_well_formed_files_of_any_content(tmp_path, top, loop):
    state = {"format": FORMAT, "config": {}, "loop": {"step": 0, **loop}, **top}
    buf = io.BytesIO()
    torch.save(state, buf)
    path = tmp_path / "best.pt"
    path.write_bytes(buf.getvalue())
    for best in (False, True):
        _reads_or_refuses(path, best)


@settings(FUZZ, max_examples=15)
@given(
    field=st.sampled_from(["learner", "replay", "rng", "acting", "nstep", "schedule", "loop"]),
    value=plain,
)
def test_opening_a_run_with_a_mangled_field(run, tmp_path, capsys, field, value):
    """Each field of a real latest.pt replaced: eval and resume work or say one line."""
    state = torch.load(run.checkpoint, weights_only=True)
    state[field] = value if field != "loop" else {"step": 10, "episode": value}
    copy = RunDir(tmp_path / "copy")
    copy.checkpoint.parent.mkdir(parents=True, exist_ok=True)
    copy.config.write_bytes(run.config.read_bytes())
    torch.save(state, copy.checkpoint)
    before = copy.checkpoint.read_bytes()
    argvs = [
        ["eval", str(copy.path), "--checkpoint", "latest", "--episodes", "1"],
        ["train", "--resume", str(copy.path), "--set", "run.total_steps=400", "--no-progress"],
    ]
    for argv in argvs:
        code = main(argv)
        err = capsys.readouterr().err
        assert code in (0, 2), err
        if code == 2:
            assert len(err.strip().splitlines()) == 1, err
            assert copy.checkpoint.read_bytes() == before
            assert not copy.error_checkpoint.exists()
