package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/firewall"
	"github.com/ovsagent/ovsagent/internal/metrics"
	"github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/pipeline"
)

type harness struct {
	t       *testing.T
	sw      *fakeSwitch
	fl      *fakeFlows
	srv     *fakeServer
	m       *metrics.Metrics
	a       *Agent
	batches chan bool
	cancel  context.CancelFunc
	done    chan error
}

func testOpts(l2pop bool) Options {
	return Options{
		Host: "me", LocalIP: "192.0.2.1", TunnelTypes: []string{"vxlan"}, L2Population: l2pop,
		Pipeline: pipeline.Config{FirewallDriver: "noop", L2Population: l2pop,
			TunnelTypes: []pipeline.NetworkType{pipeline.TypeVXLAN}},
		BatchWindow: time.Millisecond, ReportInterval: time.Hour,
		RetryMin: 2 * time.Millisecond, RetryMax: 20 * time.Millisecond, FDBWait: 30 * time.Millisecond,
	}
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func start(t *testing.T, sw *fakeSwitch, fl *fakeFlows, srv *fakeServer, opt Options) *harness {
	t.Helper()
	return startWithClock(t, sw, fl, srv, opt, nil)
}

// startWithClock is start with Deps.Now = now (time.Now when nil).
func startWithClock(t *testing.T, sw *fakeSwitch, fl *fakeFlows, srv *fakeServer, opt Options, now func() time.Time) *harness {
	t.Helper()
	return startWithCache(t, sw, fl, srv, opt, now, srv, nil)
}

// startWithCache is startWithClock with cache as the agent's Cache (the
// details: srv stays the rest of the server) and inspect, when set, run on
// the loop after each batch (it may read the agent's state).
func startWithCache(t *testing.T, sw *fakeSwitch, fl *fakeFlows, srv *fakeServer, opt Options, now func() time.Time,
	cache Cache, inspect func(*Agent)) *harness {
	t.Helper()
	h := &harness{t: t, sw: sw, fl: fl, srv: srv, m: metrics.New(), batches: make(chan bool, 1), done: make(chan error, 1)}
	var a *Agent
	a = newTestAgent(opt, Deps{Switch: sw, Flows: fl, Plugin: srv, Cache: cache, Reporter: srv, Metrics: h.m, Log: testLogger(),
		Now: now,
		AfterBatch: func(bool) {
			if inspect != nil {
				inspect(a)
			}
			select {
			case h.batches <- true:
			default:
			}
		}})
	h.a = a
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.a.Run(ctx) }()
	t.Cleanup(func() { h.stop() })
	return h
}

// stop cancels the agent and waits for Run to return (a clean stop must
// take well under the 5 s SIGTERM budget).
func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		h.t.Fatal("agent did not stop within 5 s")
	}
}

// waitFor waits, batch by batch, until cond holds.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-h.batches:
		case <-deadline:
			h.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (h *harness) inSync() bool { return h.m.InSync() }

func TestPlugWiresPortAndReportsActive(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	h := start(t, sw, fl, srv, testOpts(true))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")

	h.waitFor("p1 ACTIVE", func() bool { return srv.status("p1") == "ACTIVE" })
	if got := sw.tag("tap1"); got != 1 {
		t.Errorf("tap1 tag = %d, want local VLAN 1", got)
	}
	own := fl.owners("br-int")
	if own["port:p1"] == 0 || own["base"] == 0 {
		t.Errorf("br-int owners = %v, want base and port:p1 flows", own)
	}
	if !fl.has("br-tun", "tun_id=0x64") {
		t.Errorf("br-tun lacks the VNI 100 → VLAN 1 flow:\n%s", strings.Join(fl.dump("br-tun"), "\n"))
	}
	if fl.has("br-int", "table=23") == false {
		t.Errorf("br-int lacks the canary flow")
	}
	h.waitFor("in sync", h.inSync)
	if srv.calls() != 1 {
		t.Errorf("update_device_list calls = %d, want 1", srv.calls())
	}
}

