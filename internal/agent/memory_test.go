package agent

import (
	"testing"
	"time"
)

var sink [][]byte

func TestIdleRelease(t *testing.T) {
	r := newIdleRelease(10*time.Millisecond, testLogger())

	// Out of sync: the timer stays off.
	r.afterBatch(false)
	select {
	case <-r.C:
		t.Fatal("fired while out of sync")
	case <-time.After(50 * time.Millisecond):
	}

	// In sync after a burst: fires, and releases.
	for i := 0; i < 40; i++ {
		sink = append(sink, make([]byte, 1<<20))
	}
	sink = nil
	r.afterBatch(true)
	select {
	case <-r.C:
	case <-time.After(5 * time.Second):
		t.Fatal("did not fire once in sync and idle")
	}
	before := r.base
	r.fired()
	if r.base == before {
		t.Fatal("40 MiB allocated since the last release, but nothing was released")
	}

	// Nothing allocated since: no second collection.
	after := r.base
	r.fired()
	if r.base != after {
		t.Fatal("released again with nothing allocated since")
	}

	// Off: no timer at all.
	if off := newIdleRelease(0, testLogger()); off.C != nil {
		t.Fatal("a zero delay must leave the release off")
	}
}
