"""One version: the module's, the installed distribution's, the C ABI's
redislock_version() of the very library this process loaded, and Cargo.toml's."""
import ctypes
import importlib.metadata
import os
import re

import redislock
import redislock._native as native

CARGO_TOML = os.path.join(os.path.dirname(__file__), "..", "..", "Cargo.toml")


def cargo_version():
    with open(CARGO_TOML) as f:
        return re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)


def test_the_module_and_the_distribution_have_cargo_tomls_version():
    assert redislock.__version__ == cargo_version()
    assert importlib.metadata.version("redislock") == redislock.__version__


def test_redislock_version_of_the_loaded_library_is_the_modules():
    # dlopen of the loaded extension module hands back the same object.
    lib = ctypes.CDLL(native.__file__)
    lib.redislock_version.restype = ctypes.c_char_p
    assert lib.redislock_version().decode() == redislock.__version__
    with open("/proc/self/maps") as maps:
        mapped = {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}
    ours = sorted(f for f in mapped if "redislock" in os.path.basename(f) or f == os.path.realpath(native.__file__))
    assert ours == [os.path.realpath(native.__file__)]
