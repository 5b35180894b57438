//go:build integration

package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/metrics"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
	"github.com/ovsagent/ovsagent/internal/pipeline"
	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// runRealAgent runs the agent on a private OVS through the real OVSDB and
// OpenFlow adapters, with the in-memory server.
func runRealAgent(t *testing.T, o *ovstest.OVS, srv *fakeServer) (*harness, *OFBridges) {
	t.Helper()
	return runRealAgentWith(t, o, srv, nil)
}

// runRealAgentWith is runRealAgent with the agent's Flows made by wrap
// from the real adapter (the adapter itself when wrap is nil).
func runRealAgentWith(t *testing.T, o *ovstest.OVS, srv *fakeServer, wrap func(*OFBridges) Flows) (*harness, *OFBridges) {
	t.Helper()
	return runRealAgentTuned(t, o, srv, nil, wrap)
}

// runRealAgentTuned is runRealAgentWith with tune (when not nil) applied to
// the OpenFlow bridges and the options before anything starts.
func runRealAgentTuned(t *testing.T, o *ovstest.OVS, srv *fakeServer, tune func(*OFBridges, *Options), wrap func(*OFBridges) Flows) (*harness, *OFBridges) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := ovsdb.Dial(ctx, o.DB, ovsdb.Options{RunDir: o.Dir, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	sw := NewOVSDBSwitch(ctx, c, SwitchConfig{Integration: "br-int", Tunnel: "br-tun", IntPeerPatch: "patch-tun", TunPeerPatch: "patch-int",
		DatapathType: "netdev", BridgeMappings: map[string]string{"physnet1": "br-phys"}, VXLANUDPPort: 4789, DontFragment: true}, testLogger())
	if err := sw.CheckPhysicalBridges(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := sw.SetupBridges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	of := NewOFBridges(testLogger())
	opt := testOpts(true)
	if tune != nil {
		tune(of, &opt)
	}
	for _, br := range l.Bridges() {
		if err := of.Add(ctx, br, o.Mgmt(br)); err != nil {
			t.Fatal(err)
		}
	}
	opt.LocalIP = "192.0.2.1"
	opt.Pipeline = pipeline.Config{FirewallDriver: "openvswitch", EnableSecurityGroup: true, L2Population: true,
		TunnelTypes: []pipeline.NetworkType{pipeline.TypeVXLAN}}
	opt.FDBWait = 200 * time.Millisecond
	h := &harness{t: t, srv: srv, m: metrics.New(), batches: make(chan bool, 1), done: make(chan error, 1)}
	var flows Flows = of
	if wrap != nil {
		flows = wrap(of)
	}
	h.a = newTestAgent(opt, Deps{Switch: sw, Flows: flows, Plugin: srv, Cache: srv, Metrics: h.m, Log: testLogger(),
		AfterBatch: func(bool) {
			select {
			case h.batches <- true:
			default:
			}
		}})
	h.cancel = cancel
	go func() { h.done <- h.a.Run(ctx) }()
	t.Cleanup(func() {
		h.stop()
		of.Close()
		c.Close()
	})
	return h, of
}

func dumpFlows(t *testing.T, o *ovstest.OVS, br string) []string {
	t.Helper()
	out, err := o.Ofctl("dump-flows", br, "--no-stats")
	if err != nil {
		t.Fatalf("dump-flows %s: %v", br, err)
	}
	var fs []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "OFPST") {
			fs = append(fs, l)
		}
	}
	return fs
}

func count(fs []string, sub string) int {
	n := 0
	for _, f := range fs {
		if strings.Contains(f, sub) {
			n++
		}
	}
	return n
}

