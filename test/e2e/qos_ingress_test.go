//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"
)

// TestQoSIngressAndPacketRate: the ingress bandwidth limit and the packet rate limits
// of [agent] extensions = qos with [ovs] qos_meter_bandwidth = true, measured with real
// packets against the real server.
//
// The 2026.2 reference's ingress meters (bandwidth in table 59, packet rate in 58)
// match the local VLAN and the port's MAC (br_int.apply_meter_to_port): they limit
// what reaches br-int tagged, from br-tun or a physical bridge, not what another VM
// of the same host sends (that enters br-int untagged and is switched by NORMAL).
// So the sender here is a host behind br-phys (the e2e "physical switch") on a VLAN
// network, and vm1 carries the policy:
//
//   - bandwidth_limit ingress 10,000 kbps: TCP switch host -> vm1 within ±20 % of
//     10 Mbit/s; unlimited (> 30 Mbit/s) again once the rule is deleted;
//   - packet_rate_limit egress then ingress, 2 kpps: 64-byte UDP datagrams sent at
//     20,000/s, the receiver's rate over 3 s (after 1.5 s: the meter's initial
//     bucket) within ±20 % of 2,000/s; the rate without a rule shown first.
func TestQoSIngressAndPacketRate(t *testing.T) {
	e := NewEnv(t)
	e.StartAgentAlive(AgentConfig{Set: map[string]map[string]string{
		"agent": {"extensions": "qos"},
		"ovs":   {"qos_meter_bandwidth": "true"},
	}}, 60*time.Second)

	pol := e.qosPolicy("qosin")
	bw := e.qosRule(pol, "bandwidth_limit_rules", map[string]any{"max_kbps": 10000, "direction": "ingress"})

	nw := e.ProviderVLANNetwork("qosin", "physnet1", 177)
	e.Subnet(nw.ID, "10.250.27.0/24")
	// the switch host is no member of vm1's groups: its TCP and UDP must be allowed in
	sg := e.SecurityGroup("qosin")
	for _, proto := range []string{"tcp", "udp", "icmp"} {
		e.Rule(RuleSpec{SecurityGroupID: sg.ID, Protocol: proto, RemoteIPPrefix: "0.0.0.0/0"})
	}
	p1 := e.Port(PortSpec{Name: "vm1", NetworkID: nw.ID, SecurityGroups: []string{sg.ID}})
	if err := e.Neutron.Do(e.Ctx, "PUT", "/ports/"+p1.ID, map[string]any{"port": map[string]any{"qos_policy_id": pol}}, nil); err != nil {
		t.Fatal(err)
	}
	vm1 := e.Plug(PlugSpec{Port: p1, MTU: nw.MTU})
	e.WaitStatus(vm1.Port, "ACTIVE", 30*time.Second)
	sw := e.NewPhysSwitch("br-phys")
	swIP := switchIP("10.250.27.0/24", vm1.IP)
	if err := sw.AddHost(e.Ctx, nw.SegmentationID, swIP+"/24"); err != nil {
		t.Fatal(err)
	}
	host := &VM{NS: fmt.Sprintf("e2e-sw%d", nw.SegmentationID), IP: swIP}
	if _, err := vm1.PingUntil(e.Ctx, swIP, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	const n = 10_000_000
	mbit := func(bps float64) string { return fmt.Sprintf("%.1f Mbit/s", bps/1e6) }
	port := 5501
	waitRate := func(what string, ok func(float64) bool) {
		t.Helper()
		var last float64
		for i := 0; i < 3; i++ { // the agent applies a change within a batch or two
			port++
			r, err := sendBytes(e.Ctx, host, vm1, port, n)
			if err != nil {
				t.Fatal(err)
			}
			last = r
			t.Logf("%s: switch host -> vm1 %s", what, mbit(r))
			if ok(r) {
				return
			}
			time.Sleep(2 * time.Second)
		}
		t.Errorf("%s: %s", what, mbit(last))
	}
	within := func(want float64) func(float64) bool {
		return func(r float64) bool { return r >= want*0.8 && r <= want*1.2 }
	}
	waitRate("ingress 10 Mbit/s", within(10e6))
	if err := e.Neutron.Do(e.Ctx, "DELETE", "/qos/policies/"+pol+"/bandwidth_limit_rules/"+bw, nil, nil); err != nil {
		t.Fatal(err)
	}
	waitRate("ingress rule deleted", func(r float64) bool { return r > 30e6 })

	const kpps = 2
	pps := func(what, fromNS, toNS, toIP string, ok func(float64) bool) float64 {
		t.Helper()
		var last float64
		for i := 0; i < 3; i++ {
			port++
			r, err := measurePPS(e.Ctx, fromNS, toNS, toIP, port)
			if err != nil {
				t.Fatal(err)
			}
			last = r.PPS
			t.Logf("%s: %.0f packets/s (%d received)", what, r.PPS, r.Packets)
			if ok(r.PPS) {
				return r.PPS
			}
			time.Sleep(2 * time.Second)
		}
		t.Errorf("%s: %.0f packets/s", what, last)
		return last
	}
	unlimited := func(r float64) bool { return r > 2*kpps*1000 }
	pps("no rule, vm1 -> switch host", vm1.NS, host.NS, host.IP, unlimited)
	pps("no rule, switch host -> vm1", host.NS, vm1.NS, vm1.IP, unlimited)

	egress := e.qosRule(pol, "packet_rate_limit_rules", map[string]any{"max_kpps": kpps, "direction": "egress"})
	pps("packet_rate_limit egress 2 kpps, vm1 -> switch host", vm1.NS, host.NS, host.IP, within(kpps*1000))
	e.qosRule(pol, "packet_rate_limit_rules", map[string]any{"max_kpps": kpps, "direction": "ingress"})
	pps("packet_rate_limit ingress 2 kpps, switch host -> vm1", host.NS, vm1.NS, vm1.IP, within(kpps*1000))
	if err := e.Neutron.Do(e.Ctx, "DELETE", "/qos/policies/"+pol+"/packet_rate_limit_rules/"+egress, nil, nil); err != nil {
		t.Fatal(err)
	}
	pps("egress packet rate rule deleted, vm1 -> switch host", vm1.NS, host.NS, host.IP, unlimited)
}
