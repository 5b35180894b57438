//go:build e2e

package e2e

// Trunk ports (vlan-aware VMs) with real packets, on two hypervisors (twohost: each its
// own OVS and ovs-agent in a namespace, so the shared br-int is not involved): the trunk
// VM on the first, a VM on each network spread over both. The server must run the trunk service
// plugin: refenv's servers do (service_plugins = qos,trunk); refenv/trunkserver.sh starts a
// private Zed server with it on 127.0.0.1:9698 (own database and vhost) for runs beside them.

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/trunk"
)

type e2eTrunk struct {
	ID       string `json:"id"`
	PortID   string `json:"port_id"`
	Status   string `json:"status"`
	SubPorts []struct {
		PortID         string `json:"port_id"`
		SegmentationID int    `json:"segmentation_id"`
	} `json:"sub_ports"`
}

// unboundPort creates a port with no host, owner or device: what a trunk's parent is
// before nova boots the VM (a bound parent cannot be trunked), and what a subport is.
func (e *Env) unboundPort(nw *Network, name string) *Port {
	e.T.Helper()
	var out struct{ Port Port }
	body := map[string]any{"port": map[string]any{"name": e.name(name), "project_id": e.Neutron.Project, "network_id": nw.ID}}
	if err := e.Neutron.Do(e.Ctx, "POST", "/ports", body, &out); err != nil {
		e.T.Fatalf("create port: %v", err)
	}
	p := &out.Port
	e.T.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		if err := e.Neutron.DeletePort(ctx, p.ID); err != nil && !IsNotFound(err) {
			e.T.Errorf("cleanup: %v", err)
		}
	})
	return p
}

func (e *Env) getTrunk(id string) (*e2eTrunk, error) {
	var out struct{ Trunk e2eTrunk }
	err := e.Neutron.Do(e.Ctx, "GET", "/trunks/"+id, nil, &out)
	return &out.Trunk, err
}

