//go:build integration

package oslo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// These tests need the RabbitMQ on 127.0.0.1:5672 (guest/guest) that .ci/run starts.
// Every test uses its own control exchange and topics, so neutron-server's traffic on
// the same broker and concurrent tests do not mix.

const brokerURL = "rabbit://guest:guest@127.0.0.1:5672/"

func requireBroker(t testing.TB) {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:5672", 2*time.Second)
	if err != nil {
		t.Fatalf("RabbitMQ is required on 127.0.0.1:5672 (start it, e.g. refenv/setup.sh): %v", err)
	}
	c.Close()
}

func uniq(prefix string) string { return prefix + "-" + newID()[:10] }

// logRecorder is a slog handler that keeps records for assertions and forwards to t.Log.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
	tb   testing.TB
	done chan struct{}
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.recs = append(l.recs, r.Clone())
	l.mu.Unlock()
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.Message == msg {
			n++
		}
	}
	return n
}

func (l *logRecorder) dump(tb testing.TB) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		var b strings.Builder
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		tb.Logf("%s %s%s", r.Level, r.Message, b.String())
	}
}

// testObserver counts what the transport reports.
type testObserver struct {
	mu         sync.Mutex
	calls      map[string]int
	dropped    map[string]int
	reconnects int
}

func newTestObserver() *testObserver {
	return &testObserver{calls: map[string]int{}, dropped: map[string]int{}}
}
func (o *testObserver) CallDone(m string, _ time.Duration, _ error) {
	o.mu.Lock()
	o.calls[m]++
	o.mu.Unlock()
}
func (o *testObserver) Dropped(_, reason string) {
	o.mu.Lock()
	o.dropped[reason]++
	o.mu.Unlock()
}
func (o *testObserver) Reconnected() { o.mu.Lock(); o.reconnects++; o.mu.Unlock() }

type testTransport struct {
	*Transport
	logs *logRecorder
	obs  *testObserver
}

func newTransport(t testing.TB, exchange, host string, mod ...func(*Config)) *testTransport {
	t.Helper()
	requireBroker(t)
	u, err := ParseTransportURL(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logRecorder{tb: t}
	obs := newTestObserver()
	cfg := Config{URL: u, Host: host, ControlExchange: exchange, Logger: slog.New(logs), Observer: obs,
		RetryInterval: 200 * time.Millisecond, RetryBackoff: 200 * time.Millisecond, RetryMax: time.Second,
		BackoffSleep: func(context.Context, time.Duration) {}}
	for _, f := range mod {
		f(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tr, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		// Reply and fanout queues outlive their process by x-expires (30 min); tests
		// remove theirs at once.
		ch := rawChannel(t)
		_, _ = ch.QueueDelete(tr.ReplyQueue(), false, false, false)
		for _, s := range tr.servers {
			_, _ = ch.QueueDelete(s.fanoutQ, false, false, false)
		}
		if t.Failed() || os.Getenv("OSLO_TEST_LOGS") != "" {
			logs.dump(t)
		}
	})
	for deadline := time.Now().Add(15 * time.Second); !tr.Connected(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not connected to %s", brokerURL)
		}
	}
	return &testTransport{Transport: tr, logs: logs, obs: obs}
}

// rawChannel is a plain AMQP channel for publishing hand-made bodies and cleaning up.
func rawChannel(t testing.TB) *amqp.Channel {
	t.Helper()
	requireBroker(t)
	conn, err := amqp.Dial("amqp://guest:guest@127.0.0.1:5672/")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return ch
}

// cleanupTopic deletes the shared queues and the exchange a test created (they are not
// auto-delete, exactly like the reference's).
func cleanupTopic(t testing.TB, exchange string, topic string, hosts ...string) {
	t.Cleanup(func() {
		ch := rawChannel(t)
		_, _ = ch.QueueDelete(topic, false, false, false)
		for _, h := range hosts {
			_, _ = ch.QueueDelete(topic+"."+h, false, false, false)
		}
		_ = ch.ExchangeDelete(exchange, false, false)
	})
}

