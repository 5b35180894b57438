//go:build integration

package oslo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var rmqNodeFound atomic.Value // string

// rmqNode finds the local node rabbitmqctl must address (as refenv/rmq.sh).
func rmqNode(t testing.TB) string {
	t.Helper()
	if n, ok := rmqNodeFound.Load().(string); ok {
		return n
	}
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	for _, n := range []string{"rabbit@localhost", "rabbit@" + host} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := exec.CommandContext(ctx, "rabbitmqctl", "-n", n, "-q", "status").Run()
		cancel()
		if err == nil {
			rmqNodeFound.Store(n)
			return n
		}
	}
	t.Fatal("rabbitmqctl cannot reach the local RabbitMQ node (tried rabbit@localhost, rabbit@<host>)")
	return ""
}

func rabbitmqctl(t testing.TB, node string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "rabbitmqctl", append([]string{"-n", node}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("rabbitmqctl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// reconnectFixture is a server and a client that have done one call.
type reconnectFixture struct {
	ex, topic  string
	srv, cli   *testTransport
	fanoutQ    string
	replyQ     string
	reconnects [2]atomic.Int32
}

func newReconnectFixture(t *testing.T) *reconnectFixture {
	f := &reconnectFixture{ex: uniq("ovsagent-test"), topic: uniq("t-reconn")}
	cleanupTopic(t, f.ex, f.topic, "srv")
	f.srv = newTransport(t, f.ex, "srv")
	f.cli = newTransport(t, f.ex, "cli")
	f.srv.OnReconnect(func() { f.reconnects[0].Add(1) })
	f.cli.OnReconnect(func() { f.reconnects[1].Add(1) })
	if err := f.srv.Serve(f.topic, echoEndpoint("srv", make(chan *Request, 4))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cli.Call(context.Background(), Target{Topic: f.topic}, "echo", nil); err != nil {
		t.Fatal(err)
	}
	f.fanoutQ, f.replyQ = f.srv.FanoutQueue(f.topic), f.cli.ReplyQueue()
	return f
}

// check asserts both sides came back: OnReconnect fired, the same queue names are
// declared again and serve, a call and a fanout cast work.
func (f *reconnectFixture) check(t *testing.T) {
	f.checkSides(t, true)
}

func (f *reconnectFixture) checkSides(t *testing.T, client bool) {
	waitFor(t, "OnReconnect", 90*time.Second, func() bool {
		return f.reconnects[0].Load() >= 1 && (!client || f.reconnects[1].Load() >= 1)
	})
	if f.srv.Stats().Reconnects < 1 || (client && f.cli.Stats().Reconnects < 1) || f.srv.obs.reconnects < 1 {
		t.Fatalf("reconnects not counted: %+v %+v", f.srv.Stats(), f.cli.Stats())
	}
	if f.srv.FanoutQueue(f.topic) != f.fanoutQ || f.cli.ReplyQueue() != f.replyQ {
		t.Fatal("queue names changed across reconnect")
	}
	ch := rawChannel(t)
	for _, q := range []string{f.topic, f.topic + ".srv", f.fanoutQ, f.replyQ} {
		if _, err := ch.QueueDeclarePassive(q, false, false, false, false, nil); err != nil {
			t.Fatalf("queue %s not redeclared: %v", q, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := f.cli.Call(ctx, Target{Topic: f.topic}, "echo", map[string]int{"after": 1})
	if err != nil || !strings.Contains(string(res), `"after":1`) {
		t.Fatalf("call after reconnect: %s %v", res, err)
	}
}

// TestReconnectAfterConnectionClose has the broker close our connections (what a
// heartbeat timeout or a network cut looks like) without disturbing other users.
func TestReconnectAfterConnectionClose(t *testing.T) {
	node := rmqNode(t)
	f := newReconnectFixture(t)
	out := rabbitmqctl(t, node, "list_connections", "-q", "pid", "client_properties")
	closed := 0
	for _, line := range strings.Split(out, "\n") {
		for _, tr := range []*testTransport{f.srv, f.cli} {
			if strings.Contains(line, ":"+tr.id+`"`) {
				pid, _, _ := strings.Cut(line, "\t")
				rabbitmqctl(t, node, "close_connection", pid, "ovsagent oslo test")
				closed++
			}
		}
	}
	if closed != 2 {
		t.Fatalf("found %d of our connections in:\n%s", closed, out)
	}
	f.check(t)
}

// TestInteropHasAliveNeutronServer calls the real neutron-server (refenv, started by
// .ci/run) on the real "neutron" exchange.
func TestInteropHasAliveNeutronServer(t *testing.T) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://127.0.0.1:9696/v2.0/agents")
	if err != nil {
		t.Fatalf("neutron-server is required on 127.0.0.1:9696 (refenv/setup.sh): %v", err)
	}
	resp.Body.Close()
	cli := newTransport(t, "neutron", "ovsagent-oslo-interop")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	// Like the reference agent, ask until the server answers: right after a broker restart
	// neutron-server may not have redeclared its queues yet and the request is unroutable.
	var res []byte
	for {
		res, err = cli.Call(ctx, Target{Topic: "q-reports-plugin", Version: "1.2"}, "has_alive_neutron_server", map[string]any{},
			WithTimeout(5*time.Second))
		if err == nil || !errors.Is(err, ErrTimeout) || ctx.Err() != nil {
			break
		}
		t.Logf("no answer yet: %v", err)
	}
	if err != nil {
		t.Fatalf("has_alive_neutron_server: %v", err)
	}
	if string(res) != "true" {
		t.Fatalf("has_alive_neutron_server = %s, want true", res)
	}
	// Unknown methods come back as oslo's own NoSuchMethod failure.
	_, err = cli.Call(ctx, Target{Topic: "q-reports-plugin", Version: "1.2"}, "ovsagent_no_such_method", nil,
		WithTimeout(30*time.Second))
	if !IsNoSuchMethod(err) {
		t.Fatalf("want NoSuchMethod from neutron-server, got %v", err)
	}
	t.Log(fmt.Sprintf("neutron-server answered: %s; %v", res, err))
}

// TestTopologyMatchesReference compares what Serve and Call declare with the reference's
// objects in docs/reference/captures/rabbit_topology_full.txt.
func TestTopologyMatchesReference(t *testing.T) {
	node := rmqNode(t)
	ex, topic := uniq("ovsagent-test"), uniq("t-topo")
	cleanupTopic(t, ex, topic, "hv1")
	srv := newTransport(t, ex, "hv1")
	if err := srv.Serve(topic, echoEndpoint("hv1", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Call(context.Background(), Target{Topic: topic}, "echo", nil); err != nil {
		t.Fatal(err)
	}
	exchanges := rabbitmqctl(t, node, "list_exchanges", "-q", "--no-table-headers", "name", "type", "durable", "auto_delete", "internal", "arguments")
	queues := rabbitmqctl(t, node, "list_queues", "-q", "--no-table-headers", "name", "durable", "auto_delete", "exclusive", "arguments")
	want := []string{
		ex + "\ttopic\tfalse\tfalse\tfalse\t[]",           // like "neutron"
		topic + "_fanout\tfanout\tfalse\ttrue\tfalse\t[]", // like "q-plugin_fanout"
		topic + "\tfalse\tfalse\tfalse\t[]",               // like "q-plugin"
		topic + ".hv1\tfalse\tfalse\tfalse\t[]",           // like "q-plugin.vm"
		srv.FanoutQueue(topic) + "\tfalse\tfalse\tfalse\t[{\"x-expires\",1800000}]",
		srv.ReplyQueue() + "\tfalse\tfalse\tfalse\t[{\"x-expires\",1800000}]",
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(exchanges+"\n"+queues, "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, w := range want {
		if !lines[w] {
			t.Errorf("broker has no %q", w)
		}
	}
	if !strings.HasPrefix(srv.FanoutQueue(topic), topic+"_fanout_") || len(srv.FanoutQueue(topic)) != len(topic)+8+32 {
		t.Errorf("fanout queue name %s", srv.FanoutQueue(topic))
	}
	if t.Failed() {
		t.Logf("exchanges:\n%s\nqueues:\n%s", exchanges, queues)
	}
}

// TestQueueDeletedIsRedeclared: when someone deletes a consumed queue the broker cancels
// the consumer; the transport reconnects and declares it again under the same name.
func TestQueueDeletedIsRedeclared(t *testing.T) {
	f := newReconnectFixture(t)
	if _, err := rawChannel(t).QueueDelete(f.fanoutQ, false, false, false); err != nil {
		t.Fatal(err)
	}
	f.checkSides(t, false) // the client was not disturbed
}

// TestFailoverToSecondHost: a cluster URL whose first host is down still connects.
func TestFailoverToSecondHost(t *testing.T) {
	requireBroker(t)
	u, err := ParseTransportURL("rabbit://guest:guest@127.0.0.1:1,guest:guest@127.0.0.1:5672/")
	if err != nil {
		t.Fatal(err)
	}
	logs := &logRecorder{tb: t}
	tr, err := Dial(context.Background(), Config{URL: u, Host: "h", Logger: slog.New(logs), RetryInterval: 50 * time.Millisecond, keepHostOrder: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	waitFor(t, "connection through the second host", 10*time.Second, tr.Connected)
	if logs.count("oslo: connect failed") < 1 {
		t.Fatal("first host was not tried")
	}
}
