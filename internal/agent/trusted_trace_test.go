//go:build integration

package agent

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/firewall"
	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

var traceCtOrRecirc = regexp.MustCompile(`(ct|recirc)\([^)]*\)`)

// traceDatapath runs ofproto/trace on br-int and returns the datapath
// actions of every pass (recirculations) joined by " | ".
func traceDatapath(t *testing.T, o *ovstest.OVS, pkt string, ct ...string) (string, string) {
	t.Helper()
	args := []string{"ofproto/trace", "br-int", pkt}
	for _, c := range ct {
		args = append(args, "--ct-next", c)
	}
	out, err := o.Appctl(args...)
	if err != nil {
		t.Fatalf("trace %s: %v\n%s", pkt, err, out)
	}
	var acts []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Datapath actions:") {
			acts = append(acts, strings.TrimSpace(strings.TrimPrefix(l, "Datapath actions:")))
		}
	}
	if len(acts) == 0 {
		t.Fatalf("trace %s: no datapath actions\n%s", pkt, out)
	}
	return strings.Join(acts, " | "), out
}

// delivered reports whether the last pass outputs the packet to odp port.
func delivered(acts string, odp int) bool {
	passes := strings.Split(acts, " | ")
	last := traceCtOrRecirc.ReplaceAllString(passes[len(passes)-1], "")
	for _, tok := range strings.Split(last, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(tok)); err == nil && n == odp {
			return true
		}
	}
	return false
}

func odpPort(t *testing.T, o *ovstest.OVS, name string) int {
	t.Helper()
	out, err := o.Appctl("dpif/show")
	if err != nil {
		t.Fatalf("dpif/show: %v", err)
	}
	re := regexp.MustCompile(`\s` + regexp.QuoteMeta(name) + ` \d+/(\d+)`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s not in dpif/show:\n%s", name, out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func ofPort(t *testing.T, o *ovstest.OVS, name string) string {
	t.Helper()
	out, err := o.Vsctl("get", "Interface", name, "ofport")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// TestTraceNetworkOwnedPortsTrusted traces, through the flows the agent
// installs on a real OVS (pipeline and firewall), traffic between a VM and
// the ports Neutron owns on the same host (a DHCP port, a DVR router
// interface). Those are trusted as the reference trusts them: never
// ingress-filtered, so the VM's new connections to them (DNS over UDP and
// TCP, a unicast DHCP renewal, ping, routed traffic) are delivered, while
// the VM's own egress and ingress rules still apply.
func TestTraceNetworkOwnedPortsTrusted(t *testing.T) {
	o := ovstest.Start(t)
	if err := o.AddBridge("br-phys"); err != nil {
		t.Fatal(err)
	}
	srv := newFakeServer()
	srv.groups["sg1"] = firewall.SecurityGroup{ID: "sg1", Rules: []firewall.Rule{
		{ID: "e4", Direction: firewall.Egress, EtherType: firewall.IPv4},
	}}
	ports := []struct{ iface, id, mac, owner string }{
		{"tnw4vm", "vm1", "fa:16:3e:00:00:01", "compute:nova"},
		{"tnw4dh", "dhcp1", "fa:16:3e:00:00:02", "network:dhcp"},
		{"tnw4rt", "rtr1", "fa:16:3e:00:00:03", "network:router_interface_distributed"},
	}
	for _, p := range ports {
		srv.addPort(p.id, "net-a", "vxlan", 100, p.mac)
		srv.update(p.id, func(d *Device) {
			d.DeviceOwner = p.owner
			if p.id == "vm1" {
				d.SecurityGroups = []string{"sg1"}
			}
		})
	}
	h, _ := runRealAgent(t, o, srv)
	for _, p := range ports {
		if _, err := o.Vsctl("add-port", "br-int", p.iface, "--", "set", "Interface", p.iface, "type=internal",
			"external_ids:iface-id="+p.id, "external_ids:attached-mac="+p.mac); err != nil {
			t.Fatal(err)
		}
	}
	h.waitFor("ports ACTIVE and in sync", func() bool {
		for _, p := range ports {
			if srv.status(p.id) != "ACTIVE" {
				return false
			}
		}
		return h.inSync()
	})
	// Fixed IPs: vm1 10.0.0.2, dhcp1 10.0.0.3, rtr1 10.0.0.4 (fakeServer.addPort).
	vm, dh, rt, tun := ofPort(t, o, "tnw4vm"), ofPort(t, o, "tnw4dh"), ofPort(t, o, "tnw4rt"), ofPort(t, o, "patch-tun")
	vmODP, dhODP, rtODP := odpPort(t, o, "tnw4vm"), odpPort(t, o, "tnw4dh"), odpPort(t, o, "tnw4rt")
	fromVM := func(dst string) string { return "in_port=" + vm + ",dl_src=fa:16:3e:00:00:01,dl_dst=" + dst + "," }
	for _, c := range []struct {
		name, pkt string
		odp       int
		want      bool
	}{
		{"VM -> DHCP udp/53", fromVM("fa:16:3e:00:00:02") + "udp,nw_src=10.0.0.2,nw_dst=10.0.0.3,udp_src=40000,udp_dst=53", dhODP, true},
		{"VM -> DHCP tcp/53", fromVM("fa:16:3e:00:00:02") + "tcp,nw_src=10.0.0.2,nw_dst=10.0.0.3,tp_src=40000,tp_dst=53", dhODP, true},
		{"VM -> DHCP ping", fromVM("fa:16:3e:00:00:02") + "icmp,nw_src=10.0.0.2,nw_dst=10.0.0.3,icmp_type=8", dhODP, true},
		{"VM -> DHCP unicast renewal", fromVM("fa:16:3e:00:00:02") + "udp,nw_src=10.0.0.2,nw_dst=10.0.0.3,udp_src=68,udp_dst=67", dhODP, true},
		{"VM -> DVR router, routed tcp/80", fromVM("fa:16:3e:00:00:03") + "tcp,nw_src=10.0.0.2,nw_dst=198.51.100.7,tp_src=40000,tp_dst=80", rtODP, true},
		{"other host -> DHCP udp/53", "in_port=" + tun + ",dl_vlan=1,dl_src=fa:16:3e:00:00:99,dl_dst=fa:16:3e:00:00:02,udp,nw_src=10.0.0.99,nw_dst=10.0.0.3,udp_src=40000,udp_dst=53", dhODP, true},
		// Trust is the network port's, not the VM's: the VM's rules still apply.
		{"VM spoofing its source -> DHCP", fromVM("fa:16:3e:00:00:02") + "udp,nw_src=10.0.0.9,nw_dst=10.0.0.3,udp_src=40000,udp_dst=53", dhODP, false},
		{"DHCP -> VM tcp/22 (no ingress rule)", "in_port=" + dh + ",dl_src=fa:16:3e:00:00:02,dl_dst=fa:16:3e:00:00:01,tcp,nw_src=10.0.0.3,nw_dst=10.0.0.2,tp_src=40000,tp_dst=22", vmODP, false},
		{"router -> VM tcp/22 (no ingress rule)", "in_port=" + rt + ",dl_src=fa:16:3e:00:00:03,dl_dst=fa:16:3e:00:00:01,tcp,nw_src=198.51.100.7,nw_dst=10.0.0.2,tp_src=40000,tp_dst=22", vmODP, false},
	} {
		acts, out := traceDatapath(t, o, c.pkt, "trk,new", "trk,new", "trk,new")
		if got := delivered(acts, c.odp); got != c.want {
			t.Errorf("%s: delivered=%v, want %v (datapath: %s)\n%s", c.name, got, c.want, acts, out)
		}
	}
}
