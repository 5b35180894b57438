package oslo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/neutron"
	"github.com/ovsagent/ovsagent/internal/oslo"
)

// portPushArgs is the args of a Port push of about size bytes: copies of a captured
// bound port, each with its own id.
func portPushArgs(tb testing.TB, size int) (json.RawMessage, int) {
	tb.Helper()
	raw, err := os.ReadFile("../neutron/testdata/captures/neutron-vo-Port-1.7_fanout__push__updated.json")
	if err != nil {
		tb.Fatal(err)
	}
	var c struct {
		Examples []struct {
			Decoded struct {
				Args struct {
					List []json.RawMessage `json:"resource_list"`
				} `json:"args"`
			} `json:"oslo_message_decoded"`
		} `json:"examples"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		tb.Fatal(err)
	}
	one := c.Examples[0].Decoded.Args.List[0]
	const id = "c022f4cf-e81b-4fe2-89a5-566b9576b797"
	build := func(n int) json.RawMessage {
		var b bytes.Buffer
		b.WriteString(`{"event_type": "updated", "resource_list": [`)
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			b.Write(bytes.ReplaceAll(one, []byte(id), []byte(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i))))
		}
		b.WriteString(`]}`)
		return b.Bytes()
	}
	// The largest push whose enveloped body is at most size bytes.
	n := size / len(one)
	for n > 1 && len(oslo.EncodeCast("push", "1.1", build(n))) > size {
		n = n * 97 / 100
	}
	return build(n), n
}

// offlineAgent is the agent's receive side for Port pushes, without a broker: the
// oslo server and the neutron push endpoint feeding a cache.
func offlineAgent(tb testing.TB) (*oslo.Transport, *neutron.Cache) {
	tb.Helper()
	tr := oslo.NewOffline(oslo.Config{Host: "hv1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	cache := neutron.NewCache(neutron.CacheOptions{})
	if err := (neutron.ConsumerConfig{Host: "hv1", Cache: cache, Handler: nopHandler{}, L2Population: true}).Serve(neutron.Oslo{T: tr}); err != nil {
		tb.Fatal(err)
	}
	return tr, cache
}

// nopHandler takes l2pop and tunnel casts and keeps nothing.
type nopHandler struct{}

func (nopHandler) TunnelUpdate(context.Context, neutron.TunnelEvent) error { return nil }
func (nopHandler) TunnelDelete(context.Context, neutron.TunnelEvent) error { return nil }
func (nopHandler) FDBAdd(context.Context, neutron.FDBEntries) error        { return nil }
func (nopHandler) FDBRemove(context.Context, neutron.FDBEntries) error     { return nil }
func (nopHandler) FDBUpdate(context.Context, neutron.FDBUpdate) error      { return nil }

// fdbArgs is an add_fdb_entries of about size bytes for one network.
func fdbArgs(size int) json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"fdb_entries": {"net-1": {"segment_id": 1001, "network_type": "vxlan", "ports": {"192.0.2.1": [`)
	for i := 0; b.Len() < size*8/10; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `["fa:16:3e:%02x:%02x:%02x", "10.%d.%d.%d"]`, i>>16&255, i>>8&255, i&255, i>>16&255, i>>8&255, i&255)
	}
	b.WriteString(`]}}}}`)
	return b.Bytes()
}

// withJunkContext is body with one more context key holding a list of size/2 zeros:
// nothing reads it, and anyone who can publish can send it.
func withJunkContext(body []byte, size int) []byte {
	var outer map[string]string
	if err := json.Unmarshal(body, &outer); err != nil {
		panic(err)
	}
	inner := outer["oslo.message"]
	junk := `"_context_junk": [` + strings.Repeat("0,", (size-len(body))/2-16) + `0], `
	outer["oslo.message"] = "{" + junk + inner[1:]
	b, err := json.Marshal(outer)
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkMessageCost is what one received message costs the process, from the body
// the broker delivered to its handler's effect: bytes and allocations per message, and
// the peak live heap above the baseline while one is handled (MiB-live). Shapes: a Port
// push (the cache keeps its ports), an l2pop add_fdb_entries, and a tunnel_update
// carrying a large context key nothing reads.
func BenchmarkMessageCost(b *testing.B) {
	portTopic := neutron.PushTopic(neutron.TypePort)
	for _, size := range []int{64 << 10, 1 << 20, 8 << 20} {
		args, n := portPushArgs(b, size)
		port := oslo.EncodeCast("push", "1.1", args)
		fdb := oslo.EncodeCast("add_fdb_entries", "1.7", fdbArgs(size))
		ctxJunk := withJunkContext(oslo.EncodeCast("tunnel_update", "1.7", json.RawMessage(`{"tunnel_ip": "192.0.2.9", "tunnel_type": "vxlan"}`)), size)
		for _, c := range []struct {
			name, topic string
			body        []byte
			check       func(*oslo.Transport, *neutron.Cache) error
		}{
			{"port-push", portTopic, port, func(tr *oslo.Transport, cache *neutron.Cache) error {
				if got := cache.Len(neutron.TypePort); got != n {
					return fmt.Errorf("cache holds %d ports, want %d (dropped: %v)", got, n, tr.Stats().Dropped)
				}
				return nil
			}},
			{"fdb", neutron.TopicL2PopUpdate, fdb, nil},
			{"context", neutron.TopicTunnelUpdate, ctxJunk, nil},
		} {
			b.Run(fmt.Sprintf("%s/%dKiB", c.name, size>>10), func(b *testing.B) {
				if len(c.body) > size {
					b.Fatalf("body %d bytes > %d", len(c.body), size)
				}
				b.SetBytes(int64(len(c.body)))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					tr, cache := offlineAgent(b)
					tr.HandleLocal(c.topic, c.body)
					if d := tr.Stats().Dropped; len(d) > 0 {
						b.Fatalf("dropped: %v", d)
					}
					if c.check != nil {
						if err := c.check(tr, cache); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(oslo.PeakLive(func() {
					tr, _ := offlineAgent(b)
					tr.HandleLocal(c.topic, c.body)
				}))/(1<<20), "MiB-live")
			})
		}
	}
}
