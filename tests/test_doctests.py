"""Every docstring example in the package runs and shows what it claims."""

import doctest
import importlib
import pkgutil

import pytest

import shoal

MODULES = sorted(m.name for m in pkgutil.walk_packages(shoal.__path__, "shoal."))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