func TestRealOVSWireRestartAndVswitchdRestart(t *testing.T) {
	o := ovstest.Start(t)
	if err := o.AddBridge("br-phys"); err != nil {
		t.Fatal(err)
	}
	srv := newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")

	// A stale flow an earlier run left: it must go once in sync.
	if err := o.AddBridge("br-int"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Ofctl("add-flow", "br-int", "cookie=0x99,table=0,priority=3,in_port=999,actions=drop"); err != nil {
		t.Fatal(err)
	}
	h, _ := runRealAgent(t, o, srv)
	if _, err := o.Vsctl("add-port", "br-int", "tapp1", "--", "set", "Interface", "tapp1", "type=internal",
		"external_ids:iface-id=p1", "external_ids:attached-mac=fa:16:3e:00:00:01"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("p1 ACTIVE and in sync", func() bool { return srv.status("p1") == "ACTIVE" && h.inSync() })
	tag, _ := o.Vsctl("get", "Port", "tapp1", "tag")
	oc, _ := o.Vsctl("get", "Port", "tapp1", "other_config")
	if strings.TrimSpace(tag) != "1" || !strings.Contains(oc, "net_uuid=net-a") || !strings.Contains(oc, `segmentation_id="100"`) {
		t.Errorf("tapp1 tag %q other_config %s", tag, oc)
	}
	intFlows := dumpFlows(t, o, "br-int")
	if count(intFlows, "table=23") != 1 || count(intFlows, "in_port=999") != 0 || count(intFlows, "reg5=") == 0 {
		t.Errorf("br-int after sync (canary, no stale, firewall):\n%s", strings.Join(intFlows, "\n"))
	}
	tunFlows := dumpFlows(t, o, "br-tun")
	if count(tunFlows, "tun_id=0x64") != 1 {
		t.Errorf("br-tun lacks VNI 100:\n%s", strings.Join(tunFlows, "\n"))
	}

	// ovs-vswitchd crashes and comes back with empty tables.
	if err := o.StopVswitchd(); err != nil {
		t.Fatal(err)
	}
	if err := o.StartVswitchd(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if fs, err := o.Ofctl("dump-flows", "br-int", "--no-stats"); err == nil && strings.Count(fs, "\n") > len(intFlows) && h.inSync() {
			break
		}
		select {
		case <-h.batches:
		case <-time.After(100 * time.Millisecond): // the switch, not the agent, is what we wait for here
		}
	}
	if got := dumpFlows(t, o, "br-int"); strings.Join(got, "\n") != strings.Join(intFlows, "\n") {
		t.Errorf("br-int after ovs-vswitchd restart differs:\n got %s\nwant %s", strings.Join(got, "\n"), strings.Join(intFlows, "\n"))
	}
	if got := dumpFlows(t, o, "br-tun"); len(got) != len(tunFlows) {
		t.Errorf("br-tun after ovs-vswitchd restart: %d flows, want %d", len(got), len(tunFlows))
	}

	// The agent restarts: a new cookie round replaces every flow in place,
	// nothing is re-tagged, the port is not reported again.
	h.stop()
	calls := srv.calls()
	before := dumpFlows(t, o, "br-int")
	h2, of2 := runRealAgent(t, o, srv)
	h2.waitFor("in sync after restart", h2.inSync)
	after := dumpFlows(t, o, "br-int")
	cookie := "cookie=0x" + strings.TrimLeft(strings.ToLower(hexU64(of2.Cookie("br-int"))), "0")
	if count(after, cookie) != len(after) {
		t.Errorf("%d of %d br-int flows not of the new round %s", len(after)-count(after, cookie), len(after), cookie)
	}
	if len(after) != len(before) {
		t.Errorf("br-int has %d flows after restart, %d before", len(after), len(before))
	}
	if tag2, _ := o.Vsctl("get", "Port", "tapp1", "tag"); tag2 != tag {
		t.Errorf("tag changed over restart: %q → %q", tag, tag2)
	}
	// At most the one FDB refresh for the tunnelled network.
	if d := srv.calls() - calls; d > 1 {
		t.Errorf("restart sent %d update_device_list calls", d)
	}
}

func hexU64(v uint64) string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[v&15]
		v >>= 4
	}
	return string(b[:])
}

// TestRealOVSPortHints: the port hints reach the Interface row of a private
// OVS through the real OVSDB adapter, on bind (a foreign key the VIF was
// plugged with goes, as the reference replaces the column), on a port update
// that changes them, and are cleared when the hints go.
func TestRealOVSPortHints(t *testing.T) {
	o := ovstest.Start(t)
	if err := o.AddBridge("br-phys"); err != nil {
		t.Fatal(err)
	}
	srv := newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	srv.update("p1", func(d *Device) { d.Hints = txHints(map[string]any{"tx-steering": "hash"}) })
	h, _ := runRealAgent(t, o, srv)
	if _, err := o.Vsctl("add-port", "br-int", "tapp1", "--", "set", "Interface", "tapp1", "type=internal",
		"external_ids:iface-id=p1", "external_ids:attached-mac=fa:16:3e:00:00:01", "other_config:foreign=yes"); err != nil {
		t.Fatal(err)
	}
	ifaceOC := func() string {
		out, err := o.Vsctl("get", "Interface", "tapp1", "other_config")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	h.waitFor("p1 ACTIVE and in sync", func() bool { return srv.status("p1") == "ACTIVE" && h.inSync() })
	if got := ifaceOC(); got != "{tx-steering=hash}" {
		t.Fatalf("after bind Interface other_config %s, want {tx-steering=hash}", got)
	}
	srv.update("p1", func(d *Device) { d.Hints = txHints(map[string]any{"tx-steering": "thread"}) })
	h.a.Notify(PortChanged{PortID: "p1"})
	h.waitFor("tx-steering=thread", func() bool { return ifaceOC() == "{tx-steering=thread}" })
	srv.update("p1", func(d *Device) { d.Hints = nil })
	h.a.Notify(PortChanged{PortID: "p1"})
	h.waitFor("other_config cleared", func() bool { return ifaceOC() == "{}" })
	if tag, _ := o.Vsctl("get", "Port", "tapp1", "tag"); strings.TrimSpace(tag) != "1" {
		t.Errorf("tag %q after hint updates, want 1", tag)
	}
}
