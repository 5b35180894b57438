//go:build integration

package neutron_test

// Interop against the real neutron-server and RabbitMQ that refenv runs (CI starts them;
// these tests fail, never skip, without them). Each run uses its own host name.

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/neutron"
	"github.com/ovsagent/ovsagent/internal/neutron/neutrontest"
	"github.com/ovsagent/ovsagent/internal/oslo"
)

type fdbRecorder struct {
	mu   sync.Mutex
	adds []neutron.FDBEntries
	c    chan struct{}
}

func (r *fdbRecorder) TunnelUpdate(context.Context, neutron.TunnelEvent) error { return nil }
func (r *fdbRecorder) TunnelDelete(context.Context, neutron.TunnelEvent) error { return nil }
func (r *fdbRecorder) FDBRemove(context.Context, neutron.FDBEntries) error     { return nil }
func (r *fdbRecorder) FDBUpdate(context.Context, neutron.FDBUpdate) error      { return nil }
func (r *fdbRecorder) FDBAdd(_ context.Context, e neutron.FDBEntries) error {
	r.mu.Lock()
	r.adds = append(r.adds, e)
	r.mu.Unlock()
	select {
	case r.c <- struct{}{}:
	default:
	}
	return nil
}

// testConfigurations is what a netdev host with br-int, br-phys and vxlan reports.
// tunneling_ip is loopback, which every agent on this machine treats as its own IP, so
// the l2pop entries our port triggers change nothing on the e2e agent's dataplane.
func testConfigurations() neutron.AgentConfigurations {
	return neutron.AgentConfigurations{
		BridgeMappings:                                    map[string]string{"physnet1": "br-phys"},
		ResourceProviderInventoryDefaults:                 neutron.DefaultInventoryDefaults,
		ResourceProviderPacketProcessingInventoryDefaults: neutron.DefaultInventoryDefaults,
		ResourceProviderHypervisors:                       map[string]string{"br-phys": "vm"},
		IntegrationBridge:                                 "br-int",
		TunnelTypes:                                       []string{"vxlan"},
		TunnelingIP:                                       "127.0.0.1",
		L2Population:                                      true,
		DatapathType:                                      "netdev",
		OVSCapabilities: neutron.OVSCapabilities{
			DatapathTypes: []string{"netdev", "system"},
			IfaceTypes:    []string{"geneve", "gre", "internal", "patch", "system", "tap", "vxlan"},
		},
		VhostuserSocketDir: "/var/run/openvswitch",
	}
}

type agentUnderTest struct {
	host     string
	tr       *oslo.Transport
	client   *neutron.Client
	cache    *neutron.Cache
	events   *neutron.EventQueue
	handler  *fdbRecorder
	reporter *neutron.Reporter
}

func startAgent(t *testing.T, ctx context.Context) *agentUnderTest {
	t.Helper()
	u, err := oslo.ParseTransportURL(neutrontest.TransportURL())
	if err != nil {
		t.Fatal(err)
	}
	a := &agentUnderTest{host: neutrontest.UniqueHost("hv-test"), events: neutron.NewEventQueue(), handler: &fdbRecorder{c: make(chan struct{}, 1)}}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	a.tr, err = oslo.Dial(dctx, oslo.Config{URL: u, Host: a.host, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.tr.Close() })
	rpc := neutron.Oslo{T: a.tr}
	a.client = neutron.NewClient(rpc, a.host)
	a.client.Timeout = 30 * time.Second
	// A call waits for the broker connection (Dial does not), so a broker that is still
	// starting is waited for; consumers are then declared at once by Serve.
	actx, acancel := context.WithTimeout(ctx, 60*time.Second)
	defer acancel()
	if alive, err := a.client.HasAliveNeutronServer(actx); err != nil || !alive {
		t.Fatalf("has_alive_neutron_server via %s = %v, %v", neutrontest.TransportURL(), alive, err)
	}
	a.cache = neutron.NewCache(neutron.CacheOptions{OnEvent: a.events.Push, Puller: a.client})
	cfg := neutron.ConsumerConfig{Host: a.host, Cache: a.cache, Handler: a.handler, L2Population: true}
	if err := cfg.Serve(rpc); err != nil {
		t.Fatal(err)
	}
	a.reporter = &neutron.Reporter{Client: a.client, Interval: 30 * time.Second,
		Configurations: func() (neutron.AgentConfigurations, bool) { return testConfigurations(), true }}
	return a
}

