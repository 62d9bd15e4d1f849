"""Learning outcome: the cartpole preset solves CartPole (greedy mean >= 475 over 20
episodes) within 50k env steps for seeds 0, 1 and 2."""

import pytest

import shoal

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cartpole_preset_solves(tmp_path, seed):
    result = shoal.train(
        "cartpole",
        overrides=[f"run.seed={seed}", "run.progress=false", f"run.out='{tmp_path}'"],
    )
    assert result.solved_step is not None, result
    assert result.solved_step <= 50_000
    assert result.eval_return >= 475
