import doctest
import importlib
import pkgutil

import pytest

import ferry


def test_all_lists_the_public_names_sorted():
    public = sorted(name for name in vars(ferry) if not name.startswith("_") and name not in SUBMODULES)
    assert sorted([*public, "__version__"]) == ferry.__all__


SUBMODULES = {"checkpoint", "cli", "devices", "distributed", "errors", "lint", "placement", "sampler"}


def test_every_error_is_a_ferry_error():
    for name in ferry.__all__:
        obj = getattr(ferry, name)
        if isinstance(obj, type) and name.endswith("Error"):
            assert issubclass(obj, ferry.FerryError), name


def test_version_matches_metadata():
    from importlib.metadata import version

    assert version("ferry") == ferry.__version__


MODULES = sorted(m.name for m in pkgutil.walk_packages(ferry.__path__, "ferry.") if m.name != "ferry.__main__")


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    failures, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert failures == 0