func TestInteropRealServer(t *testing.T) {
	api := neutrontest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	t0 := time.Now()
	a := startAgent(t, ctx)
	t.Logf("transport up and consumers declared in %v", time.Since(t0).Round(time.Millisecond))
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		if err := api.DeleteAgentsOnHost(cctx, a.host); err != nil {
			t.Logf("cleanup agents: %v", err)
		}
	})

	// report_state makes us an "Open vSwitch agent" the ML2 driver can bind to.
	res, err := a.reporter.ReportOnce(ctx)
	if err != nil || res != neutron.ReportNew {
		t.Fatalf("report_state = %q, %v", res, err)
	}
	agents, err := api.Agents(ctx, url.Values{"host": {a.host}})
	if err != nil || len(agents) != 1 {
		t.Fatalf("agents on %s: %+v %v", a.host, agents, err)
	}
	ag := agents[0]
	if ag.AgentType != "Open vSwitch agent" || ag.Binary != "neutron-openvswitch-agent" || !ag.Alive || ag.Topic != "N/A" {
		t.Fatalf("agent %+v", ag)
	}
	if ag.Configurations["datapath_type"] != "netdev" || ag.Configurations["integration_bridge"] != "br-int" {
		t.Fatalf("configurations %v", ag.Configurations)
	}
	if res, err := a.reporter.ReportOnce(ctx); err != nil || res != neutron.ReportAlive {
		t.Fatalf("second report_state = %q, %v", res, err)
	}
	t.Logf("agent %s registered: alive=%v at %v", a.host, ag.Alive, time.Since(t0).Round(time.Millisecond))

	// A port bound to our host arrives by push, with its binding segment.
	net, err := api.CreateNetwork(ctx, "interop-"+a.host, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.DeleteNetwork(context.Background(), net.ID) })
	if _, err := api.CreateSubnet(ctx, net.ID, "10.199.0.0/24"); err != nil {
		t.Fatal(err)
	}
	port, err := api.CreatePort(ctx, net.ID, "interop-port", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.DeletePort(context.Background(), port.ID) })
	start := time.Now()
	t.Logf("network and port created at %v", time.Since(t0).Round(time.Millisecond))
	bound, err := api.UpdatePort(ctx, port.ID, map[string]any{"binding:host_id": a.host})
	if err != nil {
		t.Fatal(err)
	}
	if bound.VIFType != "ovs" {
		t.Fatalf("port not bound by ML2 openvswitch: vif_type %q", bound.VIFType)
	}
	var cached *neutron.Port
	var sawEvent bool
	for cached == nil {
		select {
		case <-a.events.C():
			for _, ev := range a.events.Drain() {
				if ev.Type == neutron.TypePort && ev.ID == port.ID && ev.Kind == neutron.Updated {
					sawEvent = true
				}
			}
			if p := a.cache.Port(port.ID); p != nil && p.Segment() != nil {
				cached = p
			}
		case <-ctx.Done():
			t.Fatalf("port %s never pushed with a binding segment (cached: %+v)", port.ID, a.cache.Port(port.ID))
		}
	}
	t.Logf("bound port pushed %v after the binding update", time.Since(start).Round(time.Millisecond))
	seg := cached.Segment()
	if !sawEvent || seg.NetworkType != net.NetworkType || seg.SegmentationID == nil || *seg.SegmentationID != *net.SegmentationID {
		t.Fatalf("segment %+v, network %+v, event %v", seg, net, sawEvent)
	}
	if b := cached.ActiveBinding(); b == nil || b.Host != a.host || b.VIFType != "ovs" || b.VIFDetails.Get("datapath_type") != "netdev" {
		t.Fatalf("binding %+v", b)
	}
	d, err := a.cache.DeviceDetails(port.ID, a.host)
	if err != nil || !d.Bound || d.SegmentationID == nil || *d.SegmentationID != *net.SegmentationID || d.MACAddress != port.MACAddress {
		t.Fatalf("device details %+v %v", d, err)
	}

	// bulk_pull returns it too.
	rs, err := a.client.BulkPull(ctx, neutron.TypePort, neutron.Filter{"id": {port.ID}})
	if err != nil || len(rs) != 1 {
		t.Fatalf("bulk_pull: %v %v", rs, err)
	}
	if p := rs[0].(*neutron.Port); p.Segment() == nil || p.Segment().ID != seg.ID {
		t.Fatalf("bulk_pull port %+v", p)
	}
	byNet, err := a.client.BulkPull(ctx, neutron.TypePort, neutron.Filter{"network_id": {net.ID}})
	if err != nil || len(byNet) != 1 || byNet[0].ResourceID() != port.ID {
		t.Fatalf("bulk_pull by network_id: %v %v", byNet, err)
	}
	nets, err := a.client.BulkPull(ctx, neutron.TypeNetwork, neutron.Filter{"id": {net.ID}})
	if err != nil || len(nets) != 1 || nets[0].(*neutron.Network).MTU != net.MTU {
		t.Fatalf("bulk_pull network: %v %v", nets, err)
	}
	nd, err := a.client.GetNetworkDetails(ctx, net.ID)
	if err != nil || nd.ID != net.ID || nd.NetworkType != net.NetworkType {
		t.Fatalf("get_network_details %+v %v", nd, err)
	}

	// update_device_list turns it ACTIVE, and l2pop announces it.
	udl, err := a.client.UpdateDeviceList(ctx, []string{port.ID}, nil, true)
	if err != nil || len(udl.DevicesUp) != 1 || udl.DevicesUp[0] != port.ID || len(udl.FailedDevicesUp) != 0 {
		t.Fatalf("update_device_list %+v %v", udl, err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if p, err := api.WaitPortStatus(wctx, port.ID, "ACTIVE"); err != nil {
		t.Fatalf("port not ACTIVE: %v (%+v)", err, p)
	}
	t.Logf("port %s ACTIVE at %v", port.ID, time.Since(t0).Round(time.Millisecond))

	// l2pop fans out the first active port of a network on a host, flooding entry first.
	for announced := false; !announced; {
		a.handler.mu.Lock()
		for _, e := range a.handler.adds {
			nf, ok := e[net.ID]
			if !ok {
				continue
			}
			entries := nf.Ports["127.0.0.1"]
			if nf.SegmentID == nil || *nf.SegmentID != *net.SegmentationID || len(entries) < 2 || !entries[0].IsFlooding() {
				continue
			}
			for _, pi := range entries[1:] {
				if pi.MAC == port.MACAddress && len(port.FixedIPs) > 0 && pi.IP == port.FixedIPs[0].IPAddress {
					announced = true
				}
			}
		}
		a.handler.mu.Unlock()
		if announced {
			break
		}
		select {
		case <-a.handler.c:
		case <-wctx.Done():
			t.Fatalf("no add_fdb_entries for port %s (got %+v)", port.ID, a.handler.adds)
		}
	}
	t.Logf("l2pop add_fdb_entries received for the port")

	// update_device_down takes it DOWN again.
	dd, err := a.client.UpdateDeviceDown(ctx, port.ID)
	if err != nil || !dd.Exists || dd.Device != port.ID {
		t.Fatalf("update_device_down %+v %v", dd, err)
	}
	if _, err := api.WaitPortStatus(wctx, port.ID, "DOWN"); err != nil {
		t.Fatal(err)
	}

	// Deleting the port reaches the cache as a delete.
	if err := api.DeletePort(ctx, port.ID); err != nil {
		t.Fatal(err)
	}
	for deleted := false; !deleted; {
		select {
		case <-a.events.C():
			for _, ev := range a.events.Drain() {
				if ev.Type == neutron.TypePort && ev.ID == port.ID && ev.Kind == neutron.Deleted {
					deleted = true
					if ev.Old == nil {
						t.Error("delete event without the old port")
					}
					got := neutron.Synthesize(ev)
					if len(got) == 0 || got[0].Kind != neutron.PortDelete {
						t.Errorf("synthesised %+v", got)
					}
				}
			}
		case <-ctx.Done():
			t.Fatal("port delete never pushed")
		}
	}
	if a.cache.Port(port.ID) != nil || !a.cache.IsDeleted(neutron.TypePort, port.ID) {
		t.Fatal("deleted port still cached")
	}
	t.Logf("port delete pushed; total %v", time.Since(t0).Round(time.Millisecond))
	fmt.Fprintln(os.Stderr, "interop: agent", a.host, "report/push/bulk_pull/update_device_list OK")
}
