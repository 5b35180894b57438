//go:build integration

package oslo

import (
	"context"
	"strings"
	"testing"
	"time"
)

// [oslo_messaging_rabbit] rabbit_retry_interval, rabbit_retry_backoff and
// rabbit_interval_max shape the reconnect delays as kombu's ensure() does:
// interval, then +backoff per failed attempt, capped at the maximum.
func TestRetryDelaysFollowOptions(t *testing.T) {
	tr := &Transport{cfg: Config{RetryInterval: time.Second, RetryBackoff: 2 * time.Second, RetryMax: 6 * time.Second}.withDefaults()}
	want := []time.Duration{time.Second, 3 * time.Second, 5 * time.Second, 6 * time.Second, 6 * time.Second}
	for attempt, w := range want {
		if got := tr.retryDelay(attempt); got != w {
			t.Errorf("attempt %d: delay %s, want %s", attempt, got, w)
		}
	}
}

// heartbeat_timeout_threshold is the heartbeat the connection negotiates
// with the broker (rabbitmqctl list_connections shows it as timeout).
func TestHeartbeatNegotiated(t *testing.T) {
	node := rmqNode(t)
	tr := newTransport(t, uniq("ovsagent-test"), "hb", func(c *Config) { c.HeartbeatTimeout = 7 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tr.session(ctx); err != nil {
		t.Fatal(err)
	}
	out := rabbitmqctl(t, node, "list_connections", "-q", "timeout", "client_properties")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, ":"+tr.id+`"`) {
			if timeout, _, _ := strings.Cut(line, "\t"); timeout != "7" {
				t.Fatalf("negotiated heartbeat %q, want 7: %s", timeout, line)
			}
			return
		}
	}
	t.Fatalf("our connection (%s) not in:\n%s", tr.id, out)
}

// enable_cancel_on_failover asks the broker, on every consumer but a
// stream's, to cancel it on an HA failover (x-cancel-on-ha-failover), as
// oslo's Consumer.declare does.
func TestConsumerArgsCancelOnFailover(t *testing.T) {
	on := &Transport{cfg: Config{Queues: Queues{CancelOnFailover: true}}}
	off := &Transport{}
	if a := on.consumerArgs(queueSpec{name: "q"}, nil); a["x-cancel-on-ha-failover"] != true {
		t.Errorf("with the option: %v", a)
	}
	if a := off.consumerArgs(queueSpec{name: "q"}, nil); a != nil {
		t.Errorf("without the option: %v", a)
	}
	if a := on.consumerArgs(queueSpec{name: "s", stream: true}, "first"); a["x-stream-offset"] != "first" || a["x-cancel-on-ha-failover"] != nil {
		t.Errorf("stream consumer: %v", a)
	}
}
