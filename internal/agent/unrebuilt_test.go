package agent

import (
	"strings"
	"testing"

	of "github.com/ovsagent/ovsagent/internal/openflow"
)

func TestUnrebuiltState(t *testing.T) {
	l := BridgeLayout{Integration: "br-int", Tunnel: "br-tun", Physical: map[string]PhysBridge{"physnet1": {Bridge: "br-phys"}}}
	// ovs-agent's own pipeline and firewall defaults (and those of the Zed
	// and 2026.2 reference agents: 58 and 59 at priority 0): nothing to refuse.
	own := map[string][]of.Flow{
		"br-int": {{Table: 0, Priority: 65535}, {Table: 58, Priority: 0}, {Table: 59, Priority: 0}, {Table: 60, Priority: 1},
			{Table: 60, Priority: 3}, {Table: 91, Priority: 1}, {Table: 93, Priority: 0}},
		"br-tun":  {{Table: 0, Priority: 1}, {Table: 2, Priority: 0}, {Table: 4, Priority: 1}, {Table: 10, Priority: 1}},
		"br-phys": {{Table: 0, Priority: 4}},
	}
	if got := UnrebuiltState(HostState{Layout: l, Flows: own, Bridges: []string{"br-int", "br-tun", "br-phys"}}); len(got) != 0 {
		t.Fatalf("own state refused: %q", got)
	}
	cases := []struct {
		name string
		h    HostState
		want string
	}{
		{"dvr br-int", HostState{Flows: map[string][]of.Flow{"br-int": {{Table: 1, Priority: 1}}}}, "DVR flows (1 on br-int"},
		{"dvr br-tun", HostState{Flows: map[string][]of.Flow{"br-tun": {{Table: 9, Priority: 1}}}}, "DVR flows (1 on br-tun"},
		{"dvr phys", HostState{Flows: map[string][]of.Flow{"br-phys": {{Table: 2, Priority: 4}}}}, "DVR flows (1 on br-phys"},
		{"qos meter flows", HostState{Flows: map[string][]of.Flow{"br-int": {{Table: 58, Priority: 100}}}}, "QoS state (1 rate-limit"},
		{"packet rate", HostState{Flows: map[string][]of.Flow{"br-int": {{Table: 59, Priority: 100}}}}, "QoS state (1 rate-limit"},
		{"qos rows", HostState{QoSRows: 1, QueueRows: 2}, "1 QoS and 2 Queue rows"},
		{"trunk", HostState{Bridges: []string{"br-int", "tbr-1234abcd-5"}}, "trunk bridges (tbr-1234abcd-5)"},
		{"log", HostState{Flows: map[string][]of.Flow{"br-int": {{Table: 93, Priority: 77, Actions: []of.Action{of.Controller{MaxLen: 65535}}}}}}, "security group log flows (1 packet-in"},
	}
	for _, c := range cases {
		c.h.Layout = l
		got := UnrebuiltState(c.h)
		why := "not supported by ovs-agent yet"
		switch c.name {
		case "dvr br-int", "dvr br-tun", "dvr phys":
			why = "enable_distributed_routing is off"
		case "qos meter flows", "packet rate", "qos rows":
			why = "the qos extension is not enabled"
		case "trunk":
			why = "trunk_enabled = False"
		}
		if len(got) != 1 || !strings.Contains(got[0], c.want) || !strings.Contains(got[0], why) {
			t.Errorf("%s: %q, want one reason with %q and %q", c.name, got, c.want, why)
		}
	}
}
