"""The package's layering, read from its import statements: no module circle, the parts
below the runners import no runner or domain, and the rules written once stay in one
place."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import shoal

ROOT = Path(shoal.__file__).parent
LOWER = ("shoal.agent", "shoal.replay", "shoal.sync")
"""Parts every runner builds on: they import no runner and no domain."""
UPPER = ("shoal.runners", "shoal.mapf", "shoal.games", "shoal.tabular", "shoal.api", "shoal.cli")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The shoal modules ``path`` imports, at the top or inside functions (those run too,
    later); not those under ``if TYPE_CHECKING``, which never run."""
    out: set[str] = set()
    stack: list[ast.AST] = [ast.parse(path.read_text())]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            stack += node.orelse
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("shoal")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("shoal"):
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
        stack += list(ast.iter_child_nodes(node))
    return out


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}
    return {name: {m for m in imports(path) if m in modules} for name, path in modules.items()}


def test_no_module_circle() -> None:
    edges = graph()
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if nxt in path[:-1] or state.get(nxt) == 1:
                if nxt != node and not node.startswith(nxt + "."):  # a package's own parts
                    raise AssertionError(f"import circle: {' -> '.join([*path, nxt])}")
            elif state.get(nxt) is None:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])


def test_lower_layers_import_no_runner_or_domain() -> None:
    edges = graph()
    bad = [
        f"{a} -> {b}"
        for a, targets in edges.items()
        if a.startswith(LOWER)
        for b in targets
        if b.startswith(UPPER)
    ]
    assert bad == []


def git_grep(pattern: str) -> list[str]:
    out = subprocess.run(
        ["git", "grep", "-n", "-F", pattern, "--", "shoal", "tests", "benchmarks"],
        cwd=ROOT.parent,
        capture_output=True,
        text=True,
    )
    return [line for line in out.stdout.splitlines() if line and "test_layout.py" not in line]


def test_the_spawn_context_and_the_schedule_rule_are_written_once() -> None:
    assert [line.split(":")[0] for line in git_grep('get_context("spawn")')] == [
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
