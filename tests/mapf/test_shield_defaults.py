"""With its defaults only, a trained MAPF policy through the PIBT shield is at least PIBT
on held-out generated instances: as many solved, and no more moves on those both solve.
The run in ``data/mapf_run`` is the ``mapf`` preset trained for 20 minutes on 2 cores
(``shoal train mapf --set run.max_minutes=20``; its ``config.toml`` and ``best.pt``),
evaluated here as a user would, with no ``--shield-guide`` (benchmarks/RESULTS.md, "MAPF:
the shield's measured default", has the full figures)."""

import json
from pathlib import Path

import pytest

from shoal.cli import main
from shoal.mapf.baselines import pibt_policy
from shoal.mapf.evaluate import evaluate, generated_instances

pytestmark = pytest.mark.timeout(300)

RUN = Path(__file__).parent / "data" / "mapf_run"

TARGETS = [(4, 10, 8), (8, 20, 4), (16, 40, 2)]
"""(agents, map side, instances): the README's targets, a few held-out instances each."""


@pytest.mark.parametrize(("agents", "size", "instances"), TARGETS)
def test_the_default_guide_through_the_shield_is_at_least_pibt(
    tmp_path, capsys, agents, size, instances
):
    out = tmp_path / "report.json"
    args = ["--generate", "--agents", agents, "--size", size, "--instances", instances]
    code = main(
        ["mapf", "eval", str(RUN), *map(str, args), "--shield", "pibt", "--no-baselines"]
        + ["--out", str(out)]
    )
    assert code == 0, capsys.readouterr().err
    ours = json.loads(out.read_text())["episodes"]["shoal+pibt"]
    pibt = evaluate([pibt_policy()], generated_instances(agents, size, instances, seed=0)).episodes
    pibt = pibt["pibt"]
    assert sum(e["success"] for e in ours) >= sum(e.success for e in pibt)
    both = [i for i, (a, b) in enumerate(zip(ours, pibt)) if a["success"] and b.success]
    assert both
    assert sum(ours[i]["sum_of_costs"] for i in both) <= sum(pibt[i].sum_of_costs for i in both)
