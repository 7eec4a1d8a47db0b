"""pytest fixtures: a throwaway redis-server per test (see redis_server.py)."""
import pytest
import redis

from redis_server import RedisServer, free_port, server_bin


def pytest_report_header(config):
    return f"server: {server_bin()} ($REDIS_SERVER chooses it)"


@pytest.fixture
def server():
    s = RedisServer()
    yield s
    s.stop()


@pytest.fixture
def raw(server):
    r = redis.Redis(port=server.port)
    yield r
    r.close()


@pytest.fixture
def client(server):
    import redislock
    return redislock.Client(server.url)


@pytest.fixture
def dead_url():
    return f"redis://127.0.0.1:{free_port()}/0"
