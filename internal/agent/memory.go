package agent

import (
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// releaseMinAlloc is how much the agent must have allocated since the last
// release for another one to be worth a full collection.
const releaseMinAlloc = 16 << 20

// quietBatchAlloc is the most a batch may allocate and still count as idle:
// the periodic canary check (every polling_interval, 2 s by default) runs a
// batch that allocates a few KiB. Were it to postpone the release like real
// work, a release delay above the polling interval would never be reached
// and the burst's free heap would be kept for as long as the agent idles.
const quietBatchAlloc = 1 << 20

// idleRelease returns the memory a burst of work left behind (wiring many
// ports allocates many times the live heap) once the agent has been in sync
// and idle for a while. Go's collector would reuse it and its scavenger
// would return it only slowly, leaving RSS near the burst's peak long after
// (bench/README.md has the figures). One forced collection per
// idle period after at least releaseMinAlloc of allocations costs little
// and nothing at all while the agent is busy.
type idleRelease struct {
	after time.Duration // 0: never
	C     <-chan time.Time
	timer *time.Timer
	log   *slog.Logger
	base  uint64 // allocated bytes at the last release
	armed bool   // the timer runs
	armAt uint64 // allocated bytes when it was last (re)armed
}

func newIdleRelease(after time.Duration, log *slog.Logger) *idleRelease {
	r := &idleRelease{after: after, log: log}
	if after > 0 {
		r.timer = time.NewTimer(time.Hour)
		r.timer.Stop()
		r.C = r.timer.C
	}
	return r
}

// afterBatch (re)arms the timer while the agent is in sync: a batch that
// worked (allocated more than quietBatchAlloc since the timer was armed)
// postpones the release, a quiet one leaves a running timer alone; a batch
// out of sync cancels it.
func (r *idleRelease) afterBatch(inSync bool) {
	if r.timer == nil {
		return
	}
	if !inSync {
		r.timer.Stop()
		r.armed = false
		return
	}
	total := allocatedBytes()
	if r.armed && total-r.armAt < quietBatchAlloc {
		return
	}
	r.timer.Reset(r.after)
	r.armed, r.armAt = true, total
}

// fired releases when enough was allocated since the last release.
func (r *idleRelease) fired() {
	r.armed = false
	total := allocatedBytes()
	if total-r.base < releaseMinAlloc {
		return
	}
	start := time.Now()
	debug.FreeOSMemory()
	r.log.Debug("agent: idle: memory returned to the OS", "allocated_since_last_MiB", (total-r.base)>>20, "took", time.Since(start))
	r.base = total
}

// allocatedBytes is the cumulative heap allocation of the process.
func allocatedBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
