package main

import (
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/agent"
	"github.com/ovsagent/ovsagent/internal/config"
	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// [agent] extensions = qos registers the qos feature, which adopts the QoS state a
// reference (or an earlier run) left on the host: its meter flows in 58-59, QoS and
// Queue rows. Without the extension the same state is refused at a start or takeover
// (nothing of ours would rebuild it), as are DVR flows with or without it.
func TestQoSExtensionAdoptsQoSState(t *testing.T) {
	l := agent.BridgeLayout{Integration: "br-int"}
	qosState := agent.HostState{Layout: l, QoSRows: 1, QueueRows: 1, Bridges: []string{"br-int"},
		Flows: map[string][]of.Flow{"br-int": {{Table: 59, Priority: 100}, {Table: 58, Priority: 100}}}}
	dvr := agent.HostState{Layout: l, Bridges: []string{"br-int"},
		Flows: map[string][]of.Flow{"br-int": {{Table: 1, Priority: 1}}}}
	for _, c := range []struct {
		ini     string
		refused bool
	}{
		{"", true},
		{"[agent]\nextensions = qos\n", false},
		{"[agent]\nextensions = qos\n[ovs]\nqos_meter_bandwidth = True\n", false},
	} {
		raw, err := config.ParseBytes([]byte(c.ini))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse(raw)
		if err != nil {
			t.Fatalf("%q: %v", c.ini, err)
		}
		fs, err := buildFeatures(featureDeps{Config: cfg, DryRun: true}, cfg.Agent.Extensions)
		if err != nil {
			t.Fatal(err)
		}
		lines := agent.UnrebuiltState(qosState, fs...)
		refused := len(lines) == 1 && strings.Contains(lines[0], "QoS state (2 rate-limit flows on br-int tables 58-59, 1 QoS and 1 Queue rows") &&
			strings.Contains(lines[0], "the qos extension is not enabled")
		if refused != c.refused || (!c.refused && len(lines) != 0) {
			t.Errorf("%q: QoS state refused = %v: %q", c.ini, refused, lines)
		}
		if lines := agent.UnrebuiltState(dvr, fs...); len(lines) != 1 || !strings.Contains(lines[0], "DVR") {
			t.Errorf("%q: DVR flows: %q", c.ini, lines)
		}
	}
}
