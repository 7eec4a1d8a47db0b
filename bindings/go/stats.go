package redislock

/*
#include <stdint.h>
#include "redislock.h"
*/
import "C"

import (
	"context"
	"fmt"
	"time"
	"unsafe"
)

// Histogram is a distribution of durations (docs/observability.md).
type Histogram struct {
	Count         uint64
	Sum, Max      time.Duration
	P50, P90, P99 time.Duration // estimated within their bucket
	// Buckets[i] counts the durations above StatsBucketBound(i-1) and up to
	// StatsBucketBound(i); the last one, those above one hour.
	Buckets []uint64
}

// Stats is what one client did since it was opened: counters, the locks
// and waiters of right now, and how long acquisitions waited and locks
// were held.
type Stats struct {
	AcquiredAtOnce, AcquiredAfterWait, AcquiredHandedOver uint64
	AcquireTimedOut, AcquireErrors                        uint64
	ReleasesOK, ReleasesNotOwner                          uint64
	ExtendsOK, ExtendsLost                                uint64
	RenewalsOK, RenewalsLost, LocksLost                   uint64
	HandoffsGiven, HandoffsReceived                       uint64
	ConnectionErrors, Reconnects                          uint64
	HeldNow, WaitersNow                                   uint64
	Wait, Held                                            Histogram
	AcquiredLocks, AcquiredSemaphores                     uint64
	AcquiredReads, AcquiredWrites                         uint64
	PermitsHeldNow                                        uint64
}

func us(v C.uint64_t) time.Duration { return time.Duration(v) * time.Microsecond }

func histogram(h *C.struct_redislock_histogram) Histogram {
	out := Histogram{Count: uint64(h.count), Sum: us(h.sum_us), Max: us(h.max_us),
		P50: us(h.p50_us), P90: us(h.p90_us), P99: us(h.p99_us), Buckets: make([]uint64, len(h.buckets))}
	for i, b := range h.buckets {
		out.Buckets[i] = uint64(b)
	}
	return out
}

// StatsBucketBound is the upper bound of bucket i of a Histogram (50 µs
// for bucket 0 up to one hour); -1 for the last bucket, which has none.
func StatsBucketBound(i int) time.Duration {
	if i < 0 {
		return 0
	}
	b := uint64(C.redislock_stats_bucket_bound_us(C.size_t(i)))
	if b == ^uint64(0) {
		return -1
	}
	return time.Duration(b) * time.Microsecond
}

// Stats reads the client's statistics: a few dozen atomic loads, no I/O.
func (c *Client) Stats() (Stats, error) {
	var st C.struct_redislock_stats
	st.size = C.uint32_t(unsafe.Sizeof(st))
	err := c.with(func(cc *C.redislock_client) error {
		return call(func() C.redislock_status { return C.redislock_status(C.redislock_client_stats(cc, &st)) })
	})
	if err != nil {
		return Stats{}, err
	}
	return Stats{
		AcquiredAtOnce: uint64(st.acquired_at_once), AcquiredAfterWait: uint64(st.acquired_after_wait),
		AcquiredHandedOver: uint64(st.acquired_handed_over), AcquireTimedOut: uint64(st.acquire_timed_out),
		AcquireErrors: uint64(st.acquire_errors), ReleasesOK: uint64(st.releases_ok),
		ReleasesNotOwner: uint64(st.releases_not_owner), ExtendsOK: uint64(st.extends_ok),
		ExtendsLost: uint64(st.extends_lost), RenewalsOK: uint64(st.renewals_ok),
		RenewalsLost: uint64(st.renewals_lost), LocksLost: uint64(st.locks_lost),
		HandoffsGiven: uint64(st.handoffs_given), HandoffsReceived: uint64(st.handoffs_received),
		ConnectionErrors: uint64(st.connection_errors), Reconnects: uint64(st.reconnects),
		HeldNow: uint64(st.held_now), WaitersNow: uint64(st.waiters_now),
		Wait: histogram(&st.wait), Held: histogram(&st.held),
		AcquiredLocks: uint64(st.acquired_locks), AcquiredSemaphores: uint64(st.acquired_semaphores),
		AcquiredReads: uint64(st.acquired_reads), AcquiredWrites: uint64(st.acquired_writes),
		PermitsHeldNow: uint64(st.permits_held_now),
	}, nil
}

// Severity is how much a doctor's finding matters.
type Severity int

// The severities of a Finding.
const (
	SeverityOK      Severity = 0 // checked, nothing to change
	SeverityWarning Severity = 1 // safe now, but slow, or unsafe after a rare failure
	SeverityUnsafe  Severity = 2 // locks can have two owners, or cannot be used
)

func (s Severity) String() string {
	switch s {
	case SeverityOK:
		return "ok"
	case SeverityWarning:
		return "warning"
	case SeverityUnsafe:
		return "unsafe"
	}
	return fmt.Sprintf("severity %d", int(s))
}

// Finding is one check on one server.
type Finding struct {
	Severity Severity
	Check    string // stable names: eviction, scripting, time, pubsub, persistence, …
	Server   string // host:port, never credentials
	Message  string
	Fix      string // "" when nothing needs to change
}

// Report is what Doctor found.
type Report struct {
	Findings []Finding
	Safe     bool   // no finding is SeverityUnsafe
	Text     string // as `redislock doctor` prints it
}

// Doctor checks every server the client's locks may reach for what makes
// a lock unsafe or slow, as `redislock doctor` does (docs/doctor.md): a few
// round trips per server, nothing left on them. ErrConnection when the
// servers cannot be reached.
func (c *Client) Doctor(ctx context.Context) (*Report, error) {
	if ctx == nil {
		return nil, invalid("a nil context")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redislock: doctor: %w", err)
	}
	var rep *C.redislock_report
	err := c.with(func(cc *C.redislock_client) error {
		return call(func() C.redislock_status { return C.redislock_status(C.redislock_doctor(cc, &rep)) })
	})
	if err != nil {
		return nil, err
	}
	defer C.redislock_report_free(rep)
	out := &Report{Safe: bool(C.redislock_report_is_safe(rep)), Text: C.GoString(C.redislock_report_text(rep))}
	n := int(C.redislock_report_count(rep))
	for i := 0; i < n; i++ {
		f := C.redislock_report_finding(rep, C.size_t(i))
		if f == nil {
			continue
		}
		out.Findings = append(out.Findings, Finding{Severity: Severity(f.severity), Check: C.GoString(f.check),
			Server: C.GoString(f.server), Message: C.GoString(f.message), Fix: C.GoString(f.fix)})
	}
	return out, nil
}
