"""With its defaults only, a trained MAPF policy through the PIBT shield is at least PIBT
on held-out generated instances: as many solved, and no more moves on those both solve.
The run in ``data/mapf_run`` is the ``mapf`` preset trained for the README's hour on 2
cores (``shoal train mapf --set run.max_minutes=60``; its ``config.toml`` and ``best.pt``),
evaluated here as a user would, with no ``--shield-guide``, on the 50 held-out instances
per target that benchmarks/RESULTS.md ("MAPF: the shield's measured default") reports: on
a few of them either ranking can win by a few moves (the first 4 of 8 x 20 cost this run
2% more than PIBT), over 50 the learned one is 2-3% below PIBT on all three targets."""

import json
from pathlib import Path

import pytest

from shoal.cli import main
from shoal.mapf.baselines import pibt_policy
from shoal.mapf.evaluate import _policies, evaluate, generated_instances

pytestmark = pytest.mark.timeout(300)

RUN = Path(__file__).parent / "data" / "mapf_run"

TARGETS = [(4, 10, 50), (8, 20, 50), (16, 40, 50)]
"""(agents, map side, instances): the README's targets, RESULTS' held-out instances
(about 30 s in all, shielded play only)."""


def _at_least_pibt(ours: list[tuple[bool, int]], agents: int, size: int, instances: int) -> None:
    """``ours`` (solved, sum of costs) per instance solves as many as PIBT, at no higher
    a sum of costs on the instances both solve."""
    pibt = evaluate([pibt_policy()], generated_instances(agents, size, instances, seed=0))
    theirs = [(e.success, e.sum_of_costs) for e in pibt.episodes["pibt"]]
    assert sum(s for s, _ in ours) >= sum(s for s, _ in theirs)
    both = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a[0] and b[0]]
    assert both
    assert sum(ours[i][1] for i in both) <= sum(theirs[i][1] for i in both)


def test_the_users_command_through_the_shield_is_at_least_pibt(tmp_path, capsys):
    """``shoal mapf eval RUN --shield pibt`` with no ``--shield-guide``, on 8 of 4 x 10 (the
    command also plays the policy unshielded, which on the larger maps wanders to the
    step cap: they are played below through the policies it builds)."""
    out = tmp_path / "report.json"
    args = ["--generate", "--agents", "4", "--size", "10", "--instances", "8"]
    code = main(
        ["mapf", "eval", str(RUN), *args, "--shield", "pibt", "--no-baselines"]
        + ["--out", str(out)]
    )
    assert code == 0, capsys.readouterr().err
    ours = json.loads(out.read_text())["episodes"]["shoal+pibt"]
    _at_least_pibt([(e["success"], e["sum_of_costs"]) for e in ours], 4, 10, 8)


@pytest.mark.parametrize(("agents", "size", "instances"), TARGETS)
def test_the_default_guide_through_the_shield_is_at_least_pibt(agents, size, instances):
    """The shielded policy ``shoal mapf eval --shield pibt`` builds with the defaults."""
    shielded = _policies(RUN, baselines=False, shield="pibt")[1]
    assert shielded.name == "shoal+pibt"
    report = evaluate([shielded], generated_instances(agents, size, instances, seed=0))
    ours = [(e.success, e.sum_of_costs) for e in report.episodes["shoal+pibt"]]
    _at_least_pibt(ours, agents, size, instances)
