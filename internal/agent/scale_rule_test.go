//go:build integration

package agent

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/firewall"
	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// TestScaleRealOVSRuleChange: scalePorts() ports in one security group of
// 20 rules (one of them remote-group) on a private Open vSwitch; a rule
// "ingress tcp 22 from 0.0.0.0/0" is added and the change notified (what
// the server's security_group_rule_updated cast does). Measured: from the
// notification to the rule's flows on the switch for every port, and the
// flows per port. Issue 5's goal is < 100 ms for 100 ports.
func TestScaleRealOVSRuleChange(t *testing.T) {
	n := scalePorts()
	o := ovstest.Start(t)
	if err := o.AddBridge("br-phys"); err != nil {
		t.Fatal(err)
	}
	srv := newScaleServer(n)
	rules := []firewall.Rule{
		{ID: "r1", Direction: firewall.Ingress, EtherType: firewall.IPv4, RemoteGroupID: "default"},
		{ID: "r3", Direction: firewall.Egress, EtherType: firewall.IPv4},
		{ID: "r4", Direction: firewall.Egress, EtherType: firewall.IPv6},
	}
	for i := len(rules); i < 20; i++ {
		port := 8000 + i
		rules = append(rules, firewall.Rule{ID: fmt.Sprintf("r%d", i+1), Direction: firewall.Ingress, EtherType: firewall.IPv4,
			Protocol: "tcp", PortRangeMin: &port, PortRangeMax: &port, RemoteIPPrefix: mustPrefix("10.99.0.0/16")})
	}
	srv.mu.Lock()
	srv.groups["default"] = firewall.SecurityGroup{ID: "default", Rules: rules}
	srv.mu.Unlock()
	h, of := runScaleRealAgent(t, o, srv)
	wireScaleReal(t, o, h, srv, n)
	before := len(of.Installed("br-int"))

	ssh := 22
	srv.mu.Lock()
	g := srv.groups["default"]
	g.Rules = append(append([]firewall.Rule(nil), g.Rules...), firewall.Rule{ID: "ssh", Direction: firewall.Ingress,
		EtherType: firewall.IPv4, Protocol: "tcp", PortRangeMin: &ssh, PortRangeMax: &ssh, RemoteIPPrefix: mustPrefix("0.0.0.0/0")})
	srv.groups["default"] = g
	srv.mu.Unlock()
	sshFlows := func() int {
		out, err := o.Ofctl("dump-flows", "br-int", "table=82")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(out, "tp_dst=22")
	}
	select {
	case <-h.batches: // a signal from before the change must not count
	default:
	}
	start := time.Now()
	h.a.Notify(SecurityGroupChanged{GroupIDs: []string{"default"}})
	// The batch that applies the change ends once ovs-vswitchd committed
	// its bundle; the dump after each batch checks that it was that one.
	var took time.Duration
	deadline := time.After(60 * time.Second)
	for took == 0 {
		select {
		case <-h.batches:
			at := time.Since(start)
			if sshFlows() >= n {
				took = at
			}
		case <-deadline:
			t.Fatalf("the new rule's flows reached %d of %d ports within 60 s", sshFlows(), n)
		}
	}
	t.Logf("%d ports × %d rules (1 remote-group): %d br-int flows (%.0f per port); rule change notified → the batch that put its flows on all %d ports done in %v",
		n, len(rules), before, float64(before)/float64(n), n, took.Round(time.Millisecond))
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
