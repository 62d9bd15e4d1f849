"""The config as ``--help`` reads it: every key with its type, value and docstring."""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap
from typing import Any

from shoal.config.loading import sections_of
from shoal.config.schema import Config, section_items

__all__ = ["describe_config", "describe_section", "field_docs"]


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal right below it in the class body)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in zip(body, body[1:]):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def describe_config(cfg: Config | None = None) -> str:
    """Every config key with its type, current value and docstring, for ``--help``."""
    cfg = cfg or Config()
    lines = []
    for name, obj in section_items(cfg):
        lines.append(f"[{name}] {inspect.getdoc(type(obj))}")
        docs = field_docs(type(obj))
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            lines.append(f"  {name}.{f.name} = {value!r}")
            lines.append(f"      {docs.get(f.name, '')}{_registered(name, f.name)}")
    return "\n".join(lines)


def _registered(section: str, key: str) -> str:
    """What the registry allows for a key whose values are registered, not fixed."""
    if (section, key) != ("run", "runner"):
        return ""
    from shoal.registry import runner_names

    return f" Registered: {', '.join(runner_names())}."


def describe_section(obj: Any, name: str) -> str:
    """Every key of one section on its own, as :func:`describe_config` lists a config's,
    for ``--help``."""
    return describe_config(sections_of(name, obj))