func TestManyPortsOneReport(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	ids := []string{}
	for i := 0; i < 20; i++ {
		id := "p" + string(rune('a'+i))
		ids = append(ids, id)
		srv.addPort(id, "net-a", "vxlan", 100, "fa:16:3e:00:01:"+hex2(i))
	}
	opt := testOpts(true)
	opt.BatchWindow = 50 * time.Millisecond
	h := start(t, sw, fl, srv, opt)
	sw.snapshot()
	for i, id := range ids {
		sw.plug(id, "tap"+id, "fa:16:3e:00:01:"+hex2(i))
	}
	h.waitFor("all ACTIVE", func() bool {
		for _, id := range ids {
			if srv.status(id) != "ACTIVE" {
				return false
			}
		}
		return true
	})
	if c := srv.calls(); c > 2 {
		t.Errorf("update_device_list calls = %d for 20 ports plugged together, want ≤ 2", c)
	}
	for _, id := range ids {
		if sw.tag("tap"+id) != 1 {
			t.Fatalf("%s tag = %d, want 1 (one network, one VLAN)", id, sw.tag("tap"+id))
		}
	}
}

func hex2(i int) string {
	const h = "0123456789abcdef"
	return string([]byte{h[i>>4&15], h[i&15]})
}

func TestAdminDownDeadVLANThenUp(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	h := start(t, sw, fl, srv, testOpts(false))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 ACTIVE", func() bool { return srv.status("p1") == "ACTIVE" })

	srv.update("p1", func(d *Device) { d.AdminStateUp = false })
	h.a.Notify(PortChanged{PortID: "p1"})
	h.waitFor("p1 DOWN on the dead VLAN", func() bool { return srv.status("p1") == "DOWN" && sw.tag("tap1") == DeadVLAN })
	if !fl.has("br-int", "priority=2,in_port=11 actions=drop") {
		t.Errorf("admin-down port has no table 0 drop flow:\n%s", strings.Join(fl.dump("br-int"), "\n"))
	}

	srv.update("p1", func(d *Device) { d.AdminStateUp = true })
	h.a.Notify(PortChanged{PortID: "p1"})
	h.waitFor("p1 ACTIVE again on VLAN 1", func() bool { return srv.status("p1") == "ACTIVE" && sw.tag("tap1") == 1 })
	h.waitFor("in sync", h.inSync)
}

func TestUnboundPortStaysDeadUnreported(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	h := start(t, sw, fl, srv, testOpts(false))
	sw.snapshot()
	sw.plug("ghost", "tapg", "fa:16:3e:00:00:09")
	h.waitFor("ghost dead", func() bool { return sw.tag("tapg") == DeadVLAN })
	h.waitFor("in sync", h.inSync)
	if srv.calls() != 0 {
		t.Errorf("update_device_list calls = %d for an unbound port, want 0", srv.calls())
	}
}

func TestRemovedPortCleanedReportedAndVLANFreed(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	srv.addPort("p2", "net-b", "vxlan", 200, "fa:16:3e:00:00:02")
	h := start(t, sw, fl, srv, testOpts(false))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 ACTIVE", func() bool { return srv.status("p1") == "ACTIVE" })

	sw.unplug("tap1")
	h.waitFor("p1 DOWN", func() bool { return srv.status("p1") == "DOWN" })
	h.waitFor("in sync", h.inSync)
	own := fl.owners("br-int")
	for o := range own {
		if strings.Contains(o, "p1") || strings.Contains(o, "net-a") {
			t.Errorf("flows of owner %s left after the port went away", o)
		}
	}
	if fl.has("br-tun", "tun_id=0x64") {
		t.Errorf("network flows left on br-tun after its last port went")
	}
	sw.plug("p2", "tap2", "fa:16:3e:00:00:02")
	h.waitFor("p2 ACTIVE", func() bool { return srv.status("p2") == "ACTIVE" })
	if got := sw.tag("tap2"); got != 1 {
		t.Errorf("p2 tag = %d, want the freed VLAN 1", got)
	}
}

func TestServerUnreachableLeavesDataplaneAndRetries(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	srv.addPort("p2", "net-a", "vxlan", 100, "fa:16:3e:00:00:02")
	h := start(t, sw, fl, srv, testOpts(false))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 ACTIVE", func() bool { return srv.status("p1") == "ACTIVE" })
	h.waitFor("in sync", h.inSync)
	before := fl.dump("br-int")

	srv.setDown(true)
	sw.plug("p2", "tap2", "fa:16:3e:00:00:02")
	h.waitFor("a few failed retries", func() bool { return h.a != nil && len(h.batches) == 0 && !h.inSync() })
	for i := 0; i < 3; i++ {
		<-h.batches
	}
	if got := fl.dump("br-int"); strings.Join(got, "\n") != strings.Join(before, "\n") {
		t.Errorf("dataplane changed while the server was unreachable")
	}
	if sw.tag("tap1") != 1 {
		t.Errorf("existing port re-tagged while the server was unreachable")
	}
	srv.setDown(false)
	h.waitFor("p2 ACTIVE once the server is back", func() bool { return srv.status("p2") == "ACTIVE" })
	h.waitFor("in sync", h.inSync)
}