func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func recvT[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func echoEndpoint(host string, casts chan<- *Request) Endpoint {
	return Endpoint{Version: "1.3", Methods: map[string]Handler{
		"echo": func(_ context.Context, r *Request) (any, error) {
			var args map[string]any
			if err := json.Unmarshal(r.Args, &args); err != nil {
				return nil, err
			}
			c, err := r.DecodeContext()
			if err != nil {
				return nil, err
			}
			return map[string]any{"args": args, "host": host, "is_admin": c["is_admin"]}, nil
		},
		"fail": func(context.Context, *Request) (any, error) { return nil, errors.New("boom") },
		"badargs": func(context.Context, *Request) (any, error) {
			return nil, fmt.Errorf("handler: %w", &DecodeError{Reason: ReasonBadArgs, Detail: "x is not a string"})
		},
		"note": func(_ context.Context, r *Request) (any, error) { casts <- r; return nil, nil },
	}}
}

func TestCallCastRoundTrip(t *testing.T) {
	ex, topic := uniq("ovsagent-test"), uniq("t-rt")
	cleanupTopic(t, ex, topic, "srv")
	srv := newTransport(t, ex, "srv")
	cli := newTransport(t, ex, "cli")
	casts := make(chan *Request, 4)
	if err := srv.Serve(topic, echoEndpoint("srv", casts)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tgt := range []Target{{Topic: topic, Version: "1.2"}, {Topic: topic, Server: "srv"}} {
		res, err := cli.Call(ctx, tgt, "echo", map[string]any{"x": 1, "s": "<&>"})
		if err != nil {
			t.Fatalf("%+v: %v", tgt, err)
		}
		var got struct {
			Args    map[string]any
			Host    string
			IsAdmin bool `json:"is_admin"`
		}
		if err := json.Unmarshal(res, &got); err != nil {
			t.Fatal(err)
		}
		if got.Host != "srv" || got.Args["x"] != float64(1) || got.Args["s"] != "<&>" || !got.IsAdmin {
			t.Fatalf("%+v: reply %s", tgt, res)
		}
	}
	_, err := cli.Call(ctx, Target{Topic: topic}, "fail", nil)
	var re *RemoteError
	if !errors.As(err, &re) || re.Class != "RuntimeError" || re.Message != "boom" {
		t.Fatalf("fail: %v", err)
	}
	if err := cli.Cast(ctx, Target{Topic: topic, Version: "1.1"}, "note", map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	r := recvT(t, casts, "cast")
	if r.Method != "note" || r.Version != "1.1" || string(r.Args) != `{"k":"v"}` {
		t.Fatalf("cast request %+v", r)
	}
	if n := cli.obs.calls["echo"]; n != 2 {
		t.Errorf("observer saw %d echo calls", n)
	}
	if st := cli.Stats(); st.Calls != 3 || st.CallErrors != 1 || !st.Connected {
		t.Errorf("stats %+v", st)
	}
}

func TestFanoutReachesAllServers(t *testing.T) {
	ex, topic := uniq("ovsagent-test"), uniq("t-fan")
	cleanupTopic(t, ex, topic, "a", "b")
	cli := newTransport(t, ex, "cli")
	var got [2]chan *Request
	for i, h := range []string{"a", "b"} {
		got[i] = make(chan *Request, 16)
		tr := newTransport(t, ex, h)
		if err := tr.Serve(topic, echoEndpoint(h, got[i])); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	if err := cli.Cast(ctx, Target{Topic: topic, Fanout: true}, "note", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if r := recvT(t, got[i], "fanout"); r.Method != "note" {
			t.Fatalf("server %d got %+v", i, r)
		}
	}
	// A cast to one server's queue reaches only that server.
	if err := cli.Cast(ctx, Target{Topic: topic, Server: "b"}, "note", map[string]int{"n": 2}); err != nil {
		t.Fatal(err)
	}
	if r := recvT(t, got[1], "directed cast"); string(r.Args) != `{"n":2}` {
		t.Fatalf("b got %s", r.Args)
	}
	// A cast to the topic reaches exactly one of them.
	if err := cli.Cast(ctx, Target{Topic: topic}, "note", map[string]int{"n": 3}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got[0]:
	case <-got[1]:
	case <-time.After(10 * time.Second):
		t.Fatal("topic cast not delivered")
	}
	if len(got[0])+len(got[1]) != 0 {
		t.Fatal("topic cast delivered twice")
	}
}

func TestDispatchFailures(t *testing.T) {
	ex, topic := uniq("ovsagent-test"), uniq("t-disp")
	cleanupTopic(t, ex, topic, "srv")
	srv := newTransport(t, ex, "srv")
	cli := newTransport(t, ex, "cli")
	casts := make(chan *Request, 4)
	if err := srv.Serve(topic, echoEndpoint("srv", casts)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err := cli.Call(ctx, Target{Topic: topic, Version: "1.0"}, "nope", nil)
	if !IsNoSuchMethod(err) {
		t.Fatalf("want NoSuchMethod, got %v", err)
	}
	for _, tgt := range []Target{{Topic: topic, Version: "2.0"}, {Topic: topic, Version: "1.4"}, {Topic: topic, Namespace: "other"}} {
		_, err := cli.Call(ctx, tgt, "echo", nil)
		if !IsUnsupportedVersion(err) {
			t.Fatalf("%+v: want UnsupportedVersion, got %v", tgt, err)
		}
		var re *RemoteError
		errors.As(err, &re)
		if re.Module != "oslo_messaging.rpc.dispatcher" || !strings.Contains(re.Message, "Attempted method: echo") {
			t.Fatalf("%+v", re)
		}
	}
	// A cast of an unknown method or with arguments a handler rejects as malformed
	// is dropped (logged once, counted by reason); a handler that merely fails is
	// logged as a failed cast. The server keeps serving.
	for _, m := range []string{"nope", "badargs", "fail", "note"} {
		if err := cli.Cast(ctx, Target{Topic: topic}, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	recvT(t, casts, "cast after failed cast")
	if n := srv.logs.count("oslo: cast failed"); n != 1 {
		t.Fatalf("cast failure logged %d times", n)
	}
	// 1 call + 1 cast of "nope", 3 calls of unsupported versions, 1 cast of badargs
	if n := srv.logs.count("oslo: dropping message"); n != 6 {
		t.Fatalf("dropped messages logged %d times, want 6", n)
	}
	st := srv.Stats()
	if st.Dropped[ReasonUnknownMethod] != 2 || st.Dropped[ReasonUnsupportedVersion] != 3 || st.Dropped[ReasonBadArgs] != 1 {
		t.Fatalf("dropped by reason: %v", st.Dropped)
	}
}

func TestMalformedMessagesDropped(t *testing.T) {
	ex, topic := uniq("ovsagent-test"), uniq("t-bad")
	cleanupTopic(t, ex, topic, "srv")
	srv := newTransport(t, ex, "srv")
	casts := make(chan *Request, 4)
	if err := srv.Serve(topic, echoEndpoint("srv", casts)); err != nil {
		t.Fatal(err)
	}
	ch := rawChannel(t)
	pub := func(body []byte) {
		t.Helper()
		if err := ch.PublishWithContext(context.Background(), ex, topic, false, false, amqp.Publishing{Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	inner := func(s string) []byte {
		b, _ := json.Marshal(map[string]string{"oslo.version": "2.0", "oslo.message": s})
		return b
	}
	bad := []struct {
		reason string
		body   []byte
	}{
		{ReasonNotJSON, []byte("\x00\xffnot json")},
		{ReasonNotObject, []byte(`"a string"`)},
		{ReasonEnvelopeVersion, []byte(`{"oslo.version": "1.0", "oslo.message": "{\"method\": \"note\"}"}`)},
		{ReasonEnvelopeVersion, []byte(`{"oslo.version": "3.0", "oslo.message": "{\"method\": \"note\"}"}`)},
		{ReasonNotJSON, inner(`{"method": "note", `)},
		{ReasonMissingMethod, inner(`{"args": {}}`)},
		{ReasonMissingMethod, inner(`{"method": 7, "args": {}}`)},
		{ReasonBadArgs, inner(`{"method": "note", "args": ["x"]}`)},
		{ReasonBadArgs, inner(`{"method": "note", "args": "x"}`)},
		{ReasonTooLarge, bytes.Repeat([]byte("a"), 10<<20)},
	}
	for _, b := range bad {
		pub(b.body)
	}
	dup := inner(`{"method": "note", "args": {"n": "dup"}, "_unique_id": "0123456789abcdef0123456789abcdef"}`)
	pub(dup)
	pub(dup)
	pub(inner(`{"method": "note", "args": {"n": "last"}, "_unique_id": "fedcba9876543210fedcba9876543210"}`))
	if r := recvT(t, casts, "first of duplicates"); string(r.Args) != `{"n": "dup"}` {
		t.Fatalf("got %s", r.Args)
	}
	if r := recvT(t, casts, "message after the bad ones"); string(r.Args) != `{"n": "last"}` {
		t.Fatalf("got %s", r.Args)
	}
	want := map[string]uint64{ReasonDuplicate: 1}
	for _, b := range bad {
		want[b.reason]++
	}
	st := srv.Stats()
	for reason, n := range want {
		if st.Dropped[reason] != n {
			t.Errorf("dropped[%s] = %d, want %d (all: %v)", reason, st.Dropped[reason], n, st.Dropped)
		}
		if srv.obs.dropped[reason] != int(n) {
			t.Errorf("observer dropped[%s] = %d, want %d", reason, srv.obs.dropped[reason], n)
		}
	}
	if n := srv.logs.count("oslo: dropping message"); n != len(bad)+1 {
		t.Errorf("%d drop log lines for %d dropped messages", n, len(bad)+1)
	}
	// Still alive after all that.
	cli := newTransport(t, ex, "cli")
	if _, err := cli.Call(context.Background(), Target{Topic: topic}, "echo", nil); err != nil {
		t.Fatal(err)
	}
}

func TestCallTimeoutBackoff(t *testing.T) {
	ex, topic := uniq("ovsagent-test"), uniq("t-timeout")
	var mu sync.Mutex
	var sleeps []time.Duration
	cli := newTransport(t, ex, "cli", func(c *Config) {
		c.ResponseTimeout, c.ResponseMaxTimeout = 300*time.Millisecond, time.Second
		c.BackoffSleep = func(_ context.Context, d time.Duration) { mu.Lock(); sleeps = append(sleeps, d); mu.Unlock() }
	})
	// A queue with no consumer catches the request so its properties can be checked.
	ch := rawChannel(t)
	if err := ch.ExchangeDeclare(ex, "topic", false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(topic, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind(topic, topic, ex, false, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rawChannel(t).ExchangeDelete(ex, false, false) })
	tgt := Target{Topic: topic, Version: "1.2"}
	ctx := context.Background()
	for i, want := range []time.Duration{600 * time.Millisecond, time.Second, time.Second} {
		_, err := cli.Call(ctx, tgt, "slow", nil)
		var te *TimeoutError
		if !errors.Is(err, ErrTimeout) || !errors.As(err, &te) {
			t.Fatalf("call %d: want timeout, got %v", i, err)
		}
		if got := cli.MethodTimeout(tgt, "slow"); got != want {
			t.Fatalf("call %d: method timeout %s, want %s", i, got, want)
		}
	}
	mu.Lock()
	if len(sleeps) != 3 {
		t.Fatalf("sleeps %v", sleeps)
	}
	for _, d := range sleeps {
		if d < 0 || d > 300*time.Millisecond {
			t.Errorf("sleep %s outside [0, min(timeout, rpc_response_timeout)]", d)
		}
	}
	mu.Unlock()
	// An explicit timeout bypasses the backoff.
	if _, err := cli.Call(ctx, tgt, "report", nil, WithTimeout(100*time.Millisecond)); !errors.Is(err, ErrTimeout) {
		t.Fatal(err)
	}
	if cli.MethodTimeout(tgt, "report") != 300*time.Millisecond || len(sleeps) != 3 {
		t.Fatal("WithTimeout changed the backoff state")
	}
	// Requests carry the call timeout as per-message TTL (expiration, in ms).
	_, _ = ch.QueuePurge(topic, false)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := cli.Call(cctx, tgt, "props", nil, WithTimeout(30*time.Second))
		done <- err
	}()
	var d amqp.Delivery
	waitFor(t, "request in queue", 10*time.Second, func() bool {
		var ok bool
		var err error
		d, ok, err = ch.Get(topic, true)
		return err == nil && ok
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	if d.Expiration != "30000" || d.ContentType != "application/json" || d.ContentEncoding != "utf-8" || d.DeliveryMode != 2 {
		t.Fatalf("properties: expiration %q type %q enc %q mode %d", d.Expiration, d.ContentType, d.ContentEncoding, d.DeliveryMode)
	}
	in, err := decodeRequest(d.Body, 0)
	if err != nil || in.ReplyQ != cli.ReplyQueue() || in.MsgID == "" || in.Version != "1.2" {
		t.Fatalf("request %+v %v", in, err)
	}
}

func TestDialBrokerDown(t *testing.T) {
	u, _ := ParseTransportURL("rabbit://guest:guest@127.0.0.1:1/")
	tr, err := Dial(context.Background(), Config{URL: u, Host: "h", RetryInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatalf("a down broker must not fail Dial: %v", err)
	}
	if tr.Connected() {
		t.Fatal("connected to nothing")
	}
	if err := tr.Serve("x", Endpoint{Methods: map[string]Handler{}}); err != nil {
		t.Fatalf("Serve while down: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := tr.Cast(ctx, Target{Topic: "x"}, "m", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cast while down: %v", err)
	}
	if _, err := tr.Call(context.Background(), Target{Topic: "x"}, "m", nil, WithTimeout(200*time.Millisecond)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("call while down: %v", err)
	}
	// The caller's own deadline is not a messaging timeout: no backoff.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if _, err := tr.Call(ctx2, Target{Topic: "x"}, "m", nil); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
		t.Fatalf("call with caller deadline: %v", err)
	}
	if d := tr.MethodTimeout(Target{Topic: "x"}, "m"); d != 60*time.Second {
		t.Fatalf("caller deadline changed the method timeout to %s", d)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Call(context.Background(), Target{Topic: "x"}, "m", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after close: %v", err)
	}
}

func BenchmarkCallRoundTrip(b *testing.B) {
	ex, topic := uniq("ovsagent-bench"), uniq("b-call")
	cleanupTopic(b, ex, topic, "srv")
	srv := newTransport(b, ex, "srv")
	cli := newTransport(b, ex, "cli")
	if err := srv.Serve(topic, echoEndpoint("srv", nil)); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	args := map[string]any{"devices_up": []string{"8a6d3c1e-1f5e-4f61-9d0b-3f0c2a1b4c5d"}, "host": "hv1"}
	b.ResetTimer()
	for b.Loop() {
		if _, err := cli.Call(ctx, Target{Topic: topic}, "echo", args); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReplyRetriedUntilQueueExists: replies are published mandatory, so a reply to a
// queue that does not exist yet comes back and is retried (every 250 ms), not lost.
func TestReplyRetriedUntilQueueExists(t *testing.T) {
	ex, topic := uniq("ovsagent-test"), uniq("t-reply")
	cleanupTopic(t, ex, topic, "srv")
	srv := newTransport(t, ex, "srv")
	if err := srv.Serve(topic, echoEndpoint("srv", nil)); err != nil {
		t.Fatal(err)
	}
	replyQ, msgID := "reply_"+newID(), newID()
	body, err := encodeRequest(&outgoing{Method: "echo", Args: map[string]int{"n": 7}, Version: "1.0",
		MsgID: msgID, ReplyQ: replyQ, UniqueID: newID(), Context: AdminContext(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	ch := rawChannel(t)
	if err := ch.PublishWithContext(context.Background(), ex, topic, false, false, amqp.Publishing{Body: body}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an unroutable reply retry", 10*time.Second, func() bool {
		return srv.logs.count("oslo: reply not delivered yet, retrying") >= 1
	})
	if _, err := ch.QueueDeclare(replyQ, false, true, false, false, nil); err != nil {
		t.Fatal(err)
	}
	var d amqp.Delivery
	waitFor(t, "the reply", 10*time.Second, func() bool {
		var ok bool
		d, ok, err = ch.Get(replyQ, true)
		return err == nil && ok
	})
	r, err := decodeReply(d.Body, 0)
	if err != nil || r.MsgID != msgID || !r.Ending || r.Failure != nil || !strings.Contains(string(r.Result), `"n":7`) {
		t.Fatalf("reply %+v %v", r, err)
	}
}

// TestDurableControlExchangeAccepted: when an operator's config made the control exchange
// durable, declaring it non-durable is refused ("inequivalent arg 'durable'"); publisher
// and server fall back to the existing exchange instead of failing.
func TestDurableControlExchangeAccepted(t *testing.T) {
	ex, topic := uniq("ovsagent-test"), uniq("t-durable")
	cleanupTopic(t, ex, topic, "srv")
	if err := rawChannel(t).ExchangeDeclare(ex, "topic", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	srv := newTransport(t, ex, "srv")
	cli := newTransport(t, ex, "cli")
	casts := make(chan *Request, 1)
	if err := srv.Serve(topic, echoEndpoint("srv", casts)); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Call(context.Background(), Target{Topic: topic}, "echo", nil); err != nil {
		t.Fatal(err)
	}
	if err := cli.Cast(context.Background(), Target{Topic: topic}, "note", nil); err != nil {
		t.Fatal(err)
	}
	recvT(t, casts, "cast through a durable exchange")
}

// A call published while no server consumes its topic (neutron-server still reconnecting
// after a broker restart) is returned by the broker and published again: it is answered
// once the server is there, not lost until the timeout.
func TestCallBeforeServerConsumes(t *testing.T) {
	ex, topic, other := uniq("ovsagent-test"), uniq("t-late"), uniq("t-other")
	cleanupTopic(t, ex, topic, "srv")
	cleanupTopic(t, ex, other, "srv")
	srv := newTransport(t, ex, "srv")
	cli := newTransport(t, ex, "cli")
	casts := make(chan *Request, 4)
	// the control exchange exists (declared by a consumer), no queue is bound for topic yet
	if err := srv.Serve(other, echoEndpoint("srv", casts)); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(1500 * time.Millisecond)
		if err := srv.Serve(topic, echoEndpoint("srv", casts)); err != nil {
			t.Error(err)
		}
	}()
	start := time.Now()
	_, err := cli.Call(context.Background(), Target{Topic: topic, Version: "1.0"}, "echo", map[string]any{"x": 1}, WithTimeout(20*time.Second))
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("answered after %s: the first publication was lost", d)
	}
	if n := cli.logs.count("oslo: no server consumes the topic yet; publishing again until the call's deadline"); n != 1 {
		t.Fatalf("unroutable call logged %d times, want 1", n)
	}
}
