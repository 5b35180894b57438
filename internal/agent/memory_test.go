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

// The periodic canary check runs a batch every polling interval; such quiet
// batches must not keep postponing the release (they did: with a 2 s polling
// interval and a 5 s delay it never fired), while a batch that works must.
func TestIdleReleaseQuietBatchesDoNotPostpone(t *testing.T) {
	r := newIdleRelease(time.Hour, testLogger())
	r.afterBatch(true)
	if !r.armed {
		t.Fatal("not armed after a batch in sync")
	}
	armedAt := r.armAt
	r.afterBatch(true) // a canary check: allocates next to nothing
	if r.armAt != armedAt {
		t.Fatalf("a quiet batch re-armed the timer (allocated %d B since)", r.armAt-armedAt)
	}
	for i := 0; i < 4; i++ {
		sink = append(sink, make([]byte, 1<<20))
	}
	sink = nil
	r.afterBatch(true) // a batch that worked: postpones
	if r.armAt == armedAt {
		t.Fatal("a batch that allocated 4 MiB did not postpone the release")
	}
	r.afterBatch(false)
	if r.armed {
		t.Fatal("still armed after a batch out of sync")
	}

	// End to end: quiet batches every 5 ms do not keep a 50 ms release away.
	q := newIdleRelease(50*time.Millisecond, testLogger())
	q.afterBatch(true)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for fired := false; !fired; {
		select {
		case <-q.C:
			fired = true
		case <-tick.C:
			q.afterBatch(true)
		case <-deadline:
			t.Fatal("quiet batches every 5 ms kept postponing a 50 ms release")
		}
	}
}
