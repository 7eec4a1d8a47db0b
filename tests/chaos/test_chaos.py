"""Failovers under load, in quick mode: tests/chaos/chaos.py with one C, one
Python and one PHP worker contending for one lock on a Sentinel deployment
(a master, a replica, three sentinels) and on a Cluster (3 masters with a
replica each), while the lock's master is failed over, killed or frozen
once. Each scenario runs once (10-20 s) and its figures serve every test
below.

Correctness is asserted: no two workers hold the lock at once (their
CLOCK_MONOTONIC holding intervals never intersect), no update of the file
store is lost, no fence is refused by the store, every worker acquires
again once the deployment is healthy, and after a clean Sentinel failover
the old master runs no lock script but those in flight (its own INFO
commandstats). One scenario keeps a known hazard and is marked xfail with
its reason (a frozen cluster master, resumed). How fast the clients follow (promotion to the first
acquisition, to every worker's) is a figure, not an assertion here: the
long runs print it, `make chaos` (tests/chaos/chaos.py --all).

Last, one network partition (tests/chaos/partition.py, two network
namespaces made and deleted by the test): a Sentinel split brain, which
must grant nothing beside the old master once the replica is promoted;
and one clock fault (tests/chaos/clocks.py, libfaketime): Redlock nodes
whose clocks jump ahead.
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


# A frozen cluster master, resumed, serves as a master until a message of
# the cluster bus tells it that its replica took over. A client whose slot
# map still names it (it sent nothing there during the freeze) can be
# granted the lock from that stale copy meanwhile: seen once in 14 freeze
# faults (0.044 ms of overlap, with both cores busy). Known, not fixed:
# see docs/deployments.md, Cluster; wait_replicas or the fence covers it.
RESUMED_CLUSTER_MASTER = pytest.mark.xfail(
    strict=False,
    reason="a resumed frozen cluster master can grant from its stale copy before it learns of the failover")
KNOWN_HAZARD = {("cluster", "freeze"): RESUMED_CLUSTER_MASTER}


@pytest.mark.parametrize("deployment,fault", [
    pytest.param(d, f, id=scenario_id(d, f), marks=KNOWN_HAZARD.get((d, f), ())) for d, f in ALL])
def test_never_two_owners_no_lost_update_no_fence_going_back(scenario, deployment, fault):
    r = scenario(deployment, fault)
    figures(r)
    assert r["overlaps"] == 0, f"{r['overlaps']} overlapping holds, e.g. {r['overlap_examples'][:3]}"
    assert r["lost_updates"] == 0, f"counter {r['final_counter']}, {r['expected_counter']} increments"
    assert r["fence_regressions"] == 0, r["fence_regression_examples"]
    assert all(r["fences_increasing_per_worker"].values()), r["fences_increasing_per_worker"]


def test_after_a_clean_sentinel_failover_the_old_master_serves_only_in_flight_lock_scripts(scenario):
    f = figures(scenario("sentinel", "failover"))
    stale = f["stale_scripts"]
    assert stale is not None and stale <= WORKERS, \
        f"the old master ran {stale} lock scripts after the promotion ({f['stale']}, {f['stale_window_ms']} ms)"


def test_a_sentinel_split_brain_grants_nothing_beside_the_old_master(tmp_path):
    """tests/chaos/partition.py, short: the master and one worker cut off by
    the network (two namespaces, one link) from the replica, the three
    sentinels and another worker, for 8 s. The cut-off client stops
    granting before the sentinels promote the replica, so no lock is
    granted beside the old master once there is a new one."""
    import partition  # tests/chaos/partition.py

    r = partition.scenario(str(tmp_path), wait_replicas=False, before=2.0, cut=8.0, after=8.0, per_side=1)
    print(partition.table([r]))
    assert r["promotion_after_cut_ms"] is not None, "the sentinels promoted the replica: %s" % r
    assert r["old_side_grants_after_promotion"] == 0, r
    assert (r["overlaps"], r["lost_updates"], r["fence_regressions"]) == (0, 0, 0), r
    assert r["promotion_to_new_side_first_grant_ms"] is not None, "the new side is served: %s" % r
    assert r["workers_not_granted_after_heal"] == [], r
    assert r["keys_left"] == [], r



def test_redlock_nodes_whose_clocks_jump_ahead_grant_no_second_owner_and_keep_fences_rising(tmp_path):
    """tests/chaos/clocks.py, short: three Redlock nodes under libfaketime,
    each clock jumping 10 s ahead (five TTLs) in turn, 2 s apart, under
    three fenced workers. Each jump expires the lock on that node at once;
    the other two still hold it, and fenced grants raise their majority's
    counters, so the fences drawn on the jumped node never put a later
    holder's number below an earlier one."""
    import clocks  # tests/chaos/clocks.py

    r = clocks.redlock_jumps(str(tmp_path), workers_n=3, every=2.0)
    print(clocks.partition.table([r], clocks.COLUMNS))
    assert r["server_offsets_s"] == [10.0, 10.0, 10.0], "every node's clock jumped: %s" % r["server_offsets_s"]
    assert (r["overlaps"], r["lost_updates"]) == (0, 0), r
    assert r["fence_regressions"] == 0, r["fence_regression_examples"]
    assert r["workers_not_recovered"] == [], r
    assert r["keys_left"] == [], r
