"""client.doctor(): the core's checks, seen from Python (the checks
themselves are tested in the Rust suite, tests/doctor.rs)."""
import asyncio

import pytest

import redislock
from redis_server import RedisServer
from redislock import Client, Finding, LockConnectionError, LockQuorumError, Report

CHECKS_OK = ["server", "eviction", "scripting", "time", "pubsub", "clients", "latency", "lock-cycle"]


def of(report, check):
    return [f for f in report.findings if f.check == check]


def one(report, check, severity):
    found = of(report, check)
    assert len(found) == 1, f"one {check} finding expected in:\n{report}"
    assert found[0].severity == severity, f"{check} in:\n{report}"
    return found[0]


def test_a_default_server_is_safe_with_every_check(server, client, raw):
    report = client.doctor()
    assert isinstance(report, Report)
    assert report.is_safe is True
    assert report.target == f"127.0.0.1:{server.port}"
    for check in CHECKS_OK:
        one(report, check, "ok")
    # The harness runs servers without persistence.
    p = one(report, "persistence", "warning")
    assert "persistence is off" in p.message
    assert "appendonly yes" in p.fix
    assert report.worst == "warning"
    for f in report.findings:
        assert isinstance(f, Finding)
        assert f.severity in ("ok", "warning", "unsafe")
        assert all(isinstance(v, str) for v in (f.check, f.server, f.message, f.fix))
        assert f.fix == "" or f.severity != "ok"
    text = str(report)
    assert text.startswith(f"redislock doctor: {report.target}\n")
    assert text.splitlines()[-1] == "verdict: safe for locks, 1 warning"
    assert "warning persistence" in text
    assert repr(report) == f"<redislock.Report {report.target} worst=warning findings={len(report.findings)}>"
    assert repr(p).startswith("Finding(severity='warning', check='persistence', server=")
    assert raw.keys("*") == []  # nothing left on the server
    assert redislock.Report is Report and redislock.Finding is Finding
    assert {"Report", "Finding"} <= set(redislock.__all__)


def test_the_report_is_read_only(client):
    report = client.doctor()
    with pytest.raises(AttributeError):
        report.target = "x"
    with pytest.raises(AttributeError):
        report.findings[0].severity = "ok"
    report.findings.clear()  # a copy: the report keeps its own
    assert report.findings
    with pytest.raises(TypeError):
        Report()
    with pytest.raises(TypeError):
        Finding()


def test_an_eviction_policy_that_can_evict_a_lock_is_unsafe(client, raw):
    # As `--maxmemory 100mb --maxmemory-policy allkeys-lru` on the command line.
    raw.config_set("maxmemory", "100mb")
    raw.config_set("maxmemory-policy", "allkeys-lru")
    report = client.doctor()
    assert report.is_safe is False
    assert report.worst == "unsafe"
    e = one(report, "eviction", "unsafe")
    assert "allkeys-lru" in e.message
    assert "noeviction" in e.fix
    last = str(report).splitlines()[-1]
    assert last.startswith("verdict: UNSAFE: 1 finding makes locks unsafe"), last
    assert "UNSAFE  eviction" in str(report)


def test_an_unreachable_server_raises_lock_connection_error(dead_url):
    with pytest.raises(LockConnectionError) as info:
        Client(dead_url).doctor()
    assert isinstance(info.value, ConnectionError)
    assert "127.0.0.1" in str(info.value)


def test_redlock_reports_a_node_down_and_raises_without_a_majority(dead_url):
    servers = [RedisServer() for _ in range(2)]
    try:
        report = Client([s.url for s in servers] + [dead_url]).doctor()
        reach = one(report, "reach", "warning")
        assert reach.server == dead_url.split("//")[1].split("/")[0]
        assert one(report, "redlock", "ok").message.startswith("3 nodes, a majority of 2 needed")
        one(report, "lock-cycle", "ok")
        assert report.is_safe
        with pytest.raises(LockQuorumError):
            Client([servers[0].url, dead_url, dead_url]).doctor()
    finally:
        for s in servers:
            s.stop()


def test_doctor_async(client, raw, dead_url):
    async def main():
        safe = await client.doctor_async()
        raw.config_set("maxmemory", "100mb")
        raw.config_set("maxmemory-policy", "allkeys-lru")
        # Two at once: neither holds the event loop.
        unsafe, again = await asyncio.gather(client.doctor_async(), client.doctor_async())
        with pytest.raises(LockConnectionError):
            await Client(dead_url).doctor_async()
        return safe, unsafe, again

    safe, unsafe, again = asyncio.run(main())
    assert isinstance(safe, Report) and safe.is_safe
    one(safe, "lock-cycle", "ok")
    assert not unsafe.is_safe and not again.is_safe
    one(unsafe, "eviction", "unsafe")
    assert str(unsafe).splitlines()[-1].startswith("verdict: UNSAFE")