func TestWiringFailureRetried(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	sw.failWrites = 2
	fl.fail = 0
	h := start(t, sw, fl, srv, testOpts(false))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 ACTIVE after retries", func() bool { return srv.status("p1") == "ACTIVE" })
	if sw.tag("tap1") != 1 {
		t.Errorf("tag = %d, want 1", sw.tag("tap1"))
	}
	fl.mu.Lock()
	fl.fail = 2
	fl.mu.Unlock()
	srv.addPort("p2", "net-a", "vxlan", 100, "fa:16:3e:00:00:02")
	sw.plug("p2", "tap2", "fa:16:3e:00:00:02")
	h.waitFor("p2 ACTIVE after failed bundles", func() bool { return srv.status("p2") == "ACTIVE" })
	if fl.owners("br-int")["port:p2"] == 0 {
		t.Errorf("p2 reported up without its flows")
	}
	h.waitFor("in sync", h.inSync)
}

// A restarted agent takes over: same tags, no Port write, no report storm,
// flows of the old round replaced in place and the rest swept once in sync.
func TestRestartAdoptsWithoutStorm(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	for i, id := range []string{"p1", "p2", "p3"} {
		srv.addPort(id, "net-a", "vxlan", 100, "fa:16:3e:00:00:0"+string(rune('1'+i)))
	}
	srv.addPort("p4", "net-b", "vxlan", 200, "fa:16:3e:00:00:04")
	h := start(t, sw, fl, srv, testOpts(true))
	sw.snapshot()
	for i, id := range []string{"p1", "p2", "p3", "p4"} {
		sw.plug(id, "tap"+id, "fa:16:3e:00:00:0"+string(rune('1'+i)))
	}
	h.waitFor("all ACTIVE", func() bool {
		return srv.status("p1") == "ACTIVE" && srv.status("p2") == "ACTIVE" && srv.status("p3") == "ACTIVE" && srv.status("p4") == "ACTIVE"
	})
	h.a.Notify(FDBAdd{Entries: FDBEntries{"net-a": {SegmentID: intp(100), NetworkType: "vxlan",
		Ports: map[string][][2]string{"192.0.2.2": {{floodMAC, "0.0.0.0"}, {"fa:16:3e:00:00:99", "10.0.0.99"}}}}}})
	h.waitFor("in sync with FDB", func() bool { return h.inSync() && fl.has("br-tun", "dl_dst=fa:16:3e:00:00:99") })
	h.stop()
	installed := fl.dump("br-tun")

	// The new process: same OVS, same server, flows now of an old round.
	fl.newRound()
	// A stale flow nobody will claim (e.g. a port deleted while we were down).
	fl.mu.Lock()
	fl.tables["br-int"]["stale"] = fakeEntry{flow: staleFlow()}
	fl.mu.Unlock()
	writes, calls := sw.writes, srv.calls()
	srv.mu.Lock()
	refreshBefore := srv.refreshCalls
	srv.mu.Unlock()

	opt2 := testOpts(true)
	opt2.FDBWait = time.Second // the sweep waits for net-a's FDB sent below; net-b has no peer
	h2 := start(t, sw, fl, srv, opt2)
	sw.snapshot()
	h2.waitFor("ports adopted", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return srv.refreshCalls > refreshBefore
	})
	// Until the FDB comes back, the old round's unicast flow must stay.
	if !fl.has("br-tun", "dl_dst=fa:16:3e:00:00:99") {
		t.Errorf("l2pop unicast flow swept before the FDB refresh arrived")
	}
	h2.a.Notify(FDBAdd{Entries: FDBEntries{"net-a": {SegmentID: intp(100), NetworkType: "vxlan",
		Ports: map[string][][2]string{"192.0.2.2": {{floodMAC, "0.0.0.0"}, {"fa:16:3e:00:00:99", "10.0.0.99"}}}}}})
	h2.waitFor("in sync after restart", h2.inSync)

	if sw.writes != writes {
		t.Errorf("restart wrote %d Port rows, want 0", sw.writes-writes)
	}
	srv.mu.Lock()
	newCalls := srv.udlCalls - calls
	var reported []string
	for _, up := range srv.udlUp[calls:] {
		reported = append(reported, up...)
	}
	srv.mu.Unlock()
	if newCalls > 1 || len(reported) > 2 {
		t.Errorf("restart sent %d update_device_list calls reporting %v; want one call with at most one port per tunnelled network", newCalls, reported)
	}
	for _, id := range []string{"p1", "p2", "p3", "p4"} {
		if srv.status(id) != "ACTIVE" || sw.tag("tap"+id) == DeadVLAN {
			t.Errorf("%s flapped: status %s tag %d", id, srv.status(id), sw.tag("tap"+id))
		}
	}
	if own := fl.owners("br-int"); own[""] != 0 {
		t.Errorf("%d stale flows left on br-int after sync: %v", own[""], own)
	}
	if got := fl.dump("br-tun"); strings.Join(got, "\n") != strings.Join(installed, "\n") {
		t.Errorf("br-tun after restart differs:\n got %v\nwant %v", got, installed)
	}
}

