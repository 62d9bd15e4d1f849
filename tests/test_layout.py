"""The package's layering, read from its import statements: no module circle, every
import down the floors (two named arrows excepted), and the rules written once stay in one
place."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import shoal

ROOT = Path(shoal.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The shoal modules ``path`` imports: at the top, inside functions (those run too,
    later) and under ``if TYPE_CHECKING`` (a type names the layer it comes from). Importing
    ``a.b.c`` runs package ``a.b``'s ``__init__`` too, so it counts as importing that."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("shoal")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("shoal"):
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    parts = [name.split(".") for name in out]
    return {".".join(p[:i]) for p in parts for i in range(2, len(p) + 1)}


def graph() -> dict[str, set[str]]:
    """Module -> the shoal modules it imports, a package's import of its own parts left out
    (its ``__init__`` gathering them is not an arrow back)."""
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
    return {
        name: {m for m in imports(path) if m in modules and not m.startswith(f"{name}.")} - {name}
        for name, path in modules.items()
    }


def test_no_module_circle() -> None:
    edges = graph()
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt) :]
                raise AssertionError(f"import circle: {' -> '.join([*cycle, nxt])}")
            if state.get(nxt) is None:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])


FLOORS = (
    ("shoal.errors",),
    ("shoal.replay", "shoal.sync"),
    ("shoal.run",),
    ("shoal.registry", "shoal.config", "shoal.options"),
    ("shoal.envs",),
    ("shoal.agent",),
    ("shoal.recipes",),
    ("shoal.runners", "shoal.mapf", "shoal.games", "shoal.tabular"),
    ("shoal.api", "shoal.policy", "shoal.tune", "shoal.bench", "shoal.cli"),
)
"""The packages by floor, lowest first (``docs/ARCHITECTURE.md`` draws them): a module
imports its own floor and those below."""
UPWARD = {
    ("shoal.run", "shoal.registry"): "the run's preflight and consent look names up",
    ("shoal.registry", "shoal.recipes"): "a class the config names is checked against the "
    "recipe contract before it is called",
}
"""The only arrows allowed up a floor (both lazy: inside the function that needs them)."""


def floor_of(module: str) -> tuple[int, str]:
    for i, packages in enumerate(FLOORS):
        for package in packages:
            if module == package or module.startswith(package + "."):
                return i, package
    raise AssertionError(f"{module} is on no floor: add its package to FLOORS")


def test_imports_run_down_the_floors() -> None:
    """Every import goes to the module's own floor or one below, but the arrows UPWARD
    names (and says why)."""
    up: dict[tuple[str, str], list[str]] = {}
    for a, targets in graph().items():
        if a == "shoal":
            continue
        fa, pa = floor_of(a)
        for b in targets:
            fb, pb = floor_of(b)
            if fb > fa:
                up.setdefault((pa, pb), []).append(f"{a} -> {b}")
    assert set(up) <= set(UPWARD), {k: v for k, v in up.items() if k not in UPWARD}
    assert set(up) == set(UPWARD), f"no longer needed, drop from UPWARD: {set(UPWARD) - set(up)}"


def git_grep(pattern: str) -> list[str]:
    out = subprocess.run(
        ["git", "grep", "-n", "-F", pattern, "--", "shoal", "tests", "benchmarks"],
        cwd=ROOT.parent,
        capture_output=True,
        text=True,
    )
    return [line for line in out.stdout.splitlines() if line and "test_layout.py" not in line]


def test_the_spawn_context_and_the_schedule_rule_are_written_once() -> None:
    assert git_grep('get_context("spawn")') == []  # shoal's own: workers.py's SPAWN
    assert [line.split(":")[0] for line in git_grep("(multiprocessing.context.SpawnContext)")] == [
        "shoal/sync/workers.py"
    ]
    assert [line.split(":")[0] for line in git_grep("// self.train_freq")] == [
        "shoal/run/schedule.py"
    ]
    assert git_grep("/ r.train_freq") == [] and git_grep("% r.train_freq") == []


def test_functions_fit_on_a_screen() -> None:
    # Env constructors that only validate their arguments are the exception.
    long = []
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                env_init = node.name == "__init__" and path.parent.name == "envs"
                if lines > 60 and not env_init:
                    long.append(f"{module_name(path)}.{node.name}: {lines} lines")
    assert long == []


def test_building_a_config_loads_no_runner_and_no_torch():
    """Sections are registered by name in light modules: a config (every section of it)
    is built without importing a runner, an agent part or torch."""
    code = (
        "import sys\n"
        "from shoal.config import Config, load_config\n"
        "Config()\n"
        "overrides = ['run.runner=ray', 'ray.actors=3', 'selfplay.pool_size=2']\n"
        "cfg = load_config('cartpole', overrides)\n"
        "assert cfg.ray.actors == 3\n"
        "heavy = [m for m in sys.modules if m == 'torch' or m.startswith('shoal.agent')\n"
        "         or (m.startswith('shoal.runners.') and m != 'shoal.runners.sections')]\n"
        "print(sorted(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_one_acting_component_one_spread_and_no_domain_in_the_runners() -> None:
    """The rollout loop, the Ape-X epsilon spread and the batch actor's wiring each exist
    once (shoal/agent/acting.py); a domain is a recipe, so no runner names one."""

    def in_shoal(pattern: str) -> set[str]:
        return {line.split(":")[0] for line in git_grep(pattern) if line.startswith("shoal/")}

    assert in_shoal("actor_epsilon(") == {"shoal/agent/acting.py", "shoal/agent/schedules.py"}
    assert in_shoal("BatchActor(") == {"shoal/agent/acting.py"}
    assert git_grep("ENV_RUNNERS") == []
    edges = graph()
    into_domains = [
        f"{a} -> {b}"
        for a, targets in edges.items()
        if a.startswith("shoal.runners")
        for b in targets
        if b.startswith(("shoal.mapf", "shoal.games"))
    ]
    assert into_domains == []


CONTRACT_USERS = ("shoal/runners", "shoal/run", "shoal/bench", "shoal/tune", "shoal/policy.py")
"""Where a recipe or an acting is used through its contract: the runners, the run loop,
the bench, the tuner and load_policy."""


def contract_uses(path: Path) -> list[tuple[str, str, int]]:
    """(which contract, member, line) of every ``recipe.X``, ``recipe_for(cfg).X``,
    ``*.traits.X`` and ``acting.X`` in ``path``."""
    uses = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", None)
        if isinstance(owner, ast.Call) and getattr(owner.func, "id", None) == "recipe_for":
            name = "recipe"
        if name in ("recipe", "acting", "traits"):
            uses.append((name, node.attr, node.lineno))
    return uses


def test_runners_ask_a_recipe_and_an_acting_only_what_their_contracts_declare() -> None:
    import dataclasses

    from shoal.agent.acting import ACTING_MEMBERS
    from shoal.recipes.contract import RECIPE_MEMBERS, RecipeTraits

    declared = {
        "recipe": set(RECIPE_MEMBERS),
        "acting": set(ACTING_MEMBERS),
        "traits": {f.name for f in dataclasses.fields(RecipeTraits)},
    }
    undeclared = []
    for where in CONTRACT_USERS:
        paths = (
            [ROOT.parent / where] if where.endswith(".py") else (ROOT.parent / where).rglob("*.py")
        )
        for path in paths:
            for contract, member, line in contract_uses(path):
                if member not in declared[contract]:
                    undeclared.append(f"{path.relative_to(ROOT.parent)}:{line} {contract}.{member}")
    assert undeclared == []


def test_every_recipe_implements_the_contract_with_named_arguments_only() -> None:
    """Every registered recipe has each member the contract declares, and none of its
    methods takes ``**kwargs`` (a runner's request would vanish in it)."""
    import inspect

    from shoal.agent.acting import Acting
    from shoal.recipes.contract import Recipe, RecipeTraits
    from shoal.registry import RECIPES, load_recipe

    assert {"dqn", "iqn", "r2d2", "c51", "hybrid", "mapf"} <= set(RECIPES)
    for name in list(RECIPES):
        cls = load_recipe(name)
        assert isinstance(cls(), Recipe), name
        assert isinstance(cls.traits, RecipeTraits), name
        for member, fn in inspect.getmembers(cls, inspect.isfunction):
            kinds = {p.kind for p in inspect.signature(fn).parameters.values()}
            assert inspect.Parameter.VAR_KEYWORD not in kinds, f"{name}.{member} takes **kwargs"
    from shoal.agent.acting import TransitionActing
    from shoal.agent.sequence_acting import SequenceActing
    from shoal.mapf.recipe import MapfActing

    for acting in (TransitionActing, SequenceActing, MapfActing):
        missing = [m for m in Acting.__dict__ if not m.startswith("_") and not hasattr(acting, m)]
        assert missing == [], (acting.__name__, missing)


def test_the_architecture_doc_lists_the_contracts_members() -> None:
    """docs/ARCHITECTURE.md's Recipe and Acting paragraphs name every member the Protocols
    declare, and no other."""
    import re

    from shoal.agent.acting import ACTING_MEMBERS
    from shoal.recipes.contract import RECIPE_MEMBERS

    doc = (ROOT.parent / "docs" / "ARCHITECTURE.md").read_text()
    for title, members in (("Recipe", RECIPE_MEMBERS), ("Acting", ACTING_MEMBERS)):
        paragraph = doc.split(f"- **{title}** (")[1].split("\n- **")[0]
        listed = paragraph.split("Members: ")[1].split(".")[0]
        assert set(re.findall(r"`(\w+)`", listed)) == set(members), title
