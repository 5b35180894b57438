//go:build integration

package oslo

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// junkCast is a cast of method with a context key of about size bytes that nothing
// reads: what anyone who can publish on the broker can send.
func junkCast(t testing.TB, method string, size int) []byte {
	t.Helper()
	junk := json.RawMessage("[" + strings.Repeat("0,", size/2) + "0]")
	body, err := encodeRequest(&outgoing{Method: method, Args: map[string]int{"n": 1}, Version: "1.0", UniqueID: newID(),
		Context: append(AdminContext(time.Now()), ContextField{"junk", junk})})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func vmHWM() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:"))
		}
	}
	return "?"
}

// TestFloodKeepsHeapBounded: n large messages wait in a queue when the consumer starts,
// and the first one takes long to handle. Without a prefetch limit the broker pushes
// all of them into the process while it does (the client library buffers them); with
// it, the live heap holds a few messages whatever n is.
func TestFloodKeepsHeapBounded(t *testing.T) {
	ex, topic := uniq("ovsagent-test"), uniq("t-flood")
	cleanupTopic(t, ex, topic, "srv")
	const n, size = 16, 4 << 20
	ch := rawChannel(t)
	if _, err := ch.QueueDeclare(topic, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	ready := func() int {
		q, err := ch.QueueDeclarePassive(topic, false, false, false, false, nil)
		if err != nil {
			t.Error(err)
			return -1
		}
		return q.Messages
	}
	for i := 0; i < n; i++ {
		// A fresh _unique_id each, or oslo's dedup drops them.
		if err := ch.PublishWithContext(context.Background(), "", topic, false, false, amqp.Publishing{Body: junkCast(t, "note", size)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the flood queued", 60*time.Second, func() bool { return ready() == n })

	var handled atomic.Int32
	var held uint64
	done := make(chan struct{})
	srv := newTransport(t, ex, "srv")
	window := srv.cfg.PrefetchCount
	ep := Endpoint{Version: "1.0", Methods: map[string]Handler{"note": func(context.Context, *Request) (any, error) {
		if handled.Add(1) == 1 {
			// Busy with the first until the broker has sent what it will: everything
			// (ready 0), or the window, for 20 polls in a row.
			for same := 0; same < 20; time.Sleep(50 * time.Millisecond) {
				switch r := ready(); {
				case r == 0 || r < 0:
					same = 20
				case r == n-1-window:
					same++
				default:
					same = 0
				}
			}
			// … and the bytes in flight have arrived: the live heap stops growing.
			held = liveHeap()
			for same := 0; same < 10; time.Sleep(100 * time.Millisecond) {
				h := liveHeap()
				if h > held+1<<20 {
					same = 0
				} else {
					same++
				}
				held = max(held, h)
			}
		}
		if handled.Load() == n {
			close(done)
		}
		return nil, nil
	}}}
	base := liveHeap()
	peak := PeakLive(func() {
		if err := srv.Serve(topic, ep); err != nil {
			t.Fatal(err)
		}
		// A broker restart (another suite's) loses the non-durable queue: say so
		// rather than wait for messages that are gone.
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(8 * time.Minute)
		for waiting := true; waiting; {
			select {
			case <-done:
				waiting = false
			case <-tick.C:
				if st := srv.Stats(); st.Reconnects > 0 || !st.Connected {
					t.Errorf("connection to the broker lost after %d of %d messages", handled.Load(), n)
					waiting = false
				}
			case <-deadline:
				t.Errorf("handled %d of %d messages", handled.Load(), n)
				waiting = false
			}
		}
	})
	held -= min(held, base)
	t.Logf("%d messages of %d MiB, prefetch %d: live heap %.1f MiB while the first was handled, peak %.1f MiB above the start; process peak RSS %s",
		n, size>>20, window, float64(held)/(1<<20), float64(peak)/(1<<20), vmHWM())
	// The window's bodies, the one handled and its decoded inner message: a bound that
	// does not grow with n.
	if bound := uint64(window+3) * size; held > bound {
		t.Errorf("live heap %d MiB > %d MiB with %d messages of %d MiB queued", held>>20, bound>>20, n, size>>20)
	}
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestPrefetchHonoured: rabbit_qos_prefetch_count is every consumer's basic.qos, as in
// oslo; 0 (oslo's unlimited) gets DefaultPrefetchCount.
func TestPrefetchHonoured(t *testing.T) {
	node := rmqNode(t)
	for _, c := range []struct{ conf, want int }{{7, 7}, {0, DefaultPrefetchCount}} {
		ex, topic := uniq("ovsagent-test"), uniq("t-qos")
		cleanupTopic(t, ex, topic, "srv")
		srv := newTransport(t, ex, "srv", func(cfg *Config) { cfg.PrefetchCount = c.conf })
		if err := srv.Serve(topic, echoEndpoint("srv", nil)); err != nil {
			t.Fatal(err)
		}
		out := rabbitmqctl(t, node, "-q", "list_consumers", "queue_name", "prefetch_count")
		got := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) == 2 && strings.HasPrefix(f[0], topic) {
				got[f[0]] = f[1]
			}
		}
		want := strconv.Itoa(c.want)
		if len(got) != 3 {
			t.Fatalf("prefetch %d: consumers of %s: %v\n%s", c.conf, topic, got, out)
		}
		for q, p := range got {
			if p != want {
				t.Errorf("prefetch %d: consumer of %s has prefetch_count %s, want %s", c.conf, q, p, want)
			}
		}
	}
}

// replySenders counts the goroutines sending or retrying a reply.
func replySenders() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "oslo.(*Transport).sendReply(")
}

// TestForgedCallsBounded: every call to a reply queue that does not exist (what anyone
// who can publish can send) used to start a goroutine retrying its reply for a minute.
// At most MaxReplySenders are out; the rest are dropped and counted, and a queue found
// missing once gets no more retries.
func TestForgedCallsBounded(t *testing.T) {
	ex, topic := uniq("ovsagent-test"), uniq("t-forged")
	cleanupTopic(t, ex, topic, "srv")
	srv := newTransport(t, ex, "srv", func(c *Config) { c.MissingReplyQueueTimeout = 10 * time.Minute })
	var handled atomic.Int32
	ep := Endpoint{Version: "1.0", Methods: map[string]Handler{"echo": func(context.Context, *Request) (any, error) {
		handled.Add(1)
		return "ok", nil
	}}}
	if err := srv.Serve(topic, ep); err != nil {
		t.Fatal(err)
	}
	ch := rawChannel(t)
	call := func(replyQ string) {
		t.Helper()
		body, err := encodeRequest(&outgoing{Method: "echo", Version: "1.0", MsgID: newID(), ReplyQ: replyQ, UniqueID: newID()})
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.PublishWithContext(context.Background(), ex, topic, false, false, amqp.Publishing{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 50
	before := replySenders()
	for i := 0; i < n; i++ {
		call("reply_" + newID())
	}
	waitFor(t, "the calls handled", 30*time.Second, func() bool { return handled.Load() == n })
	max := srv.cfg.MaxReplySenders
	if got := replySenders() - before; got > max {
		t.Errorf("%d reply goroutines for %d forged calls, want at most %d", got, n, max)
	}
	if got := srv.Stats().Dropped[ReasonReplyDropped]; got != uint64(n-max) {
		t.Errorf("dropped replies %d, want %d", got, n-max)
	}

	// A queue found missing: the first reply is retried until the timeout, the next
	// one is not sent at all.
	quick := newTransport(t, ex, "quick", func(c *Config) { c.MissingReplyQueueTimeout = 300 * time.Millisecond })
	topic2 := uniq("t-forged2")
	cleanupTopic(t, ex, topic2, "quick")
	if err := quick.Serve(topic2, ep); err != nil {
		t.Fatal(err)
	}
	gone := "reply_" + newID()
	body, _ := encodeRequest(&outgoing{Method: "echo", Version: "1.0", MsgID: newID(), ReplyQ: gone, UniqueID: newID()})
	pub := func() {
		if err := ch.PublishWithContext(context.Background(), ex, topic2, false, false, amqp.Publishing{Body: body}); err != nil {
			t.Fatal(err)
		}
		body, _ = encodeRequest(&outgoing{Method: "echo", Version: "1.0", MsgID: newID(), ReplyQ: gone, UniqueID: newID()})
	}
	pub()
	waitFor(t, "the first reply given up", 30*time.Second, func() bool { return quick.logs.count("oslo: reply dropped") == 1 })
	pub()
	waitFor(t, "the second call dropped", 30*time.Second, func() bool { return quick.Stats().Dropped[ReasonReplyDropped] == 1 })
	if n := quick.logs.count("oslo: reply not delivered yet, retrying"); n == 0 {
		t.Errorf("the first reply was not retried")
	}
}

// TestDropLogRateLimited: a flood of malformed messages is counted message by message
// but logged dropLogBurst lines at once, then one line per dropLogEvery saying how many
// were not logged.
func TestDropLogRateLimited(t *testing.T) {
	logs := &logRecorder{tb: t}
	obs := newTestObserver()
	tr := NewOffline(Config{Host: "hv1", Logger: slog.New(logs), Observer: obs})
	now := time.Unix(1e9, 0)
	tr.now = func() time.Time { return now }
	if err := tr.Serve("t-log", Endpoint{Methods: map[string]Handler{"m": func(context.Context, *Request) (any, error) { return nil, nil }}}); err != nil {
		t.Fatal(err)
	}
	const n = 500
	for i := 0; i < n; i++ {
		tr.HandleLocal("t-log", []byte("not json"))
	}
	const msg = "oslo: dropping message"
	if got := logs.count(msg); got != dropLogBurst {
		t.Errorf("%d log lines for %d dropped messages, want %d", got, n, dropLogBurst)
	}
	if got := tr.Stats().Dropped[ReasonNotJSON]; got != n {
		t.Errorf("counted %d dropped, want %d", got, n)
	}
	if got := obs.dropped[ReasonNotJSON]; got != n {
		t.Errorf("observer counted %d dropped, want %d", got, n)
	}
	now = now.Add(dropLogEvery)
	tr.HandleLocal("t-log", []byte("not json"))
	if got := logs.count(msg); got != dropLogBurst+1 {
		t.Fatalf("%d log lines after %s, want %d", got, dropLogEvery, dropLogBurst+1)
	}
	last := logs.recs[len(logs.recs)-1]
	var suppressed uint64
	last.Attrs(func(a slog.Attr) bool {
		if a.Key == "suppressed" {
			suppressed = a.Value.Uint64()
		}
		return true
	})
	if suppressed != n-dropLogBurst {
		t.Errorf("line after the pause says %d suppressed, want %d", suppressed, n-dropLogBurst)
	}
}
