//go:build integration

package oslo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// nextDial is kombu's round-robin: the next broker at once until a full round has
// failed, then the delay of that round.
func TestNextDialRoundRobin(t *testing.T) {
	delay := func(round int) time.Duration { return time.Duration(round+1) * time.Second }
	type step struct {
		hosts, prev, failed int
		idx                 int
		wait                time.Duration
	}
	for _, s := range []step{
		{1, -1, 0, 0, 0},          // first attempt, one broker
		{1, 0, 1, 0, time.Second}, // it failed: the same broker after delay(0)
		{1, 0, 2, 0, 2 * time.Second},
		{3, -1, 0, 0, 0},          // first attempt of a cluster: the first broker
		{3, 0, 1, 1, 0},           // it failed: the second at once
		{3, 1, 2, 2, 0},           // and the third
		{3, 2, 3, 0, time.Second}, // a full round failed: delay(0), then the first again
		{3, 0, 4, 1, 0},
		{3, 2, 6, 0, 2 * time.Second}, // second full round: delay(1)
		{3, 0, 0, 1, 0},               // connection on the first lost: the second at once
		{3, 2, 0, 0, 0},               // on the third lost: the first
		{2, 1, 0, 0, 0},
	} {
		idx, wait := nextDial(s.hosts, s.prev, s.failed, delay)
		if idx != s.idx || wait != s.wait {
			t.Errorf("nextDial(hosts %d, prev %d, failed %d) = %d, %s; want %d, %s", s.hosts, s.prev, s.failed, idx, wait, s.idx, s.wait)
		}
	}
}

// relay is a TCP relay to the broker whose connections the test can cut, counting
// the connections it accepted (a cluster node that dies, seen from the client).
type relay struct {
	l        net.Listener
	accepted atomic.Int32
	mu       sync.Mutex
	conns    []net.Conn
}

func newRelay(t *testing.T, target string) *relay {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{l: l}
	t.Cleanup(func() { l.Close(); r.cut() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.accepted.Add(1)
			b, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, b)
			r.mu.Unlock()
			go func() { _, _ = io.Copy(b, c); b.Close() }()
			go func() { _, _ = io.Copy(c, b); c.Close() }()
		}
	}()
	return r
}

func (r *relay) port() int { return r.l.Addr().(*net.TCPAddr).Port }

func (r *relay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// TestLostConnectionFailsOverToNextHost: the connection to the first broker of a
// two-broker URL is cut while that broker still accepts connections; the transport
// reconnects through the second one (kombu's round-robin), not to the same broker,
// and its consumers serve again.
func TestLostConnectionFailsOverToNextHost(t *testing.T) {
	requireBroker(t)
	a, b := newRelay(t, "127.0.0.1:5672"), newRelay(t, "127.0.0.1:5672")
	u, err := ParseTransportURL(fmt.Sprintf("rabbit://guest:guest@127.0.0.1:%d,guest:guest@127.0.0.1:%d/", a.port(), b.port()))
	if err != nil {
		t.Fatal(err)
	}
	ex, topic := uniq("ovsagent-test"), uniq("t-failover")
	cleanupTopic(t, ex, topic, "srv")
	logs := &logRecorder{tb: t}
	srv, err := Dial(context.Background(), Config{URL: u, Host: "srv", ControlExchange: ex, Logger: slog.New(logs),
		RetryInterval: 2 * time.Second, RetryBackoff: time.Second, RetryMax: 5 * time.Second, keepHostOrder: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	waitFor(t, "connected", 10*time.Second, srv.Connected)
	if err := srv.Serve(topic, echoEndpoint("srv", nil)); err != nil {
		t.Fatal(err)
	}
	if a.accepted.Load() != 1 || b.accepted.Load() != 0 {
		t.Fatalf("before the cut: first broker %d connections, second %d; want 1, 0", a.accepted.Load(), b.accepted.Load())
	}
	a.cut()
	waitFor(t, "reconnected", 30*time.Second, func() bool { return srv.Stats().Reconnects >= 1 })
	if got := a.accepted.Load(); got != 1 {
		t.Errorf("the first broker got %d connections, want 1: the lost connection was retried on the same broker", got)
	}
	if got := b.accepted.Load(); got != 1 {
		t.Errorf("the second broker got %d connections, want 1", got)
	}
	cli := newTransport(t, ex, "cli")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Call(ctx, Target{Topic: topic, Server: "srv"}, "echo", nil); err != nil {
		t.Fatalf("call after failover: %v", err)
	}
}

// oslo shuffles transport_url's brokers for each connection: every broker
// comes first for some processes, the caller's list is left as it is.
func TestHostsShuffled(t *testing.T) {
	// closed ports of this machine: each Dial fails at once and returns
	hosts := []Host{{Host: "127.0.0.1", Port: 1}, {Host: "127.0.0.1", Port: 2}, {Host: "127.0.0.1", Port: 3}}
	reverse := func(n int, swap func(i, j int)) {
		for i := 0; i < n/2; i++ {
			swap(i, n-1-i)
		}
	}
	got := shuffledHosts(hosts, reverse)
	if got[0].Port != 3 || got[1].Port != 2 || got[2].Port != 1 || hosts[0].Port != 1 {
		t.Fatalf("shuffledHosts = %v (input now %v)", got, hosts)
	}
	first := map[int]int{}
	for i := 0; i < 60; i++ {
		u := TransportURL{Hosts: hosts}
		tr, err := Dial(context.Background(), Config{URL: u, Host: "h", RetryInterval: time.Hour,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		first[tr.cfg.URL.Hosts[0].Port]++
		if len(tr.cfg.URL.Hosts) != 3 {
			t.Fatalf("hosts %v", tr.cfg.URL.Hosts)
		}
		tr.Close()
	}
	for _, h := range hosts {
		if first[h.Port] == 0 {
			t.Errorf("broker %s never first in 60 transports: %v", h.Addr(), first)
		}
	}
}
