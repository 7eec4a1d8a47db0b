"""Prometheus metrics of redislock clients, for ``prometheus_client``.

    from prometheus_client import REGISTRY
    from redislock.metrics import RedislockCollector

    REGISTRY.register(RedislockCollector(client))

Each scrape reads ``client.stats()`` (no I/O). The metric names are the
same in every language redislock serves (the PHP binding exports the same
ones), so one dashboard covers a mixed fleet:

==========================================  =========  ==========================================
name                                        type       labels
==========================================  =========  ==========================================
``redislock_acquisitions_total``            counter    ``outcome``: at_once, after_wait,
                                                       handed_over, timed_out, error
``redislock_releases_total``                counter    ``outcome``: ok, not_owner
``redislock_extends_total``                 counter    ``outcome``: ok, lost (by the caller)
``redislock_renewals_total``                counter    ``outcome``: ok, lost (in the background)
``redislock_locks_lost_total``              counter
``redislock_handoffs_total``                counter    ``direction``: given, received
``redislock_acquisitions_by_kind_total``    counter    ``kind``: lock, semaphore, read, write
``redislock_connection_errors_total``       counter
``redislock_reconnects_total``              counter
``redislock_locks_held``                    gauge
``redislock_waiters``                       gauge
``redislock_permits_held``                  gauge      (semaphore permits)
``redislock_acquire_wait_seconds``          histogram  (``le``: 50 µs to 1 h)
``redislock_held_seconds``                  histogram  (``le``: 50 µs to 1 h)
==========================================  =========  ==========================================

Several clients in one process: one collector with a label that tells
them apart (metric families cannot be registered twice)::

    metrics = RedislockCollector(orders, labels={"client": "orders"})
    metrics.add(reports, labels={"client": "reports"})
    REGISTRY.register(metrics)

This module needs ``prometheus_client`` (``pip install prometheus-client``);
``redislock`` itself does not, and does not import this module.
"""

import re
import threading
from typing import Callable, Iterator, List, Mapping, Optional, Sequence, Tuple, cast

try:
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
    from prometheus_client.utils import floatToGoString
except ImportError:  # the original error stays attached as the context
    raise ImportError(
        "redislock.metrics needs prometheus_client: pip install prometheus-client"
    )

from ._native import Client
from ._stats import HistogramStats, Stats

__all__ = ["RedislockCollector"]

# How prometheus_client writes a bucket's bound (as "le").
_le: Callable[[float], str] = floatToGoString

# (metric name without _total, help, label name, [(label value, stats key)])
_LABELLED_COUNTERS: List[Tuple[str, str, str, List[Tuple[str, str]]]] = [
    ("redislock_acquisitions", "Lock acquisitions, by outcome.", "outcome", [
        ("at_once", "acquired_at_once"),
        ("after_wait", "acquired_after_wait"),
        ("handed_over", "acquired_handed_over"),
        ("timed_out", "acquire_timed_out"),
        ("error", "acquire_errors"),
    ]),
    ("redislock_releases", "Lock releases, by outcome (not_owner: expired or taken over).",
     "outcome", [
         ("ok", "releases_ok"),
         ("not_owner", "releases_not_owner"),
     ]),
    ("redislock_extends", "Extends asked for by the caller, by outcome.", "outcome", [
        ("ok", "extends_ok"),
        ("lost", "extends_lost"),
    ]),
    ("redislock_renewals", "Background renewals, by outcome.", "outcome", [
        ("ok", "renewals_ok"),
        ("lost", "renewals_lost"),
    ]),
    ("redislock_handoffs", "Locks handed straight from their releaser to a waiter.", "direction", [
        ("given", "handoffs_given"),
        ("received", "handoffs_received"),
    ]),
    ("redislock_acquisitions_by_kind",
     "Successful acquisitions, by kind (lock, semaphore permits, read or write side).", "kind", [
         ("lock", "acquired_locks"),
         ("semaphore", "acquired_semaphores"),
         ("read", "acquired_reads"),
         ("write", "acquired_writes"),
     ]),
]

# (metric name without _total, help, stats key)
_COUNTERS: List[Tuple[str, str, str]] = [
    ("redislock_locks_lost", "Held locks found lost (expired or taken over).", "locks_lost"),
    ("redislock_connection_errors", "Connections that could not be opened, broke, or timed out.",
     "connection_errors"),
    ("redislock_reconnects", "Connections opened again in place of one that broke.", "reconnects"),
]

