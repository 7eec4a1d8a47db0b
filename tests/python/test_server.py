"""$REDIS_SERVER chooses the server every test runs against (Redis or
Valkey): the harness runs that binary, and tells the family from INFO."""
import os
import shutil
import subprocess

from redis_server import server_bin, server_info


def test_the_server_is_the_binary_redis_server_names(server, raw):
    path = shutil.which(server_bin())
    assert path, server_bin()
    # Debian's redis-server is a link to redis-check-rdb: compare real paths.
    assert os.readlink(f"/proc/{server.proc.pid}/exe") == os.path.realpath(path)
    family, version = server_info(raw)
    assert family == ("valkey" if os.path.basename(path).startswith("valkey") else "redis")
    banner = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout
    assert f"v={version} " in banner, (version, banner)
