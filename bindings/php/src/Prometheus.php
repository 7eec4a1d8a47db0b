<?php
declare(strict_types=1);

namespace RedisLock;

/**
 * Client::stats() as Prometheus samples, for promphp
 * (promphp/prometheus_client_php) or any other exporter. The metric names
 * are those of the Python collector, so that dashboards and alerts serve
 * both:
 *
 *   redislock_acquisitions_total{outcome="at_once|after_wait|handed_over|timed_out|error"}
 *   redislock_releases_total{outcome="ok|not_owner"}
 *   redislock_extends_total{outcome="ok|lost"}
 *   redislock_renewals_total{outcome="ok|lost"}
 *   redislock_locks_lost_total
 *   redislock_handoffs_total{direction="given|received"}
 *   redislock_connection_errors_total
 *   redislock_reconnects_total
 *   redislock_acquisitions_by_kind_total{kind="lock|semaphore|read|write"}
 *   redislock_locks_held, redislock_waiters, redislock_permits_held   (gauges)
 *   redislock_acquire_wait_seconds, redislock_held_seconds   (histograms)
 *
 * Each row is one sample: ['type' => 'counter'|'gauge'|'histogram',
 * 'namespace' => 'redislock', 'name' => the rest of the name, 'help',
 * 'labelNames', 'labelValues', 'value']. promphp joins a namespace and a
 * name with '_', so 'namespace' and 'name' go to it as they are: the full
 * name is "{namespace}_{name}". A histogram gives the samples of the
 * exposition format: one "{name}_bucket" row per bucket with its cumulative
 * count under the label le (22 bounds from 5e-05 to 3600.0 seconds, then
 * "+Inf"), "{name}_sum" in seconds and "{name}_count".
 *
 * With promphp: its Histogram only has observe(), which takes one
 * duration at a time, and its counters only go up by increments, while
 * these are totals since the client was opened. So feed the increments
 * since the previous snapshot of the same process (rows($now, $before))
 * into counters (Counter::incBy) and gauges (Gauge::incBy): promphp's
 * storage adds up the increments of every php-fpm worker. The histogram
 * rows go into counters of the same names ("..._bucket" with the label le),
 * on which PromQL's histogram_quantile() works as on a histogram:
 *
 *   $now = $client->stats();   // a Client::persistent() keeps counting across requests
 *   $before = apcu_fetch('redislock-stats-' . getmypid()) ?: null;
 *   foreach (RedisLock\Prometheus::rows($now, $before) as $row) {
 *       $metric = $row['type'] === 'gauge'
 *           ? $registry->getOrRegisterGauge($row['namespace'], $row['name'], $row['help'], $row['labelNames'])
 *           : $registry->getOrRegisterCounter($row['namespace'], $row['name'], $row['help'], $row['labelNames']);
 *       $metric->incBy($row['value'], $row['labelValues']);
 *   }
 *   apcu_store('redislock-stats-' . getmypid(), $now);
 *
 * For a glance without PromQL, the quantiles of stats() ('p50', 'p90',
 * 'p99' of 'wait' and 'held') can go into gauges of your own, with a label
 * per worker since gauges of different workers do not add up.
 */
final class Prometheus
{
    public const NAMESPACE = 'redislock';

    /** Counters: name, help, label name, and the stats key of each label value. */
    private const COUNTERS = [
        ['acquisitions_total', 'Lock acquisitions by outcome.', 'outcome', [
            'at_once' => 'acquired_at_once',
            'after_wait' => 'acquired_after_wait',
            'handed_over' => 'acquired_handed_over',
            'timed_out' => 'acquire_timed_out',
            'error' => 'acquire_errors',
        ]],
        ['releases_total', 'Lock releases by outcome.', 'outcome', [
            'ok' => 'releases_ok',
            'not_owner' => 'releases_not_owner',
        ]],
        ['extends_total', 'Lock extends by the caller, by outcome.', 'outcome', [
            'ok' => 'extends_ok',
            'lost' => 'extends_lost',
        ]],
        ['renewals_total', 'Background lock renewals by outcome.', 'outcome', [
            'ok' => 'renewals_ok',
            'lost' => 'renewals_lost',
        ]],
        ['locks_lost_total', 'Held locks found lost (expired or taken over).', null, ['locks_lost']],
        ['handoffs_total', 'Locks handed straight from a releaser to a waiter, by direction.', 'direction', [
            'given' => 'handoffs_given',
            'received' => 'handoffs_received',
        ]],
        ['connection_errors_total', 'Connections that could not be opened, broke, or timed out.', null,
            ['connection_errors']],
        ['reconnects_total', 'Connections opened again in place of one that broke.', null, ['reconnects']],
        ['acquisitions_by_kind_total', 'Successful acquisitions by kind (lock, semaphore, read or write side).',
            'kind', [
                'lock' => 'acquired_locks',
                'semaphore' => 'acquired_semaphores',
                'read' => 'acquired_reads',
                'write' => 'acquired_writes',
            ]],
    ];