_GAUGES: List[Tuple[str, str, str]] = [
    ("redislock_locks_held", "Locks held right now.", "held_now"),
    ("redislock_waiters", "Acquisitions waiting right now for a lock held by another owner.",
     "waiters_now"),
    ("redislock_permits_held", "Semaphore permits held right now.", "permits_held_now"),
]

_HISTOGRAMS: List[Tuple[str, str, str]] = [
    ("redislock_acquire_wait_seconds", "How long acquisitions took, whatever their outcome.",
     "wait"),
    ("redislock_held_seconds", "How long locks were held, until released or found lost.", "held"),
]

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_RESERVED = {"outcome", "direction", "kind", "le", "quantile"}


class RedislockCollector:
    """A ``prometheus_client`` collector of one or more redislock clients.

    ``labels`` (optional) are constant labels put on every sample of
    ``client``; clients added with :meth:`add` must use the same label
    names, with different values. Register the collector once
    (``REGISTRY.register(collector)``); clients may be added afterwards.
    The collector keeps its clients alive.
    """

    def __init__(self, client: Optional[Client] = None,
                 labels: Optional[Mapping[str, str]] = None) -> None:
        self._lock = threading.Lock()
        self._label_names: Optional[Tuple[str, ...]] = None
        self._clients: List[Tuple[Client, Tuple[str, ...]]] = []
        if client is not None:
            self.add(client, labels)
        elif labels:
            raise ValueError("labels are given with a client")

    def add(self, client: Client, labels: Optional[Mapping[str, str]] = None) -> None:
        """Collect ``client`` too, its samples labelled with ``labels``."""
        if not isinstance(client, Client):
            raise TypeError(f"expected a redislock.Client, not {type(client).__name__}")
        labels = dict(labels or {})
        names = tuple(sorted(labels))
        for name in names:
            if not _LABEL_NAME.match(name) or name.startswith("__") or name in _RESERVED:
                raise ValueError(f"invalid or reserved label name: {name!r}")
        values = tuple(str(labels[n]) for n in names)
        with self._lock:
            if self._label_names is not None and names != self._label_names:
                raise ValueError(
                    f"every client of one collector needs the same label names: "
                    f"{list(self._label_names)}, not {list(names)}")
            if any(v == values for _, v in self._clients):
                raise ValueError(
                    "a client with these labels is already collected: give each client "
                    "different label values (e.g. labels={'client': 'name'})")
            self._label_names = names
            self._clients.append((client, values))

    def describe(self) -> Iterator[Metric]:
        """The metric families, without samples (the registry checks their names)."""
        return self._families([])

    def collect(self) -> Iterator[Metric]:
        """The metric families with the current figures of every client."""
        with self._lock:
            clients = list(self._clients)
        return self._families([(client.stats(), values) for client, values in clients])

    def _families(self, stats: Sequence[Tuple[Stats, Tuple[str, ...]]]) -> Iterator[Metric]:
        const = list(self._label_names or ())
        for name, doc, label, pairs in _LABELLED_COUNTERS:
            counter = CounterMetricFamily(name, doc, labels=const + [label])
            for s, values in stats:
                for value, key in pairs:
                    counter.add_metric(list(values) + [value], _int(s, key))
            yield counter
        for name, doc, key in _COUNTERS:
            counter = CounterMetricFamily(name, doc, labels=const)
            for s, values in stats:
                counter.add_metric(list(values), _int(s, key))
            yield counter
        for name, doc, key in _GAUGES:
            gauge = GaugeMetricFamily(name, doc, labels=const)
            for s, values in stats:
                gauge.add_metric(list(values), _int(s, key))
            yield gauge
        for name, doc, key in _HISTOGRAMS:
            histogram = HistogramMetricFamily(name, doc, labels=const)
            for s, values in stats:
                h: HistogramStats = s["wait"] if key == "wait" else s["held"]
                histogram.add_metric(list(values), _cumulative(h), h["sum"])
            yield histogram


def _int(stats: Stats, key: str) -> int:
    return cast(Mapping[str, int], stats)[key]


def _cumulative(h: HistogramStats) -> List[Tuple[str, float]]:
    """Prometheus buckets: cumulative, ``le`` in seconds, ending with +Inf (== count)."""
    out: List[Tuple[str, float]] = []
    running = 0
    for bound, n in zip(h["bounds"], h["buckets"]):
        running += n
        out.append((_le(bound), running))
    out.append(("+Inf", h["count"]))
    return out
