package io.redislock;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A distribution of durations from {@link ClientStats}: how many, their sum,
 * the longest, three percentiles (estimated within their bucket, never above
 * {@code max}), and the count in each bucket (not cumulative): bucket
 * {@code i} holds the durations above {@code bounds().get(i - 1)} and up to
 * {@code bounds().get(i)}; the last one, those above one hour (its bound is
 * {@code null}).
 */
public record Histogram(
    long count, Duration sum, Duration max, Duration p50, Duration p90, Duration p99, long[] buckets,
    List<Duration> bounds) {

  /** The buckets' upper bounds, from the library (the last is null: no bound). */
  static final List<Duration> BOUNDS;

  static {
    List<Duration> b = new ArrayList<>();
    for (int i = 0; i < NativeLib.STATS_BUCKETS; i++) {
      long us = NativeLib.redislock_stats_bucket_bound_us(i);
      b.add(us == -1L ? null : Duration.ofNanos(us * 1000));
    }
    BOUNDS = Collections.unmodifiableList(b);
  }

  public Histogram {
    buckets = buckets.clone();
  }

  @Override
  public long[] buckets() {
    return buckets.clone();
  }

  static Histogram of(long[] raw, int at) {
    long[] buckets = new long[NativeLib.STATS_BUCKETS];
    System.arraycopy(raw, at + 6, buckets, 0, buckets.length);
    return new Histogram(raw[at], us(raw[at + 1]), us(raw[at + 2]), us(raw[at + 3]), us(raw[at + 4]),
        us(raw[at + 5]), buckets, BOUNDS);
  }

  private static Duration us(long v) {
    return Duration.ofNanos(v * 1000);
  }

  /** The snake_case form every language shows: counts and microseconds. */
  Map<String, Object> asMap() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("count", count);
    m.put("sum_us", sum.toNanos() / 1000);
    m.put("max_us", max.toNanos() / 1000);
    m.put("p50_us", p50.toNanos() / 1000);
    m.put("p90_us", p90.toNanos() / 1000);
    m.put("p99_us", p99.toNanos() / 1000);
    List<Long> b = new ArrayList<>();
    for (long x : buckets) {
      b.add(x);
    }
    m.put("buckets", b);
    return m;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Histogram h && count == h.count && sum.equals(h.sum) && max.equals(h.max)
        && p50.equals(h.p50) && p90.equals(h.p90) && p99.equals(h.p99)
        && java.util.Arrays.equals(buckets, h.buckets);
  }

  @Override
  public int hashCode() {
    return java.util.Objects.hash(count, sum, max, p50, p90, p99, java.util.Arrays.hashCode(buckets));
  }

  @Override
  public String toString() {
    return "Histogram{count=" + count + ", p50=" + p50 + ", p99=" + p99 + ", max=" + max + "}";
  }
}
