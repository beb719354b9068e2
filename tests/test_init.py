import doctest
import importlib
import pkgutil
import subprocess
import sys

import pytest

import ferry


def test_all_lists_the_public_names_sorted():
    assert sorted([*ferry._NAMES, "__version__"]) == ferry.__all__


def test_every_public_name_resolves_and_is_kept():
    for name in ferry.__all__:
        value = getattr(ferry, name)
        assert value is vars(ferry)[name]
        assert name in dir(ferry)


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ferry.nope  # noqa: B018


def test_subpackages_are_attributes_and_sanitize_stays_the_function():
    import ferry.sanitizer.pretend

    assert callable(ferry.sanitize)
    assert ferry.sanitize is ferry.sanitizer.sanitize
    assert ferry.sanitizer.pretend.pretend_cuda is not None
    assert ferry.distributed.init is not None


def test_cli_run_is_the_entry_function_after_every_command_module_is_imported():
    import ferry.cli
    import ferry.cli.run_script

    assert callable(ferry.cli.run)


def test_import_ferry_imports_no_torch():
    code = "import sys, ferry; ferry.FerryError; print(sorted(m for m in sys.modules if m.startswith('torch')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "[]\n" == out


def test_every_error_is_a_ferry_error():
    for name in ferry.__all__:
        obj = getattr(ferry, name)
        if isinstance(obj, type) and name.endswith("Error"):
            assert issubclass(obj, ferry.FerryError), name


def test_version_matches_metadata():
    from importlib.metadata import version

    assert version("ferry") == ferry.__version__


def test_deprecated_dcp_alias_warns_and_reexports():
    sys.modules.pop("ferry.checkpoint.dcp", None)
    with pytest.warns(DeprecationWarning, match=r"ferry\.checkpoint\.sharded"):
        import ferry.checkpoint.dcp as old
    from ferry.checkpoint.sharded import FerryStorageWriter

    assert old.FerryStorageWriter is FerryStorageWriter


#: deprecated aliases warn when imported (tested above)
DEPRECATED = {"ferry.checkpoint.dcp", "ferry.__main__"}
MODULES = sorted(m.name for m in pkgutil.walk_packages(ferry.__path__, "ferry.") if m.name not in DEPRECATED)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    failures, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert failures == 0
