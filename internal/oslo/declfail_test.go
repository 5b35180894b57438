//go:build integration

package oslo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/ovsagent/ovsagent/internal/metrics"
)

// declObserver adds DeclareFailed to the test observer.
type declObserver struct {
	*testObserver
	mu     sync.Mutex
	failed map[string]int // queue + " " + reason
}

func (o *declObserver) DeclareFailed(queue, reason string) {
	o.mu.Lock()
	o.failed[queue+" "+reason]++
	o.mu.Unlock()
}

func (o *declObserver) count(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failed[key]
}

// errorLogged reports whether an ERROR record says msg with queue and reason.
func (l *logRecorder) errorLogged(msg, queue, reason string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if r.Level != slog.LevelError || r.Message != msg {
			continue
		}
		got := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { got[a.Key] = a.Value.String(); return true })
		if got["queue"] == queue && got["reason"] == reason {
			return true
		}
	}
	return false
}

// TestDeclareConflictRetried: a queue someone declared with other arguments makes the
// broker refuse ovs-agent's declaration (406). That is an ERROR naming the queue and the
// reason, a count, a failing DeclareCheck, and it is retried until the conflict is
// removed; then the server consumes and answers.
func TestDeclareConflictRetried(t *testing.T) {
	vh := testVhost(t)
	topic := uniq("t-conflict")
	conn, err := amqp.Dial("amqp://guest:guest@127.0.0.1:5672/" + vh)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(topic, false, false, false, false, amqp.Table{"x-max-length": int32(10)}); err != nil {
		t.Fatal(err)
	}
	obs := &declObserver{failed: map[string]int{}}
	srv := newTransport(t, "neutron", "srv", func(c *Config) {
		c.URL.VHost = vh
		obs.testObserver = c.Observer.(*testObserver)
		c.Observer = obs
	})
	if err := srv.Serve(topic, echoEndpoint("srv", make(chan *Request, 4))); err != nil {
		t.Fatalf("Serve must leave a refused declaration to the retries, got %v", err)
	}
	key := topic + " precondition_failed"
	waitFor(t, "two refused declarations of "+topic, 60*time.Second, func() bool { return obs.count(key) >= 2 })
	if !srv.logs.errorLogged("oslo: declare failed, retrying", topic, "precondition_failed") {
		t.Fatal("no ERROR naming the queue and the reason")
	}
	if err := srv.DeclareCheck(); err == nil || !strings.Contains(err.Error(), topic) || !strings.Contains(err.Error(), "x-max-length") {
		t.Fatalf("DeclareCheck = %v, want the queue and the broker's reason", err)
	}
	if n := srv.Stats().DeclareFailures; n < 2 {
		t.Fatalf("Stats().DeclareFailures = %d", n)
	}
	// Readiness, as run.go wires it.
	m := metrics.New()
	m.SetInSync(true)
	ms, err := metrics.Listen("127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	ms.Ready(srv.DeclareCheck)
	mctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { _ = ms.Serve(mctx, nil); close(served) }()
	defer func() { stop(); <-served }()
	readyz := func() (int, string) {
		resp, err := http.Get("http://" + ms.Addr() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(body, topic) {
		t.Fatalf("/readyz during the conflict = %d %q, want 503 naming %s", code, body, topic)
	}

	if _, err := ch.QueueDelete(topic, false, false, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the declaration to succeed once the conflict is gone", 60*time.Second, func() bool {
		return srv.DeclareCheck() == nil && srv.Connected()
	})
	if code, body := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz after the conflict = %d %q", code, body)
	}
	cli := newTransport(t, "neutron", "cli", func(c *Config) { c.URL.VHost = vh })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if res, err := cli.Call(ctx, Target{Topic: topic}, "echo", map[string]int{"x": 1}); err != nil || !strings.Contains(string(res), `"x":1`) {
		t.Fatalf("call after the conflict was removed: %s %v", res, err)
	}
}

// TestReplyQueueConflictRetried: the same for the reply queue, declared by the first
// call: the call fails naming the queue, the next one declares it again.
func TestReplyQueueConflictRetried(t *testing.T) {
	vh := testVhost(t)
	obs := &declObserver{failed: map[string]int{}}
	cli := newTransport(t, "neutron", "cli", func(c *Config) {
		c.URL.VHost = vh
		obs.testObserver = c.Observer.(*testObserver)
		c.Observer = obs
	})
	conn, err := amqp.Dial("amqp://guest:guest@127.0.0.1:5672/" + vh)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	reply := cli.ReplyQueue()
	if _, err := ch.QueueDeclare(reply, false, false, false, false, amqp.Table{"x-max-length": int32(1)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = cli.ensureReply(ctx)
	if err == nil || !strings.Contains(err.Error(), reply) {
		t.Fatalf("ensureReply = %v, want an error naming %s", err, reply)
	}
	if obs.count(reply+" precondition_failed") != 1 || !cli.logs.errorLogged("oslo: declare failed, retrying", reply, "precondition_failed") {
		t.Fatal("the refused reply queue was not logged as an ERROR and counted")
	}
	if err := cli.DeclareCheck(); err == nil || !strings.Contains(err.Error(), reply) {
		t.Fatalf("DeclareCheck = %v", err)
	}
	if _, err := ch.QueueDelete(reply, false, false, false); err != nil {
		t.Fatal(err)
	}
	if err := cli.ensureReply(ctx); err != nil {
		t.Fatalf("ensureReply after the conflict was removed: %v", err)
	}
	if err := cli.DeclareCheck(); err != nil {
		t.Fatalf("DeclareCheck after recovery = %v", err)
	}
}

// TestStreamFanoutResumesAtOffset: with rabbit_stream_fanout the server reads the one
// <topic>_fanout stream; after a reconnect it goes on after the last message it read,
// as oslo does: the casts published while it was away arrive once each, the earlier
// ones are not read again.
func TestStreamFanoutResumesAtOffset(t *testing.T) {
	vh := testVhost(t)
	topic := uniq("t-stream")
	q := Queues{Quorum: true, TransientQuorum: true, StreamFanout: true, Prefetch: 10}
	casts := make(chan *Request, 16)
	srv := newTransport(t, "neutron", "srv", func(c *Config) {
		c.URL.VHost, c.Queues = vh, q
		c.RetryInterval = 3 * time.Second // a reconnect gap to publish into
	})
	if err := srv.Serve(topic, echoEndpoint("srv", casts)); err != nil {
		t.Fatal(err)
	}
	if srv.FanoutQueue(topic) != topic+"_fanout" {
		t.Fatalf("fanout queue %s", srv.FanoutQueue(topic))
	}
	cli := newTransport(t, "neutron", "cli", func(c *Config) { c.URL.VHost, c.Queues = vh, q })
	ctx := context.Background()
	note := func(n int) {
		t.Helper()
		if err := cli.Cast(ctx, Target{Topic: topic, Fanout: true}, "note", map[string]int{"n": n}); err != nil {
			t.Fatal(err)
		}
	}
	got := func() string { return string(recvT(t, casts, "a fanout cast").Args) }
	for n := 1; n <= 3; n++ {
		note(n)
		if a := got(); a != fmt.Sprintf(`{"n":%d}`, n) {
			t.Fatalf("cast %d: %s", n, a)
		}
	}
	srv.mu.Lock()
	sess := srv.sess
	srv.mu.Unlock()
	_ = sess.conn.Close()
	// Three casts while it is away: "last" would start at the last chunk, losing the
	// chunks before it.
	for n := 4; n <= 6; n++ {
		note(n)
		time.Sleep(100 * time.Millisecond) // separate stream chunks, not a threshold
	}
	for n := 4; n <= 6; n++ {
		if a := got(); a != fmt.Sprintf(`{"n":%d}`, n) {
			t.Fatalf("after the reconnect the server read %s, want cast %d", a, n)
		}
	}
	select {
	case r := <-casts:
		t.Fatalf("read again after the reconnect: %s", r.Args)
	case <-time.After(2 * time.Second):
	}
	if srv.Stats().Reconnects < 1 || srv.obs.dropped[ReasonDuplicate] != 0 {
		t.Fatalf("reconnects %d, duplicates dropped %d", srv.Stats().Reconnects, srv.obs.dropped[ReasonDuplicate])
	}
}