func (e *Env) waitTrunkStatus(id, want string, timeout time.Duration) time.Duration {
	e.T.Helper()
	start := time.Now()
	last := ""
	for time.Since(start) < timeout {
		if tr, err := e.getTrunk(id); err == nil {
			last = tr.Status
			if last == want {
				return time.Since(start)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.T.Fatalf("trunk %s: status %q after %s, want %s", id, last, timeout, want)
	return 0
}

// trunkGuest is a VLAN-aware VM on hypervisor h: the kernel here has no 802.1Q
// devices, so the guest's VLAN driver is a small OVS bridge of the hypervisor (gst-…):
// its uplink is the VM's interface on the trunk bridge (a patch port named and
// labelled as os-vif names and labels a tap: iface-id, attached-mac, iface-status,
// vm-uuid), and each of the guest's interfaces (a veth into the VM's namespace, with its
// port's MAC and IP) is an access port of the guest bridge: VLAN 0 (untagged) for the
// parent, the subport's VLAN otherwise. Frames on the trunk bridge are tagged as a
// guest's would be.
type trunkGuest struct {
	t      *testing.T
	e      *Env
	h      *Hypervisor
	vm     *VM
	br     string // the guest bridge
	uplink string // its patch port to the trunk bridge
}

func newTrunkGuest(t *testing.T, e *Env, h *Hypervisor, tbr string, parent *Port, mtu int) *trunkGuest {
	t.Helper()
	short := parent.ID[:8]
	g := &trunkGuest{t: t, e: e, h: h, br: "gst-" + short, uplink: "gup-" + short,
		vm: &VM{NS: "vm-" + short, Port: parent, Tap: "tap" + parent.ID[:11], MAC: parent.MACAddress, IP: parent.IP(), HostNS: h.NS, OVS: h.OVS, Bridge: tbr}}
	t.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		_, _ = h.OVS.Vsctl(ctx, "--if-exists", "del-br", g.br)
		_, _ = h.OVS.Vsctl(ctx, "--if-exists", "del-port", tbr, g.vm.Tap)
		_, _ = sh(ctx, "ip", "netns", "del", g.vm.NS)
	})
	if _, err := sh(e.Ctx, "ip", "netns", "add", g.vm.NS); err != nil {
		t.Fatal(err)
	}
	_, _ = g.vm.Exec(e.Ctx, "ip", "link", "set", "lo", "up")
	// os-vif: the trunk bridge, then the VM's interface on it.
	for _, args := range [][]string{
		{"--may-exist", "add-br", tbr, "--", "set", "Bridge", tbr, "datapath_type=netdev"},
		{"add-br", g.br, "--", "set", "Bridge", g.br, "datapath_type=netdev"},
		{"add-port", g.br, g.uplink, "--", "set", "Interface", g.uplink, "type=patch", "options:peer=" + g.vm.Tap},
		{"add-port", tbr, g.vm.Tap, "--", "set", "Interface", g.vm.Tap, "type=patch", "options:peer=" + g.uplink,
			"external_ids:iface-id=" + parent.ID, "external_ids:attached-mac=" + parent.MACAddress,
			"external_ids:iface-status=active", "external_ids:vm-uuid=" + parent.DeviceID},
	} {
		if _, err := h.OVS.Vsctl(e.Ctx, args...); err != nil {
			t.Fatal(err)
		}
	}
	g.iface(0, parent, mtu)
	return g
}

// iface adds the guest interface of VLAN vlan (0: untagged) with p's MAC and IP.
func (g *trunkGuest) iface(vlan int, p *Port, mtu int) {
	g.t.Helper()
	ctx := g.e.Ctx
	v := strconv.Itoa(vlan)
	host, guest := "gh"+v+"-"+p.ID[:6], "eth"+v
	m := strconv.Itoa(mtu)
	steps := [][]string{
		{"ip", "-n", g.h.NS, "link", "add", host, "mtu", m, "type", "veth", "peer", "name", guest, "mtu", m, "netns", g.vm.NS},
		{"ip", "-n", g.h.NS, "link", "set", host, "up"},
		{"ip", "netns", "exec", g.h.NS, "ethtool", "-K", host, "tx", "off"},
		{"ip", "netns", "exec", g.vm.NS, "ip", "link", "set", guest, "address", p.MACAddress},
		{"ip", "netns", "exec", g.vm.NS, "ip", "addr", "add", p.IP() + "/24", "dev", guest},
		{"ip", "netns", "exec", g.vm.NS, "ip", "link", "set", guest, "up"},
		{"ip", "netns", "exec", g.vm.NS, "ethtool", "-K", guest, "tx", "off"},
		{"ip", "netns", "exec", g.vm.NS, "sysctl", "-qw", "net.ipv6.conf." + guest + ".disable_ipv6=1"},
	}
	for _, st := range steps {
		if out, err := sh(ctx, st[0], st[1:]...); err != nil {
			g.t.Fatalf("%v: %v %s", st, err, out)
		}
	}
	if _, err := g.h.OVS.Vsctl(ctx, "add-port", g.br, host, "--", "set", "Port", host, "tag="+v, "vlan_mode=access"); err != nil {
		g.t.Fatal(err)
	}
}

// unplug is what os-vif and nova do when the VM goes: its interface leaves the trunk
// bridge and the trunk bridge is deleted.
func (g *trunkGuest) unplug() {
	g.t.Helper()
	if _, err := g.h.OVS.Vsctl(g.e.Ctx, "--if-exists", "del-port", g.vm.Bridge, g.vm.Tap, "--", "--if-exists", "del-br", g.vm.Bridge); err != nil {
		g.t.Fatal(err)
	}
}

func pingFrom(t *testing.T, ctx context.Context, vm *VM, ip string, timeout time.Duration) time.Duration {
	t.Helper()
	d, err := vm.PingUntil(ctx, ip, timeout)
	if err != nil {
		t.Fatalf("%s -> %s: %v", vm.NS, ip, err)
	}
	return d
}

func noFlowMentions(t *testing.T, ctx context.Context, hvs []*Hypervisor, what string, needles ...string) {
	t.Helper()
	for _, h := range hvs {
		for _, br := range []string{"br-int", "br-tun"} {
			flows, err := h.OVS.DumpFlows(ctx, br)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range flows {
				if br == "br-tun" && strings.Contains(f, "table=20") && strings.Contains(f, "hard_timeout=") {
					// Learned by br-tun's table 10 from traffic (the reference's too):
					// no agent owns it, it ages out.
					continue
				}
				for _, n := range needles {
					if n != "" && strings.Contains(f, n) {
						t.Errorf("%s: a flow on %s of %s still mentions %s: %s", what, br, h.Name, n, f)
					}
				}
			}
		}
	}
}

func TestTrunk(t *testing.T) {
	e := NewEnv(t)
	th := NewTwoHost(e, 90*time.Second)
	ha, hb := th.HV[0], th.HV[1]
	hvs := []*Hypervisor{ha, hb}

	// Four networks: the parent's, one per subport, one for the subport added live.
	nets := make([]*Network, 4)
	for i, cidr := range []string{"10.251.0.0/24", "10.251.1.0/24", "10.251.2.0/24", "10.251.3.0/24"} {
		nets[i] = e.Network(NetworkSpec{Name: "trunk" + strconv.Itoa(i)})
		e.Subnet(nets[i].ID, cidr)
	}
	parent := e.unboundPort(nets[0], "parent")
	sub1, sub2, sub3 := e.unboundPort(nets[1], "sub101"), e.unboundPort(nets[2], "sub102"), e.unboundPort(nets[3], "sub103")

	var created struct{ Trunk e2eTrunk }
	body := map[string]any{"trunk": map[string]any{"name": e.name("trunk"), "project_id": e.Neutron.Project, "port_id": parent.ID,
		"sub_ports": []map[string]any{
			{"port_id": sub1.ID, "segmentation_type": "vlan", "segmentation_id": 101},
			{"port_id": sub2.ID, "segmentation_type": "vlan", "segmentation_id": 102}}}}
	if err := e.Neutron.Do(e.Ctx, "POST", "/trunks", body, &created); err != nil {
		t.Fatalf("create trunk (is the trunk service plugin on? see the header): %v", err)
	}
	tr := created.Trunk
	trunkGone := false
	t.Cleanup(func() {
		if trunkGone {
			return
		}
		ctx, cancel := cleanupCtx()
		defer cancel()
		_, _ = e.Neutron.UpdatePort(ctx, parent.ID, map[string]any{"binding:host_id": "", "device_owner": "", "device_id": ""})
		if err := e.Neutron.Do(ctx, "DELETE", "/trunks/"+tr.ID, nil, nil); err != nil && !IsNotFound(err) {
			t.Errorf("cleanup trunk: %v", err)
		}
	})
	tbr := trunk.BridgeName(tr.ID)

	// nova binds the parent to hv1: vif_details carries the trunk bridge os-vif plugs into.
	var bound struct {
		Port struct {
			VIFDetails map[string]any `json:"binding:vif_details"`
		} `json:"port"`
	}
	parent.DeviceID = newUUID()
	if err := e.Neutron.Do(e.Ctx, "PUT", "/ports/"+parent.ID, map[string]any{"port": map[string]any{
		"binding:host_id": ha.Name, "device_owner": "compute:nova", "device_id": parent.DeviceID}}, &bound); err != nil {
		t.Fatal(err)
	}
	if got := bound.Port.VIFDetails["bridge_name"]; got != tbr {
		t.Fatalf("parent's vif_details bridge_name %v, want %s", got, tbr)
	}
	t.Cleanup(func() { // os-vif removes the trunk bridge when the VM goes
		ctx, cancel := cleanupCtx()
		defer cancel()
		_, _ = ha.OVS.Vsctl(ctx, "--if-exists", "del-br", tbr)
	})
	guest := newTrunkGuest(t, e, ha, tbr, parent, nets[0].MTU)
	vm := guest.vm
	plugged := time.Now()
	guest.iface(101, sub1, nets[1].MTU)
	guest.iface(102, sub2, nets[2].MTU)
	// A VM on each network, on either hypervisor.
	peers := make([]*VM, 4)
	for i, nw := range nets {
		peers[i] = th.VM(hvs[i%2], nw, "peer"+strconv.Itoa(i))
	}

	for _, p := range []*Port{parent, sub1, sub2} {
		e.WaitStatus(p, "ACTIVE", 60*time.Second)
		t.Logf("port %s ACTIVE %s after plugging", p.ID[:8], time.Since(plugged).Truncate(time.Millisecond))
	}
	t.Logf("trunk ACTIVE after %s", e.waitTrunkStatus(tr.ID, "ACTIVE", 60*time.Second))
	for _, p := range peers {
		e.WaitStatus(p.Port, "ACTIVE", 60*time.Second)
	}
	ports, _ := ha.OVS.ListPorts(e.Ctx, "br-int")
	tpi, _ := trunk.ParentPatchNames(parent.ID)
	s1i, s1t := trunk.SubportPatchNames(sub1.ID)
	s2i, _ := trunk.SubportPatchNames(sub2.ID)
	for _, want := range []string{tpi, s1i, s2i} {
		if !contains(ports, want) {
			t.Fatalf("br-int lacks %s: %v", want, ports)
		}
	}
	if tag, err := ha.OVS.PortTag(e.Ctx, s1t); err != nil || tag != 101 {
		t.Fatalf("%s tag %d %v, want 101", s1t, tag, err)
	}

	t.Logf("untagged -> %s: %s", peers[0].IP, pingFrom(t, e.Ctx, vm, peers[0].IP, 20*time.Second))
	t.Logf("VLAN 101 -> %s: %s", peers[1].IP, pingFrom(t, e.Ctx, vm, peers[1].IP, 20*time.Second))
	t.Logf("VLAN 102 -> %s: %s", peers[2].IP, pingFrom(t, e.Ctx, vm, peers[2].IP, 20*time.Second))
	for i, p := range peers[:3] {
		if st, err := vm.Ping(e.Ctx, p.IP, 5); err != nil || st.Lost() > 0 {
			t.Fatalf("network %d: %+v %v", i, st, err)
		}
	}

	// A subport added live (VLAN 103), then removed.
	add := map[string]any{"sub_ports": []map[string]any{{"port_id": sub3.ID, "segmentation_type": "vlan", "segmentation_id": 103}}}
	start := time.Now()
	if err := e.Neutron.Do(e.Ctx, "PUT", "/trunks/"+tr.ID+"/add_subports", add, nil); err != nil {
		t.Fatal(err)
	}
	guest.iface(103, sub3, nets[3].MTU)
	e.WaitStatus(sub3, "ACTIVE", 60*time.Second)
	t.Logf("subport added live: ACTIVE after %s", time.Since(start).Truncate(time.Millisecond))
	e.waitTrunkStatus(tr.ID, "ACTIVE", 30*time.Second)
	t.Logf("VLAN 103 -> %s: %s", peers[3].IP, pingFrom(t, e.Ctx, vm, peers[3].IP, 20*time.Second))
	s3i, s3t := trunk.SubportPatchNames(sub3.ID)
	rm := map[string]any{"sub_ports": []map[string]any{{"port_id": sub3.ID}}}
	if err := e.Neutron.Do(e.Ctx, "PUT", "/trunks/"+tr.ID+"/remove_subports", rm, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		bi, _ := ha.OVS.ListPorts(e.Ctx, "br-int")
		bt, _ := ha.OVS.ListPorts(e.Ctx, tbr)
		if !contains(bi, s3i) && !contains(bt, s3t) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("subport removed, its patch ports still there: %v %v", bi, bt)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st, _ := vm.Ping(e.Ctx, peers[3].IP, 3); st.Received > 0 {
		t.Errorf("VLAN 103 still forwards after the subport was removed: %+v", st)
	}
	time.Sleep(time.Second) // the agent's batch after the port left
	noFlowMentions(t, e.Ctx, hvs, "subport removed", sub3.MACAddress)
	if st, err := vm.Ping(e.Ctx, peers[1].IP, 3); err != nil || st.Lost() > 0 {
		t.Errorf("VLAN 101 after the removal of 103: %+v %v", st, err)
	}

	// The VM goes (os-vif: tap out, trunk bridge deleted), then the trunk.
	guest.unplug()
	deadline = time.Now().Add(30 * time.Second)
	for {
		bi, _ := ha.OVS.ListPorts(e.Ctx, "br-int")
		left := []string{}
		for _, p := range bi {
			if trunk.IsServicePort(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trunk ports left on br-int: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := e.Neutron.UpdatePort(e.Ctx, parent.ID, map[string]any{"binding:host_id": "", "device_owner": "", "device_id": ""}); err != nil {
		t.Fatal(err)
	}
	if err := e.Neutron.Do(e.Ctx, "DELETE", "/trunks/"+tr.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
	trunkGone = true
	time.Sleep(time.Second)
	if ha.OVS.BridgeExists(e.Ctx, tbr) {
		t.Errorf("%s still exists", tbr)
	}
	noFlowMentions(t, e.Ctx, hvs, "trunk deleted", parent.MACAddress, sub1.MACAddress, sub2.MACAddress, sub3.MACAddress)
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