func staleFlow() openflow.Flow {
	return openflow.Flow{Table: 0, Priority: 3, Match: openflow.Match{openflow.InPort(99)}, Actions: []openflow.Action{openflow.Drop{}}}
}

func httpGet(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func intp(i int) *int { return &i }

func TestVswitchdRestartRestoresFlows(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	h := start(t, sw, fl, srv, testOpts(false))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("in sync", func() bool { return h.inSync() && srv.status("p1") == "ACTIVE" })
	want := fl.dump("br-int")
	wantTun := fl.dump("br-tun")
	calls := srv.calls()
	// The bridges are checked (SetupBridges waits for ovs-vswitchd to apply
	// its whole configuration: seconds at 1,000 ports) only once the flows
	// are back.
	flowsAtSetup := make(chan int, 4)
	sw.mu.Lock()
	setups := sw.setups
	sw.onSetup = func() { flowsAtSetup <- len(fl.dump("br-int")) }
	sw.mu.Unlock()

	fl.wipe()
	fl.events <- DataplaneEvent{Bridge: "br-int"}
	h.waitFor("flows restored", func() bool { return len(fl.dump("br-int")) == len(want) && len(fl.dump("br-tun")) == len(wantTun) })
	if strings.Join(fl.dump("br-int"), "\n") != strings.Join(want, "\n") {
		t.Errorf("br-int after vswitchd restart differs")
	}
	select {
	case n := <-flowsAtSetup:
		if n != len(want) {
			t.Errorf("bridges set up with %d of %d br-int flows back: the flows must go first", n, len(want))
		}
	case <-time.After(5 * time.Second):
		sw.mu.Lock()
		t.Errorf("bridges not set up again after ovs-vswitchd restart (%d setups, %d before)", sw.setups, setups)
		sw.mu.Unlock()
	}
	if srv.calls() != calls {
		t.Errorf("vswitchd restart reported ports again (%d calls)", srv.calls()-calls)
	}
	h.waitFor("in sync", h.inSync)
}

func TestRevivedResyncsAndRereportsLostPorts(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	opt := testOpts(false)
	opt.ReportInterval = 5 * time.Millisecond
	h := start(t, sw, fl, srv, opt)
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 ACTIVE", func() bool { return srv.status("p1") == "ACTIVE" })
	// The server lost its state: the port is DOWN there and it answers revived.
	srv.mu.Lock()
	d := srv.devices["p1"]
	d.Status = "DOWN"
	srv.devices["p1"] = d
	srv.answer = "revived"
	srv.mu.Unlock()
	h.waitFor("p1 ACTIVE again after resync", func() bool { return srv.status("p1") == "ACTIVE" })
	if !strings.Contains(scrape(t, h.m), `ovsagent_resyncs_total{reason="revived"} 1`) {
		t.Errorf("resync not counted")
	}
	srv.mu.Lock()
	if srv.startFlags != 1 {
		t.Errorf("start_flag sent %d times, want 1", srv.startFlags)
	}
	srv.mu.Unlock()
}

func TestL2popCreatesAndRemovesTunnels(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	h := start(t, sw, fl, srv, testOpts(true))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 ACTIVE", func() bool { return srv.status("p1") == "ACTIVE" })
	entries := FDBEntries{"net-a": {SegmentID: intp(100), NetworkType: "vxlan",
		Ports: map[string][][2]string{
			"192.0.2.2": {{floodMAC, "0.0.0.0"}, {"fa:16:3e:00:00:99", "10.0.0.99"}},
			"192.0.2.1": {{floodMAC, "0.0.0.0"}}, // our own IP: ignored
		}}}
	h.a.Notify(FDBAdd{Entries: entries})
	h.waitFor("tunnel port and flood flow", func() bool {
		return len(sw.Tunnels.Names()) == 1 && fl.has("br-tun", "table=22") && fl.has("br-tun", "dl_dst=fa:16:3e:00:00:99")
	})
	if sw.Tunnels.Names()[0] != "vxlan-c0000202" {
		t.Errorf("tunnel ports = %v", sw.Tunnels.Names())
	}
	h.a.Notify(FDBRemove{Entries: entries})
	h.waitFor("tunnel port and FDB flows gone", func() bool {
		return len(sw.Tunnels.Names()) == 0 && !fl.has("br-tun", "dl_dst=fa:16:3e:00:00:99")
	})
	// An entry for a network without local port is ignored.
	h.a.Notify(FDBAdd{Entries: FDBEntries{"net-x": {SegmentID: intp(7), Ports: map[string][][2]string{"192.0.2.9": {{floodMAC, "0.0.0.0"}}}}}})
	h.waitFor("in sync", h.inSync)
	if len(sw.Tunnels.Names()) != 0 {
		t.Errorf("tunnel created for an unknown network")
	}
}

func TestTunnelSyncRetriedAndEndpointsWithoutL2pop(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.TunnelServer.FailNext(2)
	srv.TunnelServer.SetEndpoints(TunnelEndpoint{IP: "192.0.2.5", Host: "hv5"})
	h := start(t, sw, fl, srv, testOpts(false))
	sw.snapshot()
	h.waitFor("tunnel to hv5", func() bool { return len(sw.Tunnels.Names()) == 1 })
	h.a.Notify(TunnelUpdate{IP: "192.0.2.6", Type: "vxlan"})
	h.a.Notify(TunnelUpdate{IP: "192.0.2.7", Type: "gre"}) // type not enabled
	h.waitFor("tunnel to hv6", func() bool { return len(sw.Tunnels.Names()) == 2 })
	h.a.Notify(TunnelDelete{IP: "192.0.2.5", Type: "vxlan"})
	h.waitFor("tunnel to hv5 gone", func() bool { return len(sw.Tunnels.Names()) == 1 })
	h.waitFor("in sync", h.inSync)
	if srv.TunnelServer.Calls() != 3 {
		t.Errorf("tunnel_sync calls = %d, want 3 (2 failures + success)", srv.TunnelServer.Calls())
	}
}

func TestExplainRunningAndOffline(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	h := start(t, sw, fl, srv, testOpts(false))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("in sync", func() bool { return h.inSync() && srv.status("p1") == "ACTIVE" })

	e, err := h.a.Explain(context.Background(), "p1")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := e.Write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"port p1", "network     net-a  type vxlan  segment 100", "local VLAN  1", "ofport 11", "br-tun", "table 4", "local VLAN of network net-a/100: VXLAN_TUN_TO_LV", "port wiring:"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
	if _, err := h.a.Explain(context.Background(), "nope"); err == nil {
		t.Errorf("explain of an unknown port succeeded")
	}

	srv.mu.Lock()
	dev := srv.devices["p1"]
	srv.mu.Unlock()
	sw.mu.Lock()
	vif := *sw.rows["tap1"]
	sw.mu.Unlock()
	off := ExplainOffline(testOpts(false), sw.layout, vif, dev)
	if off.LocalVLAN != 1 || len(off.Flows) != len(e.Flows) {
		t.Errorf("offline explanation: VLAN %d, %d flows; running: %d flows", off.LocalVLAN, len(off.Flows), len(e.Flows))
	}
}

func TestVLANNetworkOnPhysicalBridge(t *testing.T) {
	sw, fl, srv := newFakeSwitch(false), newFakeFlows(), newFakeServer()
	srv.addPort("v1", "net-v", "vlan", 1000, "fa:16:3e:00:00:0a")
	opt := testOpts(false)
	opt.TunnelTypes, opt.LocalIP, opt.Pipeline.TunnelTypes = nil, "", nil
	h := start(t, sw, fl, srv, opt)
	sw.snapshot()
	sw.plug("v1", "tapv1", "fa:16:3e:00:00:0a")
	h.waitFor("v1 ACTIVE", func() bool { return srv.status("v1") == "ACTIVE" })
	h.waitFor("in sync", h.inSync)
	if !fl.has("br-phys", "dl_vlan=1") || !fl.has("br-int", "dl_vlan=1000") {
		t.Errorf("VLAN translation flows missing:\nbr-phys %v\nbr-int %v", fl.dump("br-phys"), fl.dump("br-int"))
	}
}

func TestStopLeavesDataplane(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	h := start(t, sw, fl, srv, testOpts(false))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("in sync", func() bool { return h.inSync() && srv.status("p1") == "ACTIVE" })
	before := fl.dump("br-int")
	t0 := time.Now()
	h.stop()
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("stop took %v", d)
	}
	if strings.Join(fl.dump("br-int"), "\n") != strings.Join(before, "\n") || sw.tag("tap1") != 1 || srv.status("p1") != "ACTIVE" {
		t.Errorf("stopping changed the dataplane or the port status")
	}
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	s, err := metrics.Listen("127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Serve(ctx, nil); close(done) }()
	defer func() { cancel(); <-done }()
	resp, err := httpGet("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestOVSFirewallFlowsFollowSecurityGroups(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	p22 := 22
	srv.groups["sg1"] = firewall.SecurityGroup{ID: "sg1", Rules: []firewall.Rule{
		{ID: "r1", Direction: firewall.Ingress, EtherType: firewall.IPv4, Protocol: "tcp", PortRangeMin: &p22, PortRangeMax: &p22},
	}}
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	srv.update("p1", func(d *Device) { d.SecurityGroups = []string{"sg1"} })
	opt := testOpts(false)
	opt.Pipeline.FirewallDriver, opt.Pipeline.EnableSecurityGroup = "openvswitch", true
	h := start(t, sw, fl, srv, opt)
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 ACTIVE and in sync", func() bool { return srv.status("p1") == "ACTIVE" && h.inSync() })
	own := fl.owners("br-int")
	if own["fw:port:p1"] == 0 || own["fw:base"] == 0 {
		t.Fatalf("firewall owners missing: %v", own)
	}
	if !fl.has("br-int", "tp_dst=22") {
		t.Errorf("no flow for the tcp/22 rule:\n%s", strings.Join(fl.dump("br-int"), "\n"))
	}
	p80 := 80
	srv.mu.Lock()
	srv.groups["sg1"] = firewall.SecurityGroup{ID: "sg1", Rules: []firewall.Rule{
		{ID: "r2", Direction: firewall.Ingress, EtherType: firewall.IPv4, Protocol: "tcp", PortRangeMin: &p80, PortRangeMax: &p80},
	}}
	srv.mu.Unlock()
	h.a.Notify(SecurityGroupChanged{GroupIDs: []string{"sg1"}})
	h.waitFor("rule change applied", func() bool { return fl.has("br-int", "tp_dst=80") && !fl.has("br-int", "tp_dst=22") })
	// Port removed: every firewall flow of it goes.
	sw.unplug("tap1")
	h.waitFor("port flows gone", func() bool { return fl.owners("br-int")["fw:port:p1"] == 0 && srv.status("p1") == "DOWN" })
}

// While a port's up is with the server, the loop keeps wiring other ports,
// and a later down for the same port waits for the up's reply.
func TestReportsOffTheLoopKeepPerPortOrder(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	srv.addPort("p2", "net-a", "vxlan", 100, "fa:16:3e:00:00:02")
	gate := make(chan struct{})
	srv.gate = gate
	h := start(t, sw, fl, srv, testOpts(false))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 wired while its report is out", func() bool { return sw.tag("tap1") == 1 && fl.owners("br-int")["port:p1"] > 0 })
	sw.plug("p2", "tap2", "fa:16:3e:00:00:02")
	h.waitFor("p2 wired while p1's report is out", func() bool { return sw.tag("tap2") == 1 && fl.owners("br-int")["port:p2"] > 0 })
	sw.unplug("tap1")
	h.waitFor("p1's flows gone", func() bool { return fl.owners("br-int")["port:p1"] == 0 })
	close(gate) // the server answers everything from now on
	h.waitFor("p1 DOWN, p2 ACTIVE, in sync", func() bool {
		return srv.status("p1") == "DOWN" && srv.status("p2") == "ACTIVE" && h.inSync()
	})
}

// Tunnel ports found on br-tun at start are taken over at once (their
// table-0 flows are ours from the first bundle); with l2pop, one no FDB
// claims goes after the first sync.
func TestTunnelPortsAdoptedAtStart(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	sw.Tunnels.Add(TunnelPort{Name: "vxlan-c0000209", Type: "vxlan", RemoteIP: "192.0.2.9", LocalIP: "192.0.2.1", OFPort: 9})
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	<-sw.events // the plug event: the snapshot below carries the port
	opt := testOpts(true)
	opt.FDBWait = 300 * time.Millisecond
	h := start(t, sw, fl, srv, opt)
	sw.snapshot()
	h.waitFor("p1 ACTIVE", func() bool { return srv.status("p1") == "ACTIVE" })
	if !fl.has("br-tun", "in_port=9") || h.inSync() {
		t.Errorf("adopted tunnel port has no table-0 flow before the sweep (in sync %v):\n%s", h.inSync(), strings.Join(fl.dump("br-tun"), "\n"))
	}
	h.waitFor("in sync and the unclaimed tunnel port deleted", func() bool { return h.inSync() && len(sw.Tunnels.Names()) == 0 })
	if fl.has("br-tun", "in_port=9") {
		t.Errorf("flows of the deleted tunnel port left")
	}
}

// Without l2pop, tunnel ports found at start survive a failing tunnel_sync.
func TestTunnelPortsKeptWhileTunnelSyncFails(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	sw.Tunnels.Add(TunnelPort{Name: "vxlan-c0000209", Type: "vxlan", RemoteIP: "192.0.2.9", LocalIP: "192.0.2.1", OFPort: 9})
	srv.TunnelServer.FailNext(3)
	srv.TunnelServer.SetEndpoints(TunnelEndpoint{IP: "192.0.2.9", Host: "hv9"})
	h := start(t, sw, fl, srv, testOpts(false))
	sw.snapshot()
	h.waitFor("tunnel_sync answered and in sync", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return srv.TunnelServer.Calls() == 4 && h.inSync()
	})
	if len(sw.Tunnels.Names()) != 1 || !fl.has("br-tun", "in_port=9") {
		t.Errorf("tunnel port lost while tunnel_sync failed: %v", sw.Tunnels.Names())
	}
}

// A VXLAN and a GRE network with ports on the same remote host: neutron's
// vxlan-X and gre-X side by side, each network's flows on its own port, and
// each removed with the last entry of its type.
func TestL2popTunnelsOfTwoTypesToOneHost(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	srv.addPort("p2", "net-g", "gre", 200, "fa:16:3e:00:00:02")
	opt := testOpts(true)
	opt.TunnelTypes = []string{"vxlan", "gre"}
	opt.Pipeline.TunnelTypes = []pipeline.NetworkType{pipeline.TypeVXLAN, pipeline.TypeGRE}
	h := start(t, sw, fl, srv, opt)
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	sw.plug("p2", "tap2", "fa:16:3e:00:00:02")
	h.waitFor("ports ACTIVE", func() bool { return srv.status("p1") == "ACTIVE" && srv.status("p2") == "ACTIVE" })
	vx := FDBEntries{"net-a": {SegmentID: intp(100), NetworkType: "vxlan",
		Ports: map[string][][2]string{"192.0.2.2": {{floodMAC, "0.0.0.0"}, {"fa:16:3e:00:00:98", "10.0.0.98"}}}}}
	gre := FDBEntries{"net-g": {SegmentID: intp(200), NetworkType: "gre",
		Ports: map[string][][2]string{"192.0.2.2": {{floodMAC, "0.0.0.0"}, {"fa:16:3e:00:00:99", "10.0.1.99"}}}}}
	h.a.Notify(FDBAdd{Entries: vx})
	h.a.Notify(FDBAdd{Entries: gre})
	h.waitFor("both tunnel ports and both networks' unicast flows", func() bool {
		return strings.Join(sw.Tunnels.Names(), ",") == "gre-c0000202,vxlan-c0000202" &&
			fl.has("br-tun", "dl_dst=fa:16:3e:00:00:98") && fl.has("br-tun", "dl_dst=fa:16:3e:00:00:99")
	})
	h.waitFor("in sync", h.inSync)
	if got := strings.Join(sw.Tunnels.Names(), ","); got != "gre-c0000202,vxlan-c0000202" {
		t.Errorf("tunnel ports after sync = %s", got)
	}
	h.a.Notify(FDBRemove{Entries: gre})
	h.waitFor("gre port gone, vxlan kept", func() bool {
		return strings.Join(sw.Tunnels.Names(), ",") == "vxlan-c0000202" && !fl.has("br-tun", "dl_dst=fa:16:3e:00:00:99")
	})
	if !fl.has("br-tun", "dl_dst=fa:16:3e:00:00:98") {
		t.Errorf("vxlan unicast flow lost with the gre entry")
	}
}

// Without l2pop, tunnel_sync of each type names the same hosts: one port per
// host and type (the reference creates vxlan-X, gre-X for every endpoint).
func TestTunnelSyncOfTwoTypesWithoutL2pop(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.TunnelServer.SetEndpoints(TunnelEndpoint{IP: "192.0.2.5", Host: "hv5"})
	opt := testOpts(false)
	opt.TunnelTypes = []string{"vxlan", "gre"}
	opt.Pipeline.TunnelTypes = []pipeline.NetworkType{pipeline.TypeVXLAN, pipeline.TypeGRE}
	h := start(t, sw, fl, srv, opt)
	sw.snapshot()
	h.waitFor("vxlan and gre ports to hv5", func() bool {
		return strings.Join(sw.Tunnels.Names(), ",") == "gre-c0000205,vxlan-c0000205"
	})
	h.a.Notify(TunnelDelete{IP: "192.0.2.5", Type: "gre"})
	h.waitFor("gre port gone", func() bool { return strings.Join(sw.Tunnels.Names(), ",") == "vxlan-c0000205" })
}

// After a restart the l2pop refresh (update_device_list with
// refresh_tunnels, carried by a port the server already has ACTIVE) goes
// out before the batch's flows are applied, so that its round trip runs
// beside the bundle instead of after it: the first sync waits for its reply.
func TestRestartRefreshBeforeBundle(t *testing.T) {
	sw, fl, srv := wiredThenStopped(t, "p1", "p2")
	fl.newRound()

	refreshOut := make(chan struct{})
	var once sync.Once
	srv.mu.Lock()
	srv.onUDLStart = func(refresh bool) {
		if refresh {
			once.Do(func() { close(refreshOut) })
		}
	}
	srv.mu.Unlock()
	var late []string
	fl.mu.Lock()
	fl.onApply = func(br string) {
		select {
		case <-refreshOut:
		case <-time.After(2 * time.Second):
			late = append(late, br)
		}
	}
	fl.mu.Unlock()

	h2 := start(t, sw, fl, srv, testOpts(true))
	sw.snapshot()
	h2.waitFor("in sync after restart", h2.inSync)
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if len(late) > 0 {
		t.Errorf("bundles on %v applied while the l2pop refresh was not out yet", late)
	}
	if srv.status("p1") != "ACTIVE" {
		t.Errorf("p1 not ACTIVE after the restart")
	}
}

// At a start with ports, tunnel_sync is out while the ports' details are
// pulled: the two wait on the server side by side, not one after the other.
func TestTunnelSyncBesideDetails(t *testing.T) {
	sw, fl, srv := wiredThenStopped(t, "p1")

	detailsOut := make(chan struct{})
	var once sync.Once
	alone := make(chan bool, 4)
	srv.TunnelServer.OnCall = func() {
		select {
		case <-detailsOut:
			alone <- false
		case <-time.After(2 * time.Second):
			alone <- true
		}
	}
	srv.mu.Lock()
	srv.onDevices = func() { once.Do(func() { close(detailsOut) }) }
	srv.mu.Unlock()
	h2 := start(t, sw, fl, srv, testOpts(true))
	sw.snapshot()
	h2.waitFor("in sync after restart", h2.inSync)
	if <-alone {
		t.Error("tunnel_sync was answered before the details were asked for")
	}
}

// wiredThenStopped runs an agent (l2pop on) until the ports, all on one
// VXLAN network, are ACTIVE and it is in sync, then stops it: the dataplane
// and server a restart finds.
func wiredThenStopped(t *testing.T, ids ...string) (*fakeSwitch, *fakeFlows, *fakeServer) {
	t.Helper()
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	for i, id := range ids {
		srv.addPort(id, "net-a", "vxlan", 100, fmt.Sprintf("fa:16:3e:00:01:%02x", i))
	}
	h := start(t, sw, fl, srv, testOpts(true))
	sw.snapshot()
	for i, id := range ids {
		sw.plug(id, "tap"+id, fmt.Sprintf("fa:16:3e:00:01:%02x", i))
	}
	h.waitFor("all ACTIVE", func() bool {
		for _, id := range ids {
			if srv.status(id) != "ACTIVE" {
				return false
			}
		}
		return true
	})
	h.waitFor("in sync", h.inSync)
	h.stop()
	return sw, fl, srv
}
