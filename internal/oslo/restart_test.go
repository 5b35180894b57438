//go:build integration

package oslo

import (
	"os"
	"testing"
	"time"
)

// TestBrokerRestart restarts the RabbitMQ application (every non-durable queue is lost).
// It disturbs every client of the broker for a few seconds; set
// OVSAGENT_TEST_NO_BROKER_RESTART=1 when other suites share the broker concurrently.
func TestBrokerRestart(t *testing.T) {
	if os.Getenv("OVSAGENT_TEST_NO_BROKER_RESTART") != "" {
		t.Skip("OVSAGENT_TEST_NO_BROKER_RESTART set")
	}
	node := rmqNode(t)
	f := newReconnectFixture(t)
	restarted := false
	defer func() {
		if !restarted {
			rabbitmqctl(t, node, "start_app")
		}
	}()
	rabbitmqctl(t, node, "stop_app")
	waitFor(t, "transports to notice the broker is gone", 30*time.Second, func() bool {
		return !f.srv.Connected() && !f.cli.Connected()
	})
	rabbitmqctl(t, node, "start_app")
	restarted = true
	f.check(t)
}
