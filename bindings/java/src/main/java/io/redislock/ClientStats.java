package io.redislock;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What one client did since it was opened, from {@link RedisLockClient#stats()}
 * (no I/O): the counters and gauges of the C API's {@code redislock_stats},
 * camelCase, and under the snake_case names every language uses in
 * {@link #asMap()}. {@code waitTimes} is how long each acquisition took,
 * {@code heldTimes} how long each handle was held. Each figure is exact on
 * its own; two may be a few events apart when other threads use the client
 * meanwhile.
 */
public record ClientStats(
    long acquiredAtOnce,
    long acquiredAfterWait,
    long acquiredHandedOver,
    long acquireTimedOut,
    long acquireErrors,
    long releasesOk,
    long releasesNotOwner,
    long extendsOk,
    long extendsLost,
    long renewalsOk,
    long renewalsLost,
    long locksLost,
    long handoffsGiven,
    long handoffsReceived,
    long connectionErrors,
    long reconnects,
    long heldNow,
    long waitersNow,
    Histogram waitTimes,
    Histogram heldTimes,
    long acquiredLocks,
    long acquiredSemaphores,
    long acquiredReads,
    long acquiredWrites,
    long permitsHeldNow) {

  /** The longs of struct redislock_stats as this binding knows it (656 bytes). */
  static final int LONGS = 82;

  static ClientStats of(long[] raw) {
    return new ClientStats(
        raw[1],
        raw[2],
        raw[3],
        raw[4],
        raw[5],
        raw[6],
        raw[7],
        raw[8],
        raw[9],
        raw[10],
        raw[11],
        raw[12],
        raw[13],
        raw[14],
        raw[15],
        raw[16],
        raw[17],
        raw[18],
        Histogram.of(raw, 19),
        Histogram.of(raw, 48),
        raw[77],
        raw[78],
        raw[79],
        raw[80],
        raw[81]);
  }

  /** The figures under the names every language uses (histograms as maps of counts and microseconds). */
  public Map<String, Object> asMap() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("acquired_at_once", acquiredAtOnce);
    m.put("acquired_after_wait", acquiredAfterWait);
    m.put("acquired_handed_over", acquiredHandedOver);
    m.put("acquire_timed_out", acquireTimedOut);
    m.put("acquire_errors", acquireErrors);
    m.put("releases_ok", releasesOk);
    m.put("releases_not_owner", releasesNotOwner);
    m.put("extends_ok", extendsOk);
    m.put("extends_lost", extendsLost);
    m.put("renewals_ok", renewalsOk);
    m.put("renewals_lost", renewalsLost);
    m.put("locks_lost", locksLost);
    m.put("handoffs_given", handoffsGiven);
    m.put("handoffs_received", handoffsReceived);
    m.put("connection_errors", connectionErrors);
    m.put("reconnects", reconnects);
    m.put("held_now", heldNow);
    m.put("waiters_now", waitersNow);
    m.put("wait", waitTimes.asMap());
    m.put("held", heldTimes.asMap());
    m.put("acquired_locks", acquiredLocks);
    m.put("acquired_semaphores", acquiredSemaphores);
    m.put("acquired_reads", acquiredReads);
    m.put("acquired_writes", acquiredWrites);
    m.put("permits_held_now", permitsHeldNow);
    return Collections.unmodifiableMap(m);
  }
}
