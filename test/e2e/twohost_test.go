//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
)

// Two hypervisors (twohost_helpers.go): each runs its own OVS and ovs-agent
// inside its network namespace, both against the one neutron-server, with
// l2population. Timeouts are generous (2 loaded cores); the real numbers
// are logged.

const (
	twoHostAgentTimeout = 90 * time.Second
	twoHostActive       = 60 * time.Second
	twoHostConverge     = 30 * time.Second
)

// thCrossPing checks that two VMs on different hypervisors reach each other
// (ICMP both ways, TCP) and returns the time to the first reply.
func thCrossPing(t *testing.T, e *Env, a, b *VM) {
	t.Helper()
	d, err := a.PingUntil(e.Ctx, b.IP, twoHostConverge)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first reply %s -> %s after %s", a.NS, b.NS, d.Round(time.Millisecond))
	for _, p := range [][2]*VM{{a, b}, {b, a}} {
		if st, err := p[0].Ping(e.Ctx, p[1].IP, 10); err != nil || st.Lost() != 0 {
			t.Errorf("ping %s -> %s: %d/%d lost (%v)", p[0].NS, p[1].NS, st.Lost(), st.Sent, err)
		}
	}
	srv, err := b.ServeTCPEcho(5003)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	var tcpErr error
	for i := 0; i < 30; i++ {
		if tcpErr = a.TCPEcho(e.Ctx, b.IP, 5003); tcpErr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if tcpErr != nil {
		t.Errorf("tcp across hypervisors: %v", tcpErr)
	}
}

// TestTwoHostVXLAN: a VM on each hypervisor on a VXLAN network; both ACTIVE,
// they ping across; l2pop creates the vxlan-<hex> tunnel ports when the
// first remote port appears and removes them when the last port of the
// network on the other hypervisor is deleted.
func TestTwoHostVXLAN(t *testing.T) {
	e := NewEnv(t)
	th := NewTwoHost(e, twoHostAgentTimeout)
	ha, hb := th.HV[0], th.HV[1]
	toB, toA := tunnelPortName("vxlan", hb.LocalIP), tunnelPortName("vxlan", ha.LocalIP)

	nw := e.Network(NetworkSpec{Name: "vx", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.251.1.0/24")
	t.Logf("network %s vxlan vni %d mtu %d", nw.ID, nw.SegmentationID, nw.MTU)

	vmA := th.VM(ha, nw, "vma")
	t.Logf("%s on %s ACTIVE %s after plugging", vmA.NS, ha.Name, e.WaitStatus(vmA.Port, "ACTIVE", twoHostActive).Round(time.Millisecond))
	for _, h := range th.HV {
		if ports, err := h.TunnelPorts(e.Ctx); err != nil || len(ports) != 0 {
			t.Errorf("%s: tunnel ports %v (%v) before any remote port exists, want none (l2pop)", h.Name, ports, err)
		}
	}

	plugB := time.Now()
	vmB := th.VM(hb, nw, "vmb")
	t.Logf("%s on %s ACTIVE %s after plugging", vmB.NS, hb.Name, e.WaitStatus(vmB.Port, "ACTIVE", twoHostActive).Round(time.Millisecond))
	for _, x := range []struct {
		h    *Hypervisor
		port string
	}{{ha, toB}, {hb, toA}} {
		if _, err := x.h.WaitTunnelPort(e.Ctx, x.port, true, twoHostConverge); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: tunnel port %s present %s after plugging %s", x.h.Name, x.port, time.Since(plugB).Round(time.Millisecond), vmB.NS)
	}
	thCrossPing(t, e, vmA, vmB)

	// the VNI is on br-tun of both
	for _, h := range th.HV {
		flows, err := h.Flows(e.Ctx, "br-tun")
		if err != nil {
			t.Fatal(err)
		}
		vni := "tun_id=" + thHexU(nw.SegmentationID)
		if !strings.Contains(strings.Join(flows, "\n"), vni) {
			t.Errorf("%s br-tun: no flow with %s:\n%s", h.Name, vni, strings.Join(flows, "\n"))
		}
	}

	// a second port on hv-b: the tunnel stays when one of two goes
	vmB2 := th.VM(hb, nw, "vmb2")
	e.WaitStatus(vmB2.Port, "ACTIVE", twoHostActive)
	if d, err := vmA.PingUntil(e.Ctx, vmB2.IP, twoHostConverge); err != nil {
		t.Error(err)
	} else {
		t.Logf("%s -> %s (second port on %s) first reply after %s", vmA.NS, vmB2.NS, hb.Name, d.Round(time.Millisecond))
	}
	thDeletePort(t, e, vmB2)
	time.Sleep(2 * time.Second)
	if ports, _ := ha.TunnelPorts(e.Ctx); !thContains(ports, toB) {
		t.Errorf("%s: %s removed while %s still has a port on the network (%v)", ha.Name, toB, hb.Name, ports)
	}
	if st, err := vmA.Ping(e.Ctx, vmB.IP, 5); err != nil || st.Lost() != 0 {
		t.Errorf("ping after deleting the second port: %+v %v", st, err)
	}

	// the last port on hv-b goes: both ends drop the tunnel
	del := time.Now()
	thDeletePort(t, e, vmB)
	for _, x := range []struct {
		h    *Hypervisor
		port string
	}{{ha, toB}, {hb, toA}} {
		if _, err := x.h.WaitTunnelPort(e.Ctx, x.port, false, twoHostConverge); err != nil {
			t.Error(err)
			continue
		}
		t.Logf("%s: tunnel port %s removed %s after deleting the last remote port", x.h.Name, x.port, time.Since(del).Round(time.Millisecond))
	}
	if st, _ := e.Neutron.GetPort(e.Ctx, vmA.Port.ID); st == nil || st.Status != "ACTIVE" {
		t.Errorf("%s not ACTIVE after the remote port went: %+v", vmA.NS, st)
	}
}

// TestTwoHostGREGeneve: the same across GRE and Geneve networks.
func TestTwoHostGREGeneve(t *testing.T) {
	e := NewEnv(t)
	th := NewTwoHost(e, twoHostAgentTimeout)
	ha, hb := th.HV[0], th.HV[1]
	for i, typ := range []string{"gre", "geneve"} {
		t.Run(typ, func(t *testing.T) {
			e := *e
			e.T = t
			nw := e.Network(NetworkSpec{Name: typ, NetworkType: typ})
			e.Subnet(nw.ID, []string{"10.251.2.0/24", "10.251.3.0/24"}[i])
			if nw.NetworkType != typ {
				t.Fatalf("network type %q, want %q", nw.NetworkType, typ)
			}
			t.Logf("network %s %s id %d mtu %d", nw.ID, typ, nw.SegmentationID, nw.MTU)
			th := &TwoHost{e: &e, HV: th.HV}
			var vms []*VM
			for _, x := range []struct {
				h    *Hypervisor
				name string
			}{{ha, "vma"}, {hb, "vmb"}} {
				vm := th.VM(x.h, nw, x.name)
				t.Logf("%s on %s ACTIVE %s after plugging", vm.NS, x.h.Name, e.WaitStatus(vm.Port, "ACTIVE", twoHostActive).Round(time.Millisecond))
				vms = append(vms, vm)
			}
			vmA, vmB := vms[0], vms[1]
			for _, h := range th.HV {
				name := tunnelPortName(typ, th.Peer(h).LocalIP)
				d, err := h.WaitTunnelPort(e.Ctx, name, true, twoHostConverge)
				if err != nil {
					t.Fatal(err)
				}
				typGot, _ := h.OVS.Vsctl(e.Ctx, "get", "Interface", name, "type")
				if typGot != typ {
					t.Errorf("%s: %s type %q", h.Name, name, typGot)
				}
				t.Logf("%s: %s present (+%s)", h.Name, name, d.Round(time.Millisecond))
			}
			thCrossPing(t, &e, vmA, vmB)
			// unplugging both: the tunnels go with the last ports
			thDeletePort(t, &e, vmB)
			thDeletePort(t, &e, vmA)
			for _, h := range th.HV {
				name := tunnelPortName(typ, th.Peer(h).LocalIP)
				if _, err := h.WaitTunnelPort(e.Ctx, name, false, twoHostConverge); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// thDeletePort unplugs the VM (as nova does) and deletes its port.
func thDeletePort(t *testing.T, e *Env, vm *VM) {
	t.Helper()
	if err := vm.Unplug(e.Ctx); err != nil {
		t.Error(err)
	}
	if err := e.Neutron.DeletePort(e.Ctx, vm.Port.ID); err != nil && !IsNotFound(err) {
		t.Error(err)
	}
}

func thHexU(n int) string {
	const digits = "0123456789abcdef"
	if n == 0 {
		return "0x0"
	}
	var b []byte
	for ; n > 0; n /= 16 {
		b = append([]byte{digits[n%16]}, b...)
	}
	return "0x" + string(b)
}

// TestTwoHostRestart: with ping -i 0.1 between VMs on the two hypervisors,
// kill -9 one agent and start it again: no ping lost, no port DOWN in the
// API, no stale flow once it is in sync. Then kill -9 ovs-vswitchd on one
// hypervisor and start it again: traffic back within 2 s, flows restored.
func TestTwoHostRestart(t *testing.T) {
	e := NewEnv(t)
	th := NewTwoHost(e, twoHostAgentTimeout)
	ha, hb := th.HV[0], th.HV[1]
	nw := e.Network(NetworkSpec{Name: "vx", NetworkType: "vxlan"})
	e.Subnet(nw.ID, "10.251.4.0/24")
	vmA, vmB := th.VM(ha, nw, "vma"), th.VM(hb, nw, "vmb")
	for _, vm := range []*VM{vmA, vmB} {
		t.Logf("%s ACTIVE %s after plugging", vm.NS, e.WaitStatus(vm.Port, "ACTIVE", twoHostActive).Round(time.Millisecond))
	}
	if _, err := vmA.PingUntil(e.Ctx, vmB.IP, twoHostConverge); err != nil {
		t.Fatal(err)
	}
	for _, h := range th.HV {
		if d, err := h.WaitHealthy(e.Ctx, twoHostConverge); err != nil {
			t.Fatal(err)
		} else {
			t.Logf("%s in sync (+%s)", h.Name, d.Round(time.Millisecond))
		}
	}
	bridges := []string{"br-int", "br-tun"}
	snapshot := func(h *Hypervisor) map[string]FlowDump {
		m := map[string]FlowDump{}
		for _, br := range bridges {
			f, err := h.Flows(e.Ctx, br)
			if err != nil {
				t.Fatal(err)
			}
			m[br] = f
		}
		return m
	}

	t.Run("agent-kill", func(t *testing.T) {
		before := snapshot(ha)
		ai, err := e.Neutron.OVSAgent(e.Ctx, ha.Name)
		if err != nil || ai == nil {
			t.Fatalf("agent row of %s: %v", ha.Name, err)
		}
		watch := e.WatchStatus(vmA.Port, vmB.Port)
		pinger, err := vmA.StartPing(vmB.IP)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := ha.Agent.Kill(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		if err := ha.Agent.Start(); err != nil {
			t.Fatal(err)
		}
		if d, err := e.WaitNewStart(ha.Name, ai.StartedAt, twoHostAgentTimeout); err != nil {
			t.Error(err)
		} else {
			t.Logf("%s: agent alive again (new started_at) %s after kill -9", ha.Name, d.Round(time.Millisecond))
		}
		if _, err := ha.WaitHealthy(e.Ctx, twoHostConverge*2); err != nil {
			t.Error(err)
		} else {
			t.Logf("%s: in sync (/healthz) %s after kill -9", ha.Name, time.Since(killed).Round(time.Millisecond))
		}
		// stale flows: after the sync every (non-learned) flow carries this run's cookie
		var after map[string]FlowDump
		deadline := time.Now().Add(twoHostConverge)
		for {
			after = snapshot(ha)
			if len(after["br-int"].Cookies()) == 1 && len(after["br-tun"].Cookies()) == 1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		for _, br := range bridges {
			if c := after[br].Cookies(); len(c) != 1 {
				t.Errorf("%s %s: flows of %d cookies after the restart is in sync, want 1: %v", ha.Name, br, len(c), c)
			}
			onlyBefore, onlyAfter := ovsdump.Diff(before[br].Normalized(), after[br].Normalized())
			if len(onlyBefore)+len(onlyAfter) > 0 {
				t.Errorf("%s %s: flows differ across the restart:\nonly before:\n  %s\nonly after:\n  %s", ha.Name, br,
					strings.Join(onlyBefore, "\n  "), strings.Join(onlyAfter, "\n  "))
			}
		}
		time.Sleep(2 * time.Second)
		st := pinger.Stop()
		polls, _, flaps := watch.Stop()
		t.Logf("ping across the agent kill -9 + restart: %d sent, %d lost; %d API polls of both ports, %d not ACTIVE", st.Sent, st.Lost(), polls, len(flaps))
		if st.Sent < 20 || st.Lost() != 0 {
			t.Errorf("pings lost across the agent restart: %d of %d", st.Lost(), st.Sent)
		}
		if len(flaps) > 0 {
			t.Errorf("ports left ACTIVE during the agent restart: %v", flaps)
		}
	})

	t.Run("vswitchd-kill", func(t *testing.T) {
		before := snapshot(hb)
		pinger, err := vmA.StartTimedPing(vmB.IP)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := hb.KillVswitchd(); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		if err := hb.StartVswitchd(e.Ctx); err != nil {
			t.Fatal(err)
		}
		restarted := time.Now()
		t.Logf("%s: ovs-vswitchd killed -9 and started again in %s", hb.Name, restarted.Sub(killed).Round(time.Millisecond))
		var back time.Time
		for deadline := time.Now().Add(twoHostConverge); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if back = pinger.FirstReplyAfter(restarted); !back.IsZero() {
				break
			}
		}
		if back.IsZero() {
			t.Errorf("no ping reply within %s after ovs-vswitchd restarted on %s", twoHostConverge, hb.Name)
		} else {
			fromStart, fromKill := back.Sub(restarted), back.Sub(killed)
			t.Logf("traffic back %s after ovs-vswitchd started again (%s after kill -9)", fromStart.Round(time.Millisecond), fromKill.Round(time.Millisecond))
			if fromStart > 2*time.Second {
				t.Errorf("traffic back %s after ovs-vswitchd restart, want <= 2s", fromStart.Round(time.Millisecond))
			}
		}
		// flows restored as they were (same run, same cookies)
		var after map[string]FlowDump
		var diff string
		for deadline := time.Now().Add(twoHostConverge); ; time.Sleep(200 * time.Millisecond) {
			after = snapshot(hb)
			diff = ""
			for _, br := range bridges {
				ob, oa := ovsdump.Diff(before[br].Normalized(), after[br].Normalized())
				if len(ob)+len(oa) > 0 {
					diff += "\n" + br + " only before:\n  " + strings.Join(ob, "\n  ") + "\n" + br + " only after:\n  " + strings.Join(oa, "\n  ")
				}
			}
			if diff == "" || time.Now().After(deadline) {
				break
			}
		}
		if diff != "" {
			t.Errorf("%s: flows not restored after ovs-vswitchd restart:%s", hb.Name, diff)
		} else {
			t.Logf("%s: flows of br-int/br-tun restored %s after ovs-vswitchd started again", hb.Name, time.Since(restarted).Round(time.Millisecond))
		}
		time.Sleep(time.Second)
		st := pinger.Stop()
		t.Logf("ping across the vswitchd kill: %d sent, %d lost, longest gap between replies %s", st.Sent, st.Lost(), st.MaxGap.Round(time.Millisecond))
		if s, err := vmB.Ping(e.Ctx, vmA.IP, 10); err != nil || s.Lost() != 0 {
			t.Errorf("ping %s -> %s after the vswitchd restart: %+v %v", vmB.NS, vmA.NS, s, err)
		}
		for _, vm := range []*VM{vmA, vmB} {
			if p, _ := e.Neutron.GetPort(e.Ctx, vm.Port.ID); p == nil || p.Status != "ACTIVE" {
				t.Errorf("%s not ACTIVE after the vswitchd restart", vm.NS)
			}
		}
	})
}

// TestTwoHostMixedTypes: a VXLAN and a GRE network between the same two
// hypervisors at the same time (neutron names the ports vxlan-<hex> and
// gre-<hex>: one tunnel port per remote IP and type); both pairs ping.
func TestTwoHostMixedTypes(t *testing.T) {
	e := NewEnv(t)
	th := NewTwoHost(e, twoHostAgentTimeout)
	ha, hb := th.HV[0], th.HV[1]
	var pairs [][2]*VM
	for i, typ := range []string{"vxlan", "gre"} {
		nw := e.Network(NetworkSpec{Name: typ, NetworkType: typ})
		e.Subnet(nw.ID, []string{"10.251.5.0/24", "10.251.6.0/24"}[i])
		a, b := th.VM(ha, nw, typ+"a"), th.VM(hb, nw, typ+"b")
		for _, vm := range []*VM{a, b} {
			t.Logf("%s (%s) ACTIVE %s after plugging", vm.NS, typ, e.WaitStatus(vm.Port, "ACTIVE", twoHostActive).Round(time.Millisecond))
		}
		pairs = append(pairs, [2]*VM{a, b})
	}
	for _, h := range th.HV {
		for _, typ := range []string{"vxlan", "gre"} {
			name := tunnelPortName(typ, th.Peer(h).LocalIP)
			if _, err := h.WaitTunnelPort(e.Ctx, name, true, twoHostConverge); err != nil {
				t.Error(err)
			}
		}
	}
	for _, p := range pairs {
		if d, err := p[0].PingUntil(e.Ctx, p[1].IP, twoHostConverge); err != nil {
			t.Error(err)
		} else {
			t.Logf("%s -> %s first reply after %s", p[0].NS, p[1].NS, d.Round(time.Millisecond))
		}
	}
	time.Sleep(2 * time.Second) // a flip between the two types would show now
	for _, p := range pairs {
		if st, err := p[0].Ping(e.Ctx, p[1].IP, 10); err != nil || st.Lost() != 0 {
			t.Errorf("ping %s -> %s: %d/%d lost (%v)", p[0].NS, p[1].NS, st.Lost(), st.Sent, err)
		}
	}
}
