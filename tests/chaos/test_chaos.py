"""Failovers under load, in quick mode: tests/chaos/chaos.py with one C, one
Python and one PHP worker contending for one lock on a Sentinel deployment
(a master, a replica, three sentinels) and on a Cluster (3 masters with a
replica each), while the lock's master is failed over, killed or frozen
once. Each scenario runs once (10-20 s) and its figures serve every test
below.

Correctness is asserted: no two workers hold the lock at once (their
CLOCK_MONOTONIC holding intervals never intersect), no update of the file
store is lost, no fence is refused by the store, and every worker acquires
again once the deployment is healthy. Three scenarios have two owners today
and are marked xfail with the reason; so are the liveness figures
(promotion to the first acquisition, what the old master served after the
promotion) until the core work of #36 lands. The long version of every
scenario prints them all: tests/chaos/chaos.py --all.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chaos  # noqa: E402  (tests/chaos/chaos.py)

# One worker per language.
WORKERS = len(chaos.LANGS)


def scenario_id(deployment: str, fault: str) -> str:
    return "%s-%s" % (deployment, fault)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    """run(deployment, fault) -> the figures of that quick scenario, run on
    first use and kept for the other tests of the module."""
    results = {}

    def run(deployment: str, fault: str) -> dict:
        key = (deployment, fault)
        if key not in results:
            sc = chaos.Scenario(deployment=deployment, fault=fault, seconds=45.0, first_fault=2.0, faults=1,
                                until_recovered=True, workers_per_language=1)
            workdir = tmp_path_factory.mktemp("chaos-" + scenario_id(deployment, fault))
            results[key] = chaos.run_scenario(sc, workdir=str(workdir))
            print(chaos.summary(results[key]))
        return results[key]

    yield run
    chaos.kill_all()


def figures(r: dict) -> dict:
    """The one fault's figures, after checking that the harness did its part."""
    assert not r.get("harness_error"), r["harness_error"]
    assert r["faults_injected"] == 1, r
    return r["faults"][0]


ALL = [("sentinel", "failover"), ("sentinel", "kill"), ("sentinel", "freeze"),
       ("cluster", "failover"), ("cluster", "kill"), ("cluster", "freeze")]

TWO_OWNERS_TODAY = pytest.mark.xfail(
    strict=False,
    reason="#36 core work in progress: after a clean Sentinel failover, or a freeze of the master, the old "
           "master stays a master until Sentinel converts it (about 10 s); the clients' pooled connections "
           "keep locking there while new connections lock on the new master: two owners")
STALE_GRANT_AFTER_SIGCONT = pytest.mark.xfail(
    strict=False,
    reason="#36 core work in progress: a frozen cluster master, resumed, runs the lock requests queued in its "
           "sockets (4 to 6 lock scripts after each SIGCONT) before it learns that its replica took over; now and "
           "then a client takes that grant while another holds the lock on the new master (2 overlaps in 4 "
           "faults in a 60 s run)")
LIVENESS = pytest.mark.xfail(strict=False, reason="#36 core work in progress")
TWO_OWNERS = {("sentinel", "failover"): TWO_OWNERS_TODAY, ("sentinel", "freeze"): TWO_OWNERS_TODAY,
              ("cluster", "freeze"): STALE_GRANT_AFTER_SIGCONT}


@pytest.mark.parametrize("deployment,fault", [pytest.param(d, f, id=scenario_id(d, f)) for d, f in ALL])
def test_the_fault_is_injected_and_every_worker_acquires_again_afterwards(scenario, deployment, fault):
    r = scenario(deployment, fault)
    f = figures(r)
    assert f["promotion_s"] is not None, f"no replica was promoted: {f}"
    assert r["healthy_after_every_fault"], f"the deployment did not heal: {f.get('unhealthy')}"
    assert not f.get("extra_failovers"), f"the deployment failed over on its own too: {f['events']}"
    assert all(r["acq_by_lang"][lang] > 0 for lang in chaos.LANGS), r["acq_by_lang"]
    assert r["recovered"], f"never acquired after the deployment healed: {r['workers_not_recovered']}"
    assert all(code == 0 for code in r["worker_exits"].values()), r["worker_exits"]
    assert not r["worker_stderr"], r["worker_stderr"]
    assert r["store_errors"] == 0 and r["zero_fences"] == 0, r


@pytest.mark.parametrize("deployment,fault", [
    pytest.param(d, f, id=scenario_id(d, f), marks=TWO_OWNERS.get((d, f), ())) for d, f in ALL])
def test_never_two_owners_no_lost_update_no_fence_going_back(scenario, deployment, fault):
    r = scenario(deployment, fault)
    figures(r)
    assert r["overlaps"] == 0, f"{r['overlaps']} overlapping holds, e.g. {r['overlap_examples'][:3]}"
    assert r["lost_updates"] == 0, f"counter {r['final_counter']}, {r['expected_counter']} increments"
    assert r["fence_regressions"] == 0, r["fence_regression_examples"]
    assert all(r["fences_increasing_per_worker"].values()), r["fences_increasing_per_worker"]


@LIVENESS
@pytest.mark.parametrize("deployment,fault", [
    pytest.param(d, f, id=scenario_id(d, f))
    for d, f in [("sentinel", "failover"), ("sentinel", "kill"), ("sentinel", "freeze"), ("cluster", "kill")]])
def test_first_acquisition_within_250_ms_of_the_promotion(scenario, deployment, fault):
    f = figures(scenario(deployment, fault))
    ms = f["promo_to_first_acq_ms"]
    assert ms is not None and ms <= 250, f"first acquisition {ms} ms after the promotion"


@LIVENESS
@pytest.mark.parametrize("deployment,fault", [pytest.param(d, f, id=scenario_id(d, f)) for d, f in ALL])
def test_every_worker_acquires_within_1_s_of_the_promotion(scenario, deployment, fault):
    f = figures(scenario(deployment, fault))
    ms = f["promo_to_all_workers_ms"]
    assert ms is not None and ms <= 1000, f"the last worker acquired {ms} ms after the promotion"


@LIVENESS
def test_after_a_clean_sentinel_failover_the_old_master_serves_only_in_flight_lock_scripts(scenario):
    f = figures(scenario("sentinel", "failover"))
    stale = f["stale_scripts"]
    assert stale is not None and stale <= WORKERS, \
        f"the old master ran {stale} lock scripts after the promotion ({f['stale']}, {f['stale_window_ms']} ms)"