    private const GAUGES = [
        ['locks_held', 'Lock handles held now.', 'held_now'],
        ['waiters', 'Acquisitions waiting now for a lock held by another owner.', 'waiters_now'],
        ['permits_held', 'Semaphore permits held now.', 'permits_held_now'],
    ];

    private const HISTOGRAMS = [
        ['acquire_wait_seconds', 'How long each acquisition took, whatever its outcome.', 'wait'],
        ['held_seconds', 'How long each lock was held, until released or found lost.', 'held'],
    ];

    /**
     * The samples of $stats (from Client::stats()); with $before (an
     * earlier Client::stats() of the same client), the increments since
     * then. A counter or a histogram sample that went down (the client was
     * opened again, or this is a forked child) counts from zero again, as
     * Prometheus does with a counter reset; a gauge gives its change.
     *
     * @param array<string, mixed>      $stats
     * @param array<string, mixed>|null $before
     * @return list<array{type: string, namespace: string, name: string, help: string,
     *                    labelNames: list<string>, labelValues: list<string>, value: int|float}>
     */
    public static function rows(array $stats, ?array $before = null): array
    {
        $rows = [];
        $since = static function (int|float $now, int|float|null $then, bool $gauge): int|float {
            if ($then === null) {
                return $now;
            }
            return $gauge || $now >= $then ? $now - $then : $now;
        };
        foreach (self::COUNTERS as [$name, $help, $label, $keys]) {
            foreach ($keys as $value => $key) {
                $rows[] = self::row('counter', $name, $help, $label === null ? [] : [$label],
                    $label === null ? [] : [$value], $since($stats[$key], $before[$key] ?? null, false));
            }
        }
        foreach (self::GAUGES as [$name, $help, $key]) {
            $rows[] = self::row('gauge', $name, $help, [], [], $since($stats[$key], $before[$key] ?? null, true));
        }
        foreach (self::HISTOGRAMS as [$name, $help, $key]) {
            $now = self::samples($stats[$key]);
            $then = isset($before[$key]) ? self::samples($before[$key]) : null;
            foreach ($now as $i => [$suffix, $le, $value]) {
                $rows[] = self::row('histogram', $name . $suffix, $help, $le === null ? [] : ['le'],
                    $le === null ? [] : [$le], $since($value, $then[$i][2] ?? null, false));
            }
        }
        return $rows;
    }

    /**
     * A histogram of Client::stats() as its exposition samples: cumulative
     * buckets, sum and count.
     *
     * @param array{count: int, sum: float, buckets: list<int>, bounds: list<float>} $h
     * @return list<array{0: string, 1: ?string, 2: int|float}> suffix, le, value
     */
    private static function samples(array $h): array
    {
        $out = [];
        $cumulative = 0;
        foreach ($h['buckets'] as $i => $n) {
            $cumulative += $n;
            $le = isset($h['bounds'][$i]) ? self::le($h['bounds'][$i]) : '+Inf';
            $out[] = ['_bucket', $le, $cumulative];
        }
        $out[] = ['_sum', null, $h['sum']];
        $out[] = ['_count', null, $h['count']];
        return $out;
    }

    /**
     * A bucket bound as the label le, written as Python writes the float
     * (5e-05, 0.0001, 2.5, 3600.0), as the Python collector does. The
     * bounds are whole microseconds.
     */
    private static function le(float $seconds): string
    {
        $us = (int)round($seconds * 1e6);
        if ($us % 1000000 === 0) {
            return intdiv($us, 1000000) . '.0';
        }
        if ($us >= 100) {
            return rtrim(sprintf('%d.%06d', intdiv($us, 1000000), $us % 1000000), '0');
        }
        // Below 1e-04 s Python switches to an exponent.
        $digits = rtrim((string)$us, '0');
        $mantissa = $digits[0] . (strlen($digits) > 1 ? '.' . substr($digits, 1) : '');
        return sprintf('%se-%02d', $mantissa, 7 - strlen((string)$us));
    }

    /**
     * @param list<string> $labelNames
     * @param list<string> $labelValues
     * @return array{type: string, namespace: string, name: string, help: string,
     *               labelNames: list<string>, labelValues: list<string>, value: int|float}
     */
    private static function row(
        string $type,
        string $name,
        string $help,
        array $labelNames,
        array $labelValues,
        int|float $value,
    ): array {
        return [
            'type' => $type,
            'namespace' => self::NAMESPACE,
            'name' => $name,
            'help' => $help,
            'labelNames' => $labelNames,
            'labelValues' => $labelValues,
            'value' => $value,
        ];
    }
}
