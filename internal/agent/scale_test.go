//go:build integration

package agent

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/firewall"
	"github.com/ovsagent/ovsagent/internal/metrics"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
	"github.com/ovsagent/ovsagent/internal/pipeline"
	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// Scale tests: the agent's own work at bench sizes (issue 7) with the real
// pipeline and OVS firewall and in-memory edges. They report timings and
// heap with t.Logf; nothing here asserts wall-clock thresholds.
//
//	OVSAGENT_SCALE_PORTS=1000 go test ./internal/agent -run TestScale -v
//	OVSAGENT_CPUPROFILE=/tmp/cpu.out OVSAGENT_HEAPPROFILE=/tmp/heap.out go test ...

// sgServer is fakeServer whose security groups carry the default group's
// remote-group members (every port's address), as the real server's do.
type sgServer struct{ *fakeServer }

func (s sgServer) SecurityGroups(ctx context.Context, ids []string) (map[string]firewall.SecurityGroup, map[string][]firewall.Member, error) {
	groups, _, err := s.fakeServer.SecurityGroups(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	members := map[string][]firewall.Member{}
	for _, d := range s.devices {
		for _, sg := range d.SecurityGroups {
			for _, ip := range d.FixedIPs {
				a := netip.MustParseAddr(ip.IP)
				members[sg] = append(members[sg], firewall.Member{IP: netip.PrefixFrom(a, 32)})
			}
		}
	}
	return groups, members, nil
}

func scalePorts() int {
	if v := os.Getenv("OVSAGENT_SCALE_PORTS"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return 100 // quick in CI; the bench sizes with OVSAGENT_SCALE_PORTS=352 / 1000
}

type scaleRun struct {
	tb     testing.TB
	sw     *fakeSwitch
	fl     Flows
	srv    *fakeServer
	m      *metrics.Metrics
	a      *Agent
	cancel context.CancelFunc
	done   chan error
	synced chan struct{}
}

func newScaleServer(n int) *fakeServer {
	srv := newFakeServer()
	srv.groups["default"] = firewall.SecurityGroup{ID: "default", Rules: []firewall.Rule{
		{ID: "r1", Direction: firewall.Ingress, EtherType: firewall.IPv4, RemoteGroupID: "default"},
		{ID: "r2", Direction: firewall.Ingress, EtherType: firewall.IPv6, RemoteGroupID: "default"},
		{ID: "r3", Direction: firewall.Egress, EtherType: firewall.IPv4},
		{ID: "r4", Direction: firewall.Egress, EtherType: firewall.IPv6},
	}}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("port-%05d", i)
		srv.addPort(id, "net-a", "vxlan", 100, scaleMAC(i))
		d := srv.devices[id]
		d.SecurityGroups = []string{"default"}
		d.FixedIPs = []FixedIP{{SubnetID: "s", IP: fmt.Sprintf("10.77.%d.%d", i/250, i%250+2)}}
		srv.devices[id] = d
	}
	return srv
}

func scaleMAC(i int) string { return fmt.Sprintf("fa:16:3e:00:%02x:%02x", i/256, i%256) }

func startScale(tb testing.TB, sw *fakeSwitch, fl Flows, srv *fakeServer) *scaleRun {
	opt := testOpts(true)
	opt.Pipeline.FirewallDriver, opt.Pipeline.EnableSecurityGroup = "openvswitch", true
	opt.BatchWindow = 10 * time.Millisecond
	opt.FDBWait = 2 * time.Second
	r := &scaleRun{tb: tb, sw: sw, fl: fl, srv: srv, m: metrics.New(), done: make(chan error, 1), synced: make(chan struct{}, 1)}
	r.a = newTestAgent(opt, Deps{Switch: sw, Flows: fl, Plugin: srv, Cache: sgServer{srv}, Reporter: srv, Metrics: r.m, Log: testLogger(),
		AfterBatch: func(in bool) {
			if in {
				select {
				case r.synced <- struct{}{}:
				default:
				}
			}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.a.Run(ctx) }()
	return r
}

func (r *scaleRun) waitSync(what string) {
	deadline := time.After(120 * time.Second)
	for {
		select {
		case <-r.synced:
			if r.m.InSync() {
				return
			}
		case <-deadline:
			r.tb.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (r *scaleRun) stop() {
	r.cancel()
	if err := <-r.done; err != nil {
		r.tb.Errorf("Run: %v", err)
	}
}

func heapMiB() float64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

func profileCPU(tb testing.TB) func() { return profileCPUTo(tb, os.Getenv("OVSAGENT_CPUPROFILE")) }

func profileCPUTo(tb testing.TB, path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		tb.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

func writeHeap(tb testing.TB) {
	path := os.Getenv("OVSAGENT_HEAPPROFILE")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		tb.Fatal(err)
	}
}

// TestScaleWireAndRestart wires N ports with the OVS firewall (one network,
// the default security group), then restarts the agent on the same
// dataplane and logs the time from start to in sync and the heap.
func TestScaleWireAndRestart(t *testing.T) {
	n := scalePorts()
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newScaleServer(n)
	base := heapMiB()
	r := startScale(t, sw, fl, srv)
	sw.snapshot()
	t0 := time.Now()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("port-%05d", i)
		sw.plug(id, "tap"+id[5:], scaleMAC(i))
	}
	r.waitSync("all wired")
	wire := time.Since(t0)
	heap := heapMiB() - base
	writeHeap(t)
	r.stop()
	fl.newRound()
	sw.events = make(chan PortEvent, 1024)

	stopCPU := profileCPU(t)
	t1 := time.Now()
	r2 := startScale(t, sw, fl, srv)
	sw.snapshot()
	r2.waitSync("in sync after restart")
	restart := time.Since(t1)
	stopCPU()
	r2.stop()
	bundles := 0
	fl.mu.Lock()
	bundles = fl.bundles
	fl.mu.Unlock()
	t.Logf("%d ports: wired in %v; restart → in sync %v (FDBWait 2 s, no FDB sent); agent heap %.1f MiB; %d bundles; update_device_list calls %d",
		n, wire.Round(time.Millisecond), restart.Round(time.Millisecond), heap, bundles, srv.calls())
}

// TestScaleRealOVSRestart is the restart of TestScaleWireAndRestart on a
// private Open vSwitch through the real OVSDB and OpenFlow adapters
// (internal ports stand in for VIFs): what the bench's restart measures,
// minus the server.
func TestScaleRealOVSRestart(t *testing.T) {
	n := scalePorts()
	o := ovstest.Start(t)
	if err := o.AddBridge("br-phys"); err != nil {
		t.Fatal(err)
	}
	srv := newScaleServer(n)
	h, _ := runScaleRealAgent(t, o, srv)
	wire := wireScaleReal(t, o, h, srv, n)
	writeHeap(t)
	h.stop()
	calls := srv.calls()

	stopCPU := profileCPU(t)
	t1 := time.Now()
	h2, _ := runScaleRealAgent(t, o, srv)
	deadline := time.After(120 * time.Second)
	for !h2.inSync() {
		select {
		case <-h2.batches:
		case <-deadline:
			t.Fatal("timed out waiting for in sync after restart")
		}
	}
	restart := time.Since(t1)
	stopCPU()
	t.Logf("%d ports on a private OVS: wired in %v; restart → in sync %v; update_device_list calls after restart %d",
		n, wire.Round(time.Millisecond), restart.Round(time.Millisecond), srv.calls()-calls)

	// Single ports on the loaded agent, one after the other: the agent's
	// share (OVSDB event → update_device_list sent), from its own metric.
	const singles = 10
	stopCPU = profileCPUTo(t, os.Getenv("OVSAGENT_CPUPROFILE_SINGLES"))
	defer stopCPU()
	covBefore := ovsCoverage(t, o)
	defer func() { logCoverageDelta(t, covBefore, ovsCoverage(t, o), singles) }()
	for i := n; i < n+singles; i++ {
		id := fmt.Sprintf("port-%05d", i)
		srv.addPort(id, "net-a", "vxlan", 100, scaleMAC(i))
		srv.update(id, func(d *Device) {
			d.SecurityGroups = []string{"default"}
			d.FixedIPs = []FixedIP{{SubnetID: "s", IP: fmt.Sprintf("10.77.%d.%d", i/250, i%250+2)}}
		})
		name := "sc" + id[5:]
		if out, err := o.Vsctl("add-port", "br-int", name, "--", "set", "Interface", name, "type=internal",
			"external_ids:iface-id="+id, "external_ids:attached-mac="+scaleMAC(i), "external_ids:iface-status=active"); err != nil {
			t.Fatalf("add-port: %v: %s", err, out)
		}
		deadline = time.After(30 * time.Second)
		for srv.status(id) != "ACTIVE" {
			select {
			case <-h2.batches:
			case <-time.After(20 * time.Millisecond):
			case <-deadline:
				t.Fatalf("%s not ACTIVE", id)
			}
		}
	}
	// Mean of every stage (ovsagent_port_wiring_stage_seconds): the agent's
	// own share next to ovs-vswitchd's (attaching the interface) and the
	// fake server's.
	sums, cnts := map[string]float64{}, map[string]float64{}
	for _, l := range strings.Split(scrape(t, h2.m), "\n") {
		rest, ok := strings.CutPrefix(l, "ovsagent_port_wiring_stage_seconds_")
		if !ok {
			continue
		}
		kind, rest, _ := strings.Cut(rest, "{stage=\"")
		stage, val, _ := strings.Cut(rest, "\"} ")
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			continue
		}
		switch kind {
		case "sum":
			sums[stage] = v
		case "count":
			cnts[stage] = v
		}
	}
	var parts []string
	for _, st := range []string{stageVswitchd, stageServerData, stageAgent, stageDataplane, stageReportQueue, stageServer} {
		if cnts[st] > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f ms", st, sums[st]/cnts[st]*1000))
		}
	}
	t.Logf("%d single ports after the restart, mean per port by stage (of %v ports): %s",
		singles, cnts[stageAgent], strings.Join(parts, ", "))
}

// ovsCoverage reads ovs-vswitchd's coverage counters (name → total): what
// the switch did, to tell its share of a slow batch from ours.
func ovsCoverage(t *testing.T, o *ovstest.OVS) map[string]int64 {
	out, err := o.Appctl("coverage/show")
	if err != nil {
		t.Logf("coverage/show: %v", err)
		return nil
	}
	m := map[string]int64{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[len(f)-2] != "total:" {
			continue
		}
		if v, err := strconv.ParseInt(f[len(f)-1], 10, 64); err == nil {
			m[f[0]] = v
		}
	}
	return m
}

// logCoverageDelta logs the counters that moved most, per port.
func logCoverageDelta(t *testing.T, before, after map[string]int64, ports int) {
	type kv struct {
		k string
		v int64
	}
	var d []kv
	for k, v := range after {
		if v > before[k] {
			d = append(d, kv{k, v - before[k]})
		}
	}
	sort.Slice(d, func(i, j int) bool { return d[i].v > d[j].v })
	var parts []string
	for _, x := range d[:min(len(d), 15)] {
		parts = append(parts, fmt.Sprintf("%s %.0f", x.k, float64(x.v)/float64(ports)))
	}
	t.Logf("ovs-vswitchd coverage counters per single port: %s", strings.Join(parts, ", "))
}

// wireScaleReal plugs n internal ports (VIFs) on br-int, 100 per
// ovs-vsctl call, and waits until the agent is in sync with all ACTIVE.
func wireScaleReal(t *testing.T, o *ovstest.OVS, h *harness, srv *fakeServer, n int) time.Duration {
	t.Helper()
	t0 := time.Now()
	for start := 0; start < n; start += 100 {
		args := []string{}
		for i := start; i < min(start+100, n); i++ {
			id := fmt.Sprintf("port-%05d", i)
			name := "sc" + id[5:]
			args = append(args, "--", "add-port", "br-int", name, "--", "set", "Interface", name, "type=internal",
				"external_ids:iface-id="+id, "external_ids:attached-mac="+scaleMAC(i), "external_ids:iface-status=active")
		}
		if out, err := o.Vsctl(args[1:]...); err != nil {
			t.Fatalf("add-port: %v: %s", err, out)
		}
	}
	deadline := time.After(300 * time.Second)
	for !(h.inSync() && srv.status(fmt.Sprintf("port-%05d", n-1)) == "ACTIVE" && allActive(srv)) {
		select {
		case <-h.batches:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("timed out wiring")
		}
	}
	return time.Since(t0)
}

func allActive(s *fakeServer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.devices {
		if d.Status != "ACTIVE" {
			return false
		}
	}
	return true
}

func runScaleRealAgent(t *testing.T, o *ovstest.OVS, srv *fakeServer) (*harness, *OFBridges) {
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
	for _, br := range l.Bridges() {
		if err := of.Add(ctx, br, o.Mgmt(br)); err != nil {
			t.Fatal(err)
		}
	}
	opt := testOpts(true)
	opt.Pipeline = pipeline.Config{FirewallDriver: "openvswitch", EnableSecurityGroup: true, L2Population: true,
		TunnelTypes: []pipeline.NetworkType{pipeline.TypeVXLAN}}
	opt.BatchWindow = 10 * time.Millisecond
	opt.FDBWait = 2 * time.Second
	h := &harness{t: t, srv: srv, m: metrics.New(), batches: make(chan bool, 1), done: make(chan error, 1)}
	h.a = newTestAgent(opt, Deps{Switch: sw, Flows: of, Plugin: srv, Cache: sgServer{srv}, Metrics: h.m, Log: testLogger(),
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
