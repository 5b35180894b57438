package oslo

import (
	"context"
	"encoding/json"
	"runtime"
	"runtime/debug"
	"time"
)

// Hooks for the external tests (package oslo_test), which drive the real neutron
// endpoints through this package's receive path without a broker.

// NewOffline is a Transport that never connects: Serve registers servers and
// HandleLocal feeds them bodies as a consumer would.
func NewOffline(cfg Config) *Transport {
	cfg = cfg.withDefaults()
	t := &Transport{cfg: cfg, log: cfg.Logger, obs: cfg.Observer, id: "offline", replyQ: "reply_offline",
		up: make(chan struct{}), waiters: map[string]*waiter{}, timeouts: map[string]time.Duration{},
		stats: Stats{Dropped: map[string]uint64{}}}
	t.initBounds()
	t.ctx, t.stop = context.WithCancel(context.Background())
	return t
}

// HandleLocal runs body through the receive path of topic's server.
func (t *Transport) HandleLocal(topic string, body []byte) {
	t.mu.Lock()
	var srv *server
	for _, s := range t.servers {
		if s.topic == topic {
			srv = s
		}
	}
	t.mu.Unlock()
	srv.handle(topic, body)
}

// EncodeCast is the enveloped body of a cast, as neutron-server sends it.
func EncodeCast(method, version string, args json.RawMessage) []byte {
	b, err := encodeRequest(&outgoing{Method: method, Args: args, Version: version, UniqueID: newID(), Context: AdminContext(time.Now())})
	if err != nil {
		panic(err)
	}
	return b
}

// PeakLive runs f with the collector running at every 1% of heap growth and returns the
// largest live heap seen above the heap before f, sampled after each collection.
func PeakLive(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var last uint32
		for {
			select {
			case <-stop:
				return
			default:
			}
			var s runtime.MemStats
			runtime.ReadMemStats(&s)
			if s.NumGC != last {
				last = s.NumGC
				if s.HeapAlloc > base && s.HeapAlloc-base > peak {
					peak = s.HeapAlloc - base
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	f()
	close(stop)
	<-done
	return peak
}
