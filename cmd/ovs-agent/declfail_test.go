//go:build integration

package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// TestBinaryDeclareConflictVisible: the real binary with rabbit_quorum_queue = true on a
// vhost where its per-host topic queue already exists as a classic durable queue (what a
// cloud has after turning quorum queues on without deleting the old queues). The broker
// refuses the quorum declaration (406 inequivalent arg 'x-queue-type'); the agent must
// say so as an ERROR naming the queue and the reason, count it in
// ovsagent_amqp_declare_failures_total, answer 503 on /readyz naming the queue, and
// retry: once the old queue is deleted it declares the quorum queue and the queue leaves
// /readyz. internal/oslo's TestDeclareConflictRetried proves the transport does this;
// this proves the binary wires it (observer, readiness check).
func TestBinaryDeclareConflictVisible(t *testing.T) {
	requireRabbit(t)
	ovs := ovstest.Start(t)
	user, password, vhost := brokerAccount(t)
	host := "declfail-" + randID()
	queue := "q-agent-notifier-tunnel-update." + host

	conn, err := amqp.Dial("amqp://" + user + ":" + password + "@127.0.0.1:5672/" + vhost)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(queue, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	conf := writeConf(t, fmt.Sprintf(`[DEFAULT]
transport_url = rabbit://%s:%s@127.0.0.1:5672/%s
host = %s
[agent]
report_interval = 30
tunnel_types = vxlan
[ovs]
ovsdb_connection = %s
datapath_type = netdev
local_ip = 127.0.0.1
[oslo_messaging_rabbit]
rabbit_quorum_queue = true
[ovsagent]
metrics_listen = %s
`, user, strings.ReplaceAll(password, "$", "$$"), vhost, host, ovs.DB, addr))
	p := startAgent(t, conf)

	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	failures := func() float64 {
		_, body := get("/metrics")
		prefix := `ovsagent_amqp_declare_failures_total{queue="` + queue + `",reason="precondition_failed"} `
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		return 0
	}
	if !waitCond(60*time.Second, func() bool { return failures() >= 2 }) {
		t.Fatalf("ovsagent_amqp_declare_failures_total for %s did not reach 2 (retried): %v", queue, failures())
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, queue) || !strings.Contains(body, "x-queue-type") {
		t.Fatalf("/readyz during the conflict = %d %q, want 503 naming %s and the broker's reason", code, body, queue)
	}
	out := p.output()
	var errLine string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "declare failed") && strings.Contains(line, queue) {
			errLine = line
			break
		}
	}
	if errLine == "" || !strings.Contains(errLine, "ERROR") || !strings.Contains(errLine, "precondition_failed") {
		t.Fatalf("no ERROR line naming %s and precondition_failed; got %q", queue, errLine)
	}
	t.Logf("agent: %s", errLine)

	// The operator removes the old queue: the retry declares the quorum one.
	if _, err := ch.QueueDelete(queue, false, false, false); err != nil {
		t.Fatal(err)
	}
	if !waitCond(60*time.Second, func() bool { _, body := get("/readyz"); return !strings.Contains(body, queue) }) {
		_, body := get("/readyz")
		t.Fatalf("/readyz still names %s after the old queue was deleted: %q", queue, body)
	}
	// Declared again with the agent's arguments: a passive declare sees it, and a
	// quorum redeclare with the same arguments is accepted (a classic one would be a 406).
	if _, err := ch.QueueDeclare(queue, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatalf("the agent's queue is not the quorum queue it should have declared: %v", err)
	}
	if rc := p.stop(t); rc != 0 {
		t.Fatalf("SIGTERM: exit %d", rc)
	}
}
