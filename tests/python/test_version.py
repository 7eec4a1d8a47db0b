"""One version: the module's, the installed distribution's, the core's
compiled into the very extension this process loaded, and Cargo.toml's."""
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


def test_the_loaded_extension_carries_the_cores_version_and_is_not_the_c_library():
    # The core's VERSION, compiled into the extension module (bindings/python).
    assert native.__version__ == redislock.__version__
    # The extension is its own crate: it does not export the C ABI (the C
    # library is libredislock.so, which Python never loads).
    lib = ctypes.CDLL(native.__file__)
    try:
        lib.redislock_version
    except AttributeError:
        pass
    else:
        raise AssertionError(f"{native.__file__} exports the C ABI's redislock_version")
    with open("/proc/self/maps") as maps:
        mapped = {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}
    ours = sorted(f for f in mapped if "redislock" in os.path.basename(f) or f == os.path.realpath(native.__file__))
    assert ours == [os.path.realpath(native.__file__)]
