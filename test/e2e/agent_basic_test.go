//go:build e2e

package e2e

import (
	"testing"
	"time"
)

// TestAgentBasicWiring: ovs-agent as hv1 with refenv's configuration turns
// two VMs on a VXLAN network ACTIVE, they reach each other (ICMP and TCP
// through the openvswitch firewall, default security group), and a SIGTERM
// stops the agent with exit 0 while the dataplane keeps forwarding.
func TestAgentBasicWiring(t *testing.T) {
	e := NewEnv(t)
	agent, took := e.StartAgentAlive(AgentConfig{}, 60*time.Second)
	t.Logf("agent alive (new started_at) %s after start", took)

	nw := e.Network(NetworkSpec{Name: "vx", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.250.2.0/24")
	vm1, vm2 := e.VM(nw, "vm1"), e.VM(nw, "vm2")
	for _, vm := range []*VM{vm1, vm2} {
		t.Logf("%s ACTIVE %s after plugging", vm.NS, e.WaitStatus(vm.Port, "ACTIVE", 30*time.Second))
		if tag, err := e.OVS.PortTag(e.Ctx, vm.Tap); err != nil || tag < 1 || tag > 4094 {
			t.Errorf("%s: local VLAN tag %d (%v)", vm.Tap, tag, err)
		}
	}
	// The OVO versions: once the ports were pulled the server has stored the map this
	// release's reference agent reports, and the agent consumes those push topics.
	e.CheckReportedVersions(15 * time.Second)
	// A port update reaches the agent as a push (at the agreed version): admin down puts
	// vm2 on the dead VLAN, admin up brings it back.
	for _, up := range []bool{false, true} {
		if _, err := e.Neutron.UpdatePort(e.Ctx, vm2.Port.ID, map[string]any{"admin_state_up": up}); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		for {
			tag, err := e.OVS.PortTag(e.Ctx, vm2.Tap)
			if err == nil && (tag == 4095) == !up {
				t.Logf("admin_state_up=%v pushed and applied (tag %d) %s after the update", up, tag, time.Since(t0).Round(time.Millisecond))
				break
			}
			if time.Since(t0) > 15*time.Second {
				t.Fatalf("admin_state_up=%v not applied after 15 s: tag %d (%v)", up, tag, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	e.WaitStatus(vm2.Port, "ACTIVE", 30*time.Second)
	if d, err := vm1.PingUntil(e.Ctx, vm2.IP, 10*time.Second); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("first ping reply %s after both ACTIVE", d)
	}
	if st, err := vm1.Ping(e.Ctx, vm2.IP, 10); err != nil || st.Lost() != 0 {
		t.Errorf("ping vm1 -> vm2: %+v %v", st, err)
	}
	srv, err := vm2.ServeTCPEcho(5002)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	var tcpErr error
	for i := 0; i < 20; i++ { // socat needs a moment to bind
		if tcpErr = vm1.TCPEcho(e.Ctx, vm2.IP, 5002); tcpErr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if tcpErr != nil {
		t.Errorf("tcp vm1 -> vm2 (default SG allows the group): %v", tcpErr)
	}
	// the metric follows the server's reply; give it a moment
	var wired float64
	for i := 0; i < 50; i++ {
		if wired, err = agent.Metric(e.Ctx, "ovsagent_ports_wired"); err == nil && wired == 2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if wired != 2 {
		t.Errorf("ovsagent_ports_wired = %v (%v), want 2", wired, err)
	}

	// SIGTERM: exit 0, flows left in place
	pinger, err := vm1.StartPing(vm2.IP)
	if err != nil {
		t.Fatal(err)
	}
	stopTook, killed, err := agent.Stop(20 * time.Second)
	if err != nil || killed || agent.ExitErr() != nil {
		t.Errorf("SIGTERM: took %s killed=%v err=%v exit=%v", stopTook, killed, err, agent.ExitErr())
	}
	t.Logf("agent exited %s after SIGTERM", stopTook)
	time.Sleep(2 * time.Second)
	if st := pinger.Stop(); st.Sent < 10 || st.Lost() > 0 {
		t.Errorf("ping across the agent's stop: %+v", st)
	}
	if st, err := vm2.Ping(e.Ctx, vm1.IP, 5); err != nil || st.Lost() != 0 {
		t.Errorf("ping with the agent stopped: %+v %v", st, err)
	}
}
