//go:build integration

package ovsdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/ovsdb/wire"
	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// Integration tests: each runs against its own ovsdb-server + ovs-vswitchd
// (ovstest), never the system OVS, and names its bridges uniquely.

func uniq(t testing.TB) string {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "ovt" + hex.EncodeToString(b) // 9 chars; "-int" etc. keeps names <= 15
}

func dial(t testing.TB, o *ovstest.OVS) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, o.DB, Options{})
	if err != nil {
		t.Fatalf("dial %s: %v", o.DB, err)
	}
	t.Cleanup(c.Close)
	return c
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func vsctl(t testing.TB, o *ovstest.OVS, args ...string) string {
	t.Helper()
	out, err := o.Vsctl(args...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return strings.TrimSpace(out)
}

// topology is the reference's bridge layout for prefix p, netdev datapath.
type topology struct {
	intBr, tunBr, physBr string
	specs                []BridgeSpec
	patches              []PatchPort
	tunnels              []TunnelPort
}

func newTopology(p string) topology {
	tp := topology{intBr: p + "-int", tunBr: p + "-tun", physBr: p + "-ph"}
	for i, n := range []string{tp.intBr, tp.tunBr, tp.physBr} {
		s := ReferenceBridge(n, DatapathNetdev, 50000, i == 0, DefaultIGMP())
		s.Controllers, s.InactivityProbeMS, s.ControllerConnectionMode = []string{"tcp:127.0.0.1:6633"}, 10000, "out-of-band"
		tp.specs = append(tp.specs, s)
	}
	tp.specs[0].ExternalIDs = map[string]string{"ovsagent-cookie-round": "1"}
	tp.patches = PatchPair(tp.intBr, "patch-tun"+p[3:], tp.tunBr, "patch-int"+p[3:])
	tp.patches[0].PortOtherConfig = DefaultIGMP().PortOtherConfig()
	ip, pp, _ := PhysPatchNames(tp.physBr)
	tp.patches = append(tp.patches,
		PatchPort{Bridge: tp.intBr, Name: ip, Peer: pp, PortOtherConfig: DefaultIGMP().PortOtherConfig()},
		PatchPort{Bridge: tp.physBr, Name: pp, Peer: ip})
	for _, r := range []string{"172.31.255.2", "172.31.255.3"} {
		tp.tunnels = append(tp.tunnels, TunnelPort{Bridge: tp.tunBr, Type: "vxlan", RemoteIP: r,
			LocalIP: "172.31.255.1", DontFragment: true})
	}
	tp.tunnels = append(tp.tunnels, TunnelPort{Bridge: tp.tunBr, Type: "gre", RemoteIP: "172.31.255.4",
		LocalIP: "172.31.255.1", DontFragment: true, Csum: true})
	return tp
}

func (tp topology) ensure(ctx context.Context, c *Client) (int, error) {
	total := 0
	n, err := c.EnsureBridges(ctx, tp.specs...)
	if err != nil {
		return 0, err
	}
	total += n
	if n, err = c.EnsurePatchPorts(ctx, tp.patches...); err != nil {
		return 0, err
	}
	total += n
	if n, err = c.EnsureTunnelPorts(ctx, tp.tunnels...); err != nil {
		return 0, err
	}
	return total + n, nil
}

func TestEnsureTopologyIdempotent(t *testing.T) {
	o := ovstest.Start(t)
	c := dial(t, o)
	ctx := testCtx(t)
	tp := newTopology(uniq(t))

	if ok, err := c.BridgeExists(ctx, tp.physBr); err != nil || ok {
		t.Fatalf("BridgeExists before create = %v, %v", ok, err)
	}
	n, err := tp.ensure(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first ensure: %d operations", n)
	if ok, err := c.BridgeExists(ctx, tp.physBr); err != nil || !ok {
		t.Fatalf("BridgeExists after create = %v, %v", ok, err)
	}
	if n, err := tp.ensure(ctx, c); err != nil || n != 0 {
		t.Fatalf("second ensure: %d operations, %v; want 0", n, err)
	}

	// What ovs-vsctl sees, independently of our cache.
	// The 2026.2 reference's values with default options (ovs_lib set_igmp_snooping_state,
	// set_igmp_snooping_flood); Zed's were "false" and False/False.
	if got := vsctl(t, o, "get", "Bridge", tp.intBr, "datapath_type", "fail_mode", "other_config",
		"mcast_snooping_enable", "external_ids:ovsagent-cookie-round"); got !=
		"netdev\nsecure\n"+`{mac-table-size="50000", mcast-snooping-disable-flood-unregistered="true"}`+"\nfalse\n\"1\"" {
		t.Errorf("br-int columns: %q", got)
	}
	if got := vsctl(t, o, "get", "Bridge", tp.physBr, "other_config"); got != `{mac-table-size="50000"}` {
		t.Errorf("phys other_config: %q", got)
	}
	if got := vsctl(t, o, "get", "Port", tp.patches[0].Name, "other_config"); got !=
		"{mcast-snooping-flood=\"false\", mcast-snooping-flood-reports=\"true\"}" {
		t.Errorf("patch-tun other_config: %q", got)
	}
	if got := vsctl(t, o, "get", "Bridge", tp.tunBr, "protocols"); got != "[OpenFlow10, OpenFlow13, OpenFlow14]" {
		t.Errorf("protocols: %q", got)
	}
	if got := vsctl(t, o, "get", "Controller", tp.tunBr, "target", "inactivity_probe", "connection_mode"); got != "\"tcp:127.0.0.1:6633\"\n10000\nout-of-band" {
		t.Errorf("controller: %q", got)
	}
	vx, _ := TunnelPortName("vxlan", "172.31.255.2", TunnelHashSHA1)
	if vx != "vxlan-ac1fff02" {
		t.Fatalf("name %s", vx)
	}
	if got := vsctl(t, o, "get", "Interface", vx, "type", "options"); got !=
		`vxlan`+"\n"+`{df_default="true", egress_pkt_mark="0", in_key=flow, local_ip="172.31.255.1", out_key=flow, remote_ip="172.31.255.2"}` {
		t.Errorf("tunnel interface: %q", got)
	}
	if got := vsctl(t, o, "get", "Interface", "gre-ac1fff04", "type", "options:csum"); got != "gre\n\"true\"" {
		t.Errorf("gre: %q", got)
	}
	if got := vsctl(t, o, "list-ports", tp.tunBr); !strings.Contains(got, "vxlan-ac1fff03") {
		t.Errorf("ports of %s: %q", tp.tunBr, got)
	}

	// ofports are known when Ensure returns (it waits for ovs-vswitchd).
	ports, err := c.BridgePorts(ctx, tp.intBr)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 3 {
		t.Fatalf("br-int ports: %+v", ports)
	}
	for _, p := range ports {
		if p.Ofport <= 0 {
			t.Errorf("port %s ofport %d", p.Name, p.Ofport)
		}
		if p.Type == "patch" && p.Options["peer"] == "" {
			t.Errorf("patch %s without peer", p.Name)
		}
	}

	// Mgmt sockets are in the private run dir, not /var/run/openvswitch.
	if c.RunDir() != o.Dir {
		t.Errorf("RunDir %s, want %s", c.RunDir(), o.Dir)
	}
	for _, br := range []string{tp.intBr, tp.tunBr, tp.physBr} {
		s := c.MgmtSocket(br)
		if filepath.Dir(s) != o.Dir {
			t.Errorf("MgmtSocket(%s) = %s", br, s)
		}
		waitFor(t, func() bool { _, err := os.Stat(s); return err == nil })
	}

	// Drift is repaired; a deleted tunnel port is re-created.
	vsctl(t, o, "set", "Bridge", tp.tunBr, "fail_mode=standalone", "--", "set", "Interface", vx,
		"options:remote_ip=1.2.3.4", "options:dst_port=4790", "options:operator=kept")
	if err := c.DeletePorts(ctx, tp.tunBr, "vxlan-ac1fff03", "no-such-port"); err != nil {
		t.Fatal(err)
	}
	if got := vsctl(t, o, "list-ports", tp.tunBr); strings.Contains(got, "vxlan-ac1fff03") {
		t.Fatalf("not deleted: %q", got)
	}
	if n, err := tp.ensure(ctx, c); err != nil || n != 5 {
		t.Fatalf("repair: %d operations, %v; want 5 (fail_mode, options, 3 to re-create the port)", n, err)
	}
	if got := vsctl(t, o, "get", "Bridge", tp.tunBr, "fail_mode"); got != "secure" {
		t.Errorf("fail_mode %q", got)
	}
	// Managed options restored (dst_port 4790 dropped), an operator's kept.
	if got := vsctl(t, o, "get", "Interface", vx, "options"); got !=
		`{df_default="true", egress_pkt_mark="0", in_key=flow, local_ip="172.31.255.1", operator=kept, out_key=flow, remote_ip="172.31.255.2"}` {
		t.Errorf("repaired options: %q", got)
	}
	if n, err := tp.ensure(ctx, c); err != nil || n != 0 {
		t.Fatalf("after repair: %d operations, %v; want 0", n, err)
	}
}

func TestPhysPatchUnpeeredThenPeered(t *testing.T) {
	o := ovstest.Start(t)
	c := dial(t, o)
	ctx := testCtx(t)
	p := uniq(t)
	intBr, phys := p+"-int", p+"-ph"
	// The physical bridge pre-exists (bridge_mappings); the agent only adjusts it.
	vsctl(t, o, "add-br", phys, "--", "set", "Bridge", phys, "datapath_type=netdev")
	if _, err := c.EnsureBridges(ctx, BridgeSpec{Name: intBr, DatapathType: DatapathNetdev},
		BridgeSpec{Name: phys, DatapathType: DatapathNetdev}); err != nil {
		t.Fatal(err)
	}
	ip, pp, _ := PhysPatchNames(phys)
	pair := []PatchPort{{Bridge: intBr, Name: ip, Peer: pp, CreateUnpeered: true}, {Bridge: phys, Name: pp, Peer: ip, CreateUnpeered: true}}
	if _, err := c.EnsurePatchPorts(ctx, pair...); err != nil {
		t.Fatal(err)
	}
	if got := vsctl(t, o, "get", "Interface", ip, "options:peer"); got != NonexistentPeer {
		t.Fatalf("peer before: %q", got)
	}
	pair[0].CreateUnpeered, pair[1].CreateUnpeered = false, false
	if n, err := c.EnsurePatchPorts(ctx, pair...); err != nil || n != 2 {
		t.Fatalf("peer: %d ops, %v", n, err)
	}
	if got := vsctl(t, o, "get", "Interface", ip, "options:peer"); got != pp {
		t.Fatalf("peer after: %q", got)
	}
	// Unpeered ensure of an existing, connected pair leaves it connected.
	pair[0].CreateUnpeered, pair[1].CreateUnpeered = true, true
	if n, err := c.EnsurePatchPorts(ctx, pair...); err != nil || n != 0 {
		t.Fatalf("re-ensure: %d ops, %v", n, err)
	}
}

func TestSystemAndExternalIDs(t *testing.T) {
	o := ovstest.Start(t)
	c := dial(t, o)
	ctx := testCtx(t)
	si, err := c.System(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ovs %s datapath_types %v iface_types %v", si.OVSVersion, si.DatapathTypes, si.IfaceTypes)
	if !strings.Contains(strings.Join(si.DatapathTypes, ","), "netdev") ||
		!strings.Contains(strings.Join(si.IfaceTypes, ","), "vxlan") {
		t.Errorf("system info %+v", si)
	}
	br := uniq(t) + "-int"
	if _, err := c.EnsureBridges(ctx, BridgeSpec{Name: br, DatapathType: DatapathNetdev}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetBridgeExternalIDs(ctx, br, map[string]string{"round": "7", "keep": "x"}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetBridgeExternalIDs(ctx, br, map[string]string{"round": "8"}, "keep"); err != nil {
		t.Fatal(err)
	}
	// Our own write reaches the cache asynchronously; ovs-vsctl reads the server.
	if got := vsctl(t, o, "get", "Bridge", br, "external_ids"); got != `{round="8"}` {
		t.Fatalf("external_ids %q", got)
	}
	if err := c.SetBridgeExternalIDs(ctx, "no-such-br", map[string]string{"a": "b"}); err == nil {
		t.Fatal("no error for missing bridge")
	}
	bi, err := c.Bridge(ctx, br)
	if err != nil || bi.FailMode != FailModeSecure || bi.DatapathType != DatapathNetdev {
		t.Fatalf("bridge %+v %v", bi, err)
	}
	if _, err := c.BridgeExternalIDs(ctx, "no-such-br"); err == nil {
		t.Fatal("no error for missing bridge")
	}
}

// addPatchPorts creates n unconnected patch ports on br in one transaction;
// patch ports get ofports without creating kernel devices.
func addPatchPorts(t testing.TB, c *Client, br, prefix string, n int) []string {
	t.Helper()
	ports := make([]PatchPort, n)
	names := make([]string, n)
	for i := range ports {
		names[i] = fmt.Sprintf("%s%d", prefix, i)
		ports[i] = PatchPort{Bridge: br, Name: names[i], Peer: NonexistentPeer}
	}
	if _, err := c.EnsurePatchPorts(testCtx(t), ports...); err != nil {
		t.Fatal(err)
	}
	return names
}

func bindings(names []string, tag int) []PortBinding {
	seg := 100 + tag
	b := make([]PortBinding, len(names))
	for i, n := range names {
		b[i] = PortBinding{Name: n, Tag: tag,
			OtherConfig: BindingOtherConfig("net-"+fmt.Sprint(tag), "vxlan", "", &seg, tag)}
	}
	return b
}

func TestSetPortBindings100(t *testing.T) {
	o := ovstest.Start(t)
	c := dial(t, o)
	ctx := testCtx(t)
	p := uniq(t)
	br := p + "-int"
	if _, err := c.EnsureBridges(ctx, BridgeSpec{Name: br, DatapathType: DatapathNetdev}); err != nil {
		t.Fatal(err)
	}
	names := addPatchPorts(t, c, br, "p"+p[3:]+"-", 100)
	// A port born dead (as Neutron's interface drivers create them) and a
	// foreign other_config key that must survive.
	vsctl(t, o, "set", "Port", names[0], "tag=4095", "vlan_mode=trunk", "trunks=4095", "other_config:foreign=yes")

	written, missing, err := c.SetPortBindings(ctx, append(bindings(names, 5), PortBinding{Name: "gone", Tag: 1}))
	if err != nil || written != 100 || len(missing) != 1 || missing[0] != "gone" {
		t.Fatalf("SetPortBindings: written %d missing %v err %v", written, missing, err)
	}
	if got := vsctl(t, o, "get", "Port", names[0], "tag", "vlan_mode", "trunks", "other_config"); got !=
		"5\n[]\n[]\n"+`{foreign=yes, net_uuid=net-5, network_type=vxlan, physical_network=None, segmentation_id="105", tag="5"}` {
		t.Fatalf("port 0: %q", got)
	}
	if got := vsctl(t, o, "get", "Port", names[99], "tag", "other_config:tag"); got != "5\n\"5\"" {
		t.Fatalf("port 99: %q", got)
	}
	// Read back through the cache (restart adoption reads these).
	waitFor(t, func() bool {
		ports, err := c.BridgePorts(ctx, br)
		if err != nil {
			t.Fatal(err)
		}
		for _, pi := range ports {
			if pi.Type == "patch" && (pi.Tag != 5 || pi.OtherConfig["net_uuid"] != "net-5") {
				return false
			}
		}
		return true
	})
	if written, _, err := c.SetPortBindings(ctx, bindings(names, 5)); err != nil || written != 0 {
		t.Fatalf("repeat wrote %d ports, %v; want 0", written, err)
	}
	dead := []PortBinding{{Name: names[1], Tag: DeadVLANTag}}
	if written, _, err := c.SetPortBindings(ctx, dead); err != nil || written != 1 {
		t.Fatalf("dead: %d %v", written, err)
	}
	if got := vsctl(t, o, "get", "Port", names[1], "tag"); got != "4095" {
		t.Fatalf("dead tag %q", got)
	}
}

// TestSetPortBindingsInterfaceOtherConfig: the port hints' Interface
// other_config replaces the whole column (the reference's set_db_attribute),
// an empty one clears it (clear_db_attribute), nil leaves it alone, and a
// repeat writes nothing.
func TestSetPortBindingsInterfaceOtherConfig(t *testing.T) {
	o := ovstest.Start(t)
	c := dial(t, o)
	ctx := testCtx(t)
	p := uniq(t)
	br := p + "-int"
	if _, err := c.EnsureBridges(ctx, BridgeSpec{Name: br, DatapathType: DatapathNetdev}); err != nil {
		t.Fatal(err)
	}
	names := addPatchPorts(t, c, br, "h"+p[3:]+"-", 3)
	for _, n := range names {
		vsctl(t, o, "set", "Interface", n, "other_config:foreign=yes", "other_config:tx-steering=thread")
	}
	want := []PortBinding{
		{Name: names[0], Tag: 5, IfaceOtherConfig: map[string]string{"tx-steering": "hash"}},
		{Name: names[1], Tag: 5, IfaceOtherConfig: map[string]string{}},
		{Name: names[2], Tag: 5},
	}
	if written, _, err := c.SetPortBindings(ctx, want); err != nil || written != 3 {
		t.Fatalf("SetPortBindings: written %d, %v", written, err)
	}
	for i, w := range []string{"{tx-steering=hash}", "{}", "{foreign=yes, tx-steering=thread}"} {
		if got := vsctl(t, o, "get", "Interface", names[i], "other_config"); got != w {
			t.Errorf("Interface %d other_config %q, want %q", i, got, w)
		}
	}
	// The tag is in place: only the Interface differs now.
	want[0].IfaceOtherConfig = map[string]string{"tx-steering": "thread"}
	if written, _, err := c.SetPortBindings(ctx, want); err != nil || written != 1 {
		t.Fatalf("hint changed: written %d, %v; want 1", written, err)
	}
	if got := vsctl(t, o, "get", "Interface", names[0], "other_config"); got != "{tx-steering=thread}" {
		t.Fatalf("changed hint: %q", got)
	}
	if written, _, err := c.SetPortBindings(ctx, want); err != nil || written != 0 {
		t.Fatalf("repeat wrote %d ports, %v; want 0", written, err)
	}
}

// waitFor polls cond on cache reads, which lag server writes by one update
// message; the deadline only guards against a hang.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func BenchmarkSetPortBindings1000(b *testing.B) {
	o := ovstest.Start(b)
	c := dial(b, o)
	ctx := context.Background()
	p := uniq(b)
	br := p + "-int"
	if _, err := c.EnsureBridges(ctx, BridgeSpec{Name: br, DatapathType: DatapathNetdev}); err != nil {
		b.Fatal(err)
	}
	names := addPatchPorts(b, c, br, "b"+p[3:]+"-", 1000)
	sets := [2][]PortBinding{bindings(names, 10), bindings(names, 11)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		want := sets[i%2]
		// Untimed: wait until the cache reflects the previous write, so each
		// timed call finds all 1,000 ports to change.
		b.StopTimer()
		for {
			v, err := c.readView(ctx, true)
			if err != nil {
				b.Fatal(err)
			}
			if p := v.portByName[names[len(names)-1]]; p != nil && (i == 0 || deref(p.Tag) == sets[(i+1)%2][0].Tag) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.StartTimer()
		w, _, err := c.SetPortBindings(ctx, want)
		if err != nil || w != len(names) {
			b.Fatalf("wrote %d ports, %v", w, err)
		}
	}
}

// BenchmarkSetPortBindingsPerPort1000 is the same work done the reference's
// way, one transaction per port, for comparison with the batch above.
func BenchmarkSetPortBindingsPerPort1000(b *testing.B) {
	o := ovstest.Start(b)
	c := dial(b, o)
	ctx := context.Background()
	p := uniq(b)
	br := p + "-int"
	if _, err := c.EnsureBridges(ctx, BridgeSpec{Name: br, DatapathType: DatapathNetdev}); err != nil {
		b.Fatal(err)
	}
	names := addPatchPorts(b, c, br, "q"+p[3:]+"-", 1000)
	sets := [2][]PortBinding{bindings(names, 10), bindings(names, 11)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, pb := range sets[i%2] {
			if w, _, err := c.SetPortBindings(ctx, []PortBinding{pb}); err != nil || w != 1 {
				b.Fatalf("wrote %d, %v", w, err)
			}
		}
	}
}

// BenchmarkMonitorScan1000 is the cost of one port-monitor wake-up on a
// bridge with 1,000 VM ports.
func BenchmarkMonitorScan1000(b *testing.B) {
	o := ovstest.Start(b)
	c := dial(b, o)
	ctx := context.Background()
	p := uniq(b)
	br := p + "-int"
	if _, err := c.EnsureBridges(ctx, BridgeSpec{Name: br, DatapathType: DatapathNetdev}); err != nil {
		b.Fatal(err)
	}
	names := addPatchPorts(b, c, br, "m"+p[3:]+"-", 1000)
	// Make them VM ports as far as the monitor can tell (keys on the Interface).
	var ops []wire.Operation
	for i, n := range names {
		ops = append(ops, updateOp("Interface", byName(n), wire.Row{"external_ids": wire.Map(map[string]string{
			"iface-id": fmt.Sprint("id-", i), "attached-mac": "fa:16:3e:00:00:01"})}))
	}
	if err := c.transact(ctx, "vm keys", ops, true); err != nil {
		b.Fatal(err)
	}
	m := &PortMonitor{c: c, bridge: br, emitted: map[string]VMPort{}}
	batch, err := m.scan(ctx)
	if err != nil || len(batch) != 1000 {
		b.Fatalf("first scan: %d events, %v", len(batch), err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		batch, err := m.scan(ctx)
		if err != nil || len(batch) != 0 {
			b.Fatalf("scan: %d events, %v", len(batch), err)
		}
	}
}

// While ovs-vswitchd is down, an ensure commits but reports that it was not
// applied; once vswitchd is back, the same ensure (nothing to change) returns
// when it has caught up, with ofports assigned.
func TestEnsureWithVswitchdDown(t *testing.T) {
	o := ovstest.Start(t)
	c := dial(t, o)
	tp := newTopology(uniq(t))
	if err := o.StopVswitchd(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := tp.ensure(short, c); err == nil || !strings.Contains(err.Error(), "ovs-vswitchd") {
		t.Fatalf("ensure with vswitchd down: %v", err)
	}
	if err := o.StartVswitchd(); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if _, err := tp.ensure(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	ports, err := c.BridgePorts(ctx, tp.tunBr)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if p.Ofport <= 0 {
			t.Errorf("%s ofport %d", p.Name, p.Ofport)
		}
	}
}

// A tunnel port ovs-vswitchd rejects is reported with its error, the others
// are created.
func TestEnsureTunnelPortFailure(t *testing.T) {
	o := ovstest.Start(t)
	c := dial(t, o)
	ctx := testCtx(t)
	br := uniq(t) + "-tun"
	if _, err := c.EnsureBridges(ctx, BridgeSpec{Name: br, DatapathType: DatapathNetdev}); err != nil {
		t.Fatal(err)
	}
	good := TunnelPort{Bridge: br, Type: "vxlan", RemoteIP: "10.0.0.2", LocalIP: "10.0.0.1", DontFragment: true}
	bad := TunnelPort{Bridge: br, Name: "vxlan-bad", Type: "vxlan", RemoteIP: "not-an-ip", LocalIP: "10.0.0.1"}
	_, err := c.EnsureTunnelPorts(ctx, good, bad)
	var fe *FailedPortsError
	if !errors.As(err, &fe) || len(fe.Ports) != 1 || fe.Ports["vxlan-bad"] == "" {
		t.Fatalf("err %v", err)
	}
	t.Logf("%v", err)
	ports, _ := c.BridgePorts(ctx, br)
	for _, p := range ports {
		if p.Name == "vxlan-0a000002" && p.Ofport <= 0 {
			t.Fatalf("good tunnel ofport %d", p.Ofport)
		}
	}
}

// The reference's QoS extension leaves QoS and Queue rows; the start's
// check for state ovs-agent cannot rebuild counts them.
func TestCountRows(t *testing.T) {
	o := ovstest.Start(t)
	c := dial(t, o)
	ctx := testCtx(t)
	if n, err := c.CountRows(ctx, "QoS"); err != nil || n != 0 {
		t.Fatalf("QoS rows = %d, %v; want 0", n, err)
	}
	vsctl(t, o, "--", "--id=@q", "create", "Queue", "other_config:max-rate=1000", "--", "create", "QoS", "type=linux-htb", "queues:0=@q")
	if n, err := c.CountRows(ctx, "QoS"); err != nil || n != 1 {
		t.Errorf("QoS rows = %d, %v; want 1", n, err)
	}
	if n, err := c.CountRows(ctx, "Queue"); err != nil || n != 1 {
		t.Errorf("Queue rows = %d, %v; want 1", n, err)
	}
}

// [ovs] ovsdb_timeout bounds every OVSDB operation that waits on the
// switch: with ovs-vswitchd down, a bridge setup given no deadline of its
// own fails after the timeout instead of waiting for ever.
func TestTimeoutBoundsOperations(t *testing.T) {
	o := ovstest.Start(t)
	ctx := testCtx(t)
	c, err := Dial(ctx, o.DB, Options{RunDir: o.Dir, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tp := newTopology(uniq(t))
	if err := o.StopVswitchd(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = o.StartVswitchd() }()
	done := make(chan error, 1)
	go func() { _, err := tp.ensure(context.Background(), c); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("bridge setup succeeded with ovs-vswitchd down")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("bridge setup still waiting 30 s after a 300 ms ovsdb_timeout")
	}
}
