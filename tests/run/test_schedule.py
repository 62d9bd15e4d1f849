"""The update schedule against the serial rule it specifies, over random schedules and
random ways of splitting the same env steps."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.run.schedule import UpdateSchedule

schedules = st.builds(
    UpdateSchedule,
    learning_starts=st.integers(0, 60),
    train_freq=st.integers(1, 9),
    gradient_steps=st.integers(1, 4),
)
batches = st.lists(st.integers(0, 40), min_size=1, max_size=40)


def serial_rule(s: UpdateSchedule, step: int) -> int:
    """The serial runner's rule at one env step (steps counted from 1)."""
    due = step >= s.learning_starts and step % s.train_freq == 0
    return s.gradient_steps if due else 0


def fresh(s: UpdateSchedule) -> UpdateSchedule:
    return UpdateSchedule(s.learning_starts, s.train_freq, s.gradient_steps)


@settings(max_examples=200, deadline=None)
@given(schedules, st.integers(1, 300))
def test_step_by_step_is_the_serial_rule(s: UpdateSchedule, steps: int) -> None:
    for step in range(1, steps + 1):
        assert s.owe(step) == serial_rule(s, step)
    assert s.granted == s.due(steps) == sum(serial_rule(s, t) for t in range(1, steps + 1))


@settings(max_examples=200, deadline=None)
@given(schedules, batches)
def test_any_split_owes_the_same_total(s: UpdateSchedule, sizes: list[int]) -> None:
    step, total = 0, 0
    for size in sizes:
        step += size
        owed = s.owe(step)
        assert owed == sum(serial_rule(s, t) for t in range(step - size + 1, step + 1))
        total += owed
    assert total == s.due(step) == sum(serial_rule(s, t) for t in range(1, step + 1))


@settings(max_examples=200, deadline=None)
@given(schedules, batches, st.data())
def test_resume_anywhere_owes_the_same(
    s: UpdateSchedule, sizes: list[int], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(0, len(sizes)))
    uninterrupted, resumed = fresh(s), fresh(s)
    step, a, b = 0, [], []
    for i, size in enumerate(sizes):
        if i == cut:  # a checkpoint here, loaded into a new schedule
            state = resumed.state_dict()
            resumed = fresh(s)
            resumed.load_state_dict(state)
        step += size
        a.append(uninterrupted.owe(step))
        b.append(resumed.owe(step))
    assert a == b


def test_asking_late_owes_every_step_since() -> None:
    # A runner that asks only now and then (every few epochs, or once replay is ready)
    # gets the updates of every step since it last asked; asking twice owes nothing twice.
    s = UpdateSchedule(learning_starts=10, train_freq=4, gradient_steps=3)
    assert s.owe(5) == 0
    assert s.owe(30) == 3 * 5  # the points 12, 16, 20, 24 and 28
    assert s.owe(30) == 0
    assert s.owe(32) == 3


def test_a_step_before_the_last_owes_nothing() -> None:
    s = UpdateSchedule(learning_starts=0, train_freq=2, gradient_steps=1)
    assert s.owe(10) == 5
    assert s.owe(8) == 0
    assert s.owe(12) == 1


@pytest.mark.parametrize("bad", [(-1, 1, 1), (0, 0, 1), (0, 1, 0)])
def test_rejects_a_schedule_that_is_not_one(bad: tuple[int, int, int]) -> None:
    with pytest.raises(ValueError, match="not a schedule"):
        UpdateSchedule(*bad)


def test_a_checkpoint_from_before_the_schedule_resumes_on_the_rule() -> None:
    from shoal.config import load_config
    from shoal.run.runner import Runner

    runner = Runner(load_config("cartpole", ["run.learning_starts=10", "run.train_freq=4"]))
    runner.load_state_dict({"loop": {"step": 30}})  # no "schedule" entry
    assert runner.schedule.owe(30) == 0 and runner.schedule.owe(32) == 1


def test_updates_given_back_are_owed_again() -> None:
    s = UpdateSchedule(learning_starts=0, train_freq=1, gradient_steps=1)
    assert s.owe(10) == 10
    s.give_back(4)  # a run cut after 6 of them
    assert s.owe(10) == 4 and s.owe(11) == 1


def test_a_learning_loop_cut_by_an_error_leaves_its_untaken_updates_owed(tmp_path, tiny) -> None:
    from shoal.config import load_config
    from shoal.runners.serial import SerialRunner

    runner = SerialRunner(load_config("cartpole", tiny(run__learning_starts=0, run__train_freq=1)))
    while len(runner.replay) < 20:
        runner.collect(0)
    calls, update = [0], runner.learner.update

    def fail_on_the_third(batch):
        calls[0] += 1
        if calls[0] == 3:
            raise KeyboardInterrupt
        return update(batch)

    runner.learner.update = fail_on_the_third
    owed = runner.schedule.owe(5)
    with pytest.raises(KeyboardInterrupt):
        runner.learn_steps(owed)
    assert runner.learner.updates == 2 and runner.schedule.granted == 2
    runner.close()
