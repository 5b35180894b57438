//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestHarnessSmoke proves the harness without the agent: real neutron
// objects, two VMs plugged as os-vif plugs them into a bridge of the test's
// own (standalone, so it switches by itself), OVS sees them with the right
// external_ids, and ping and TCP work between them.
func TestHarnessSmoke(t *testing.T) {
	e := NewEnv(t)
	nw := e.Network(NetworkSpec{Name: "net"})
	if nw.NetworkType != "vxlan" || nw.SegmentationID == 0 || nw.MTU != 1450 {
		t.Errorf("network: type=%s seg=%d mtu=%d, want vxlan tenant network with MTU 1450", nw.NetworkType, nw.SegmentationID, nw.MTU)
	}
	e.Subnet(nw.ID, "10.250.0.0/24")
	const br = "br-e2esmoke"
	e.Bridge(br)
	var vms []*VM
	for _, n := range []string{"a", "b"} {
		p := e.Port(PortSpec{Name: n, NetworkID: nw.ID})
		if p.HostID != "hv1" || p.MACAddress == "" || !strings.HasPrefix(p.IP(), "10.250.0.") {
			t.Fatalf("port: %+v", p)
		}
		vms = append(vms, e.Plug(PlugSpec{Port: p, Bridge: br, MTU: nw.MTU}))
	}
	for _, vm := range vms {
		ids, err := e.OVS.Vsctl(e.Ctx, "get", "Interface", vm.Tap, "external_ids")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`iface-id="` + vm.Port.ID + `"`, `attached-mac="` + vm.MAC + `"`, `iface-status=active`, `vm-uuid="` + vm.Port.DeviceID + `"`} {
			if !strings.Contains(ids, want) {
				t.Errorf("%s external_ids %s lack %s", vm.Tap, ids, want)
			}
		}
		if of, err := e.OVS.InterfaceOfport(e.Ctx, vm.Tap); err != nil || of <= 0 {
			t.Errorf("%s ofport %d err %v", vm.Tap, of, err)
		}
		out, err := vm.Exec(e.Ctx, "ip", "-o", "addr", "show", "dev", "eth0")
		if err != nil || !strings.Contains(out, vm.IP+"/24") {
			t.Errorf("%s eth0: %s %v", vm.NS, out, err)
		}
		if out, _ := vm.Exec(e.Ctx, "ip", "link", "show", "eth0"); !strings.Contains(out, vm.MAC) || !strings.Contains(out, "mtu 1450") {
			t.Errorf("%s eth0: %s", vm.NS, out)
		}
	}
	ports, _ := e.OVS.ListPorts(e.Ctx, br)
	if len(ports) != 2 {
		t.Errorf("ports on %s: %v", br, ports)
	}
	a, b := vms[0], vms[1]
	if d, err := a.PingUntil(e.Ctx, b.IP, 10*time.Second); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("first reply after %s", d)
	}
	st, err := a.Ping(e.Ctx, b.IP, 10)
	if err != nil || st.Sent != 10 || st.Lost() != 0 {
		t.Errorf("ping: %+v %v", st, err)
	}
	srv, err := b.ServeTCPEcho(5001)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	var tcpErr error
	for i := 0; i < 20; i++ { // the listener needs a moment to bind
		if tcpErr = a.TCPEcho(e.Ctx, b.IP, 5001); tcpErr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if tcpErr != nil {
		t.Errorf("tcp: %v", tcpErr)
	}
	pinger, err := a.StartPing(b.IP)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if st := pinger.Stop(); st.Sent < 5 || st.Lost() > 0 {
		t.Errorf("background ping: %+v", st)
	}
}

// TestAgentConfigFiles checks that the harness's configuration for hv1 is
// one the agent accepts.
func TestAgentConfigFiles(t *testing.T) {
	e := NewEnv(t)
	a, err := NewAgent(AgentConfig{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := a.CheckConfig(e.Ctx)
	if err != nil || out != "configuration OK" {
		t.Fatalf("check-config: %q %v", out, err)
	}
}
