package dvr

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/neutron"
	of "github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/testing/fakes"
)

type subnetCall struct {
	subnet   string
	fixedIPs []neutron.DVRFixedIP
}

// fakeRPC answers as the server did in the capture.
type fakeRPC struct {
	me          neutron.DVRHostMAC
	list        []neutron.DVRHostMAC
	subnets     map[string]neutron.DVRSubnet
	fail        error
	calls       []string
	subnetCalls []subnetCall
}

func (r *fakeRPC) GetDVRMACAddressByHost(context.Context) (neutron.DVRHostMAC, error) {
	r.calls = append(r.calls, "get_dvr_mac_address_by_host")
	return r.me, r.fail
}
func (r *fakeRPC) GetDVRMACAddressList(context.Context) ([]neutron.DVRHostMAC, error) {
	r.calls = append(r.calls, "get_dvr_mac_address_list")
	return r.list, r.fail
}
func (r *fakeRPC) GetSubnetForDVR(_ context.Context, id string, ips []neutron.DVRFixedIP) (neutron.DVRSubnet, bool, error) {
	r.calls = append(r.calls, "get_subnet_for_dvr")
	r.subnetCalls = append(r.subnetCalls, subnetCall{id, ips})
	s, ok := r.subnets[id]
	return s, ok, r.fail
}

// featureFixture builds, from a capture, the feature as the agent would feed
// it (ports wired with their network's local VLAN, the cache's ports, the
// server's answers) and the golden State of the same capture.
func featureFixture(t *testing.T, dir, hv, host string) (*Feature, *fakes.Host, *fakeRPC, *State) {
	t.Helper()
	hvDir := filepath.Join(dir, hv)
	golden := captureState(t, dir, hvDir, host)
	intP, tunP, physP := ofports(t, hvDir, "br-int"), ofports(t, hvDir, "br-tun"), ofports(t, hvDir, "br-phys")
	h := &fakes.Host{Clock: time.Unix(0, 0), Bridges: feature.BridgeLayout{Integration: "br-int", Tunnel: "br-tun",
		PatchTun: intP["patch-tun"], PatchInt: tunP["patch-int"],
		Physical: map[string]feature.PhysBridge{"physnet1": {Bridge: "br-phys", IntOFPort: intP["int-br-phys"], PhyOFPort: physP["phy-br-phys"]}}}}

	rpc := &fakeRPC{subnets: map[string]neutron.DVRSubnet{}}
	for _, l := range strings.Split(strings.TrimSpace(string(read(t, dir, "dvr_host_macs.txt"))), "\n") {
		hn, m, _ := strings.Cut(l, "\t")
		e := neutron.DVRHostMAC{Host: hn, MAC: m}
		rpc.list = append(rpc.list, e)
		if hn == host {
			rpc.me = e
		}
	}
	for id, s := range golden.Subnets {
		ds := neutron.DVRSubnet{ID: id, NetworkID: s.NetworkID, CIDR: s.CIDR.String()}
		if s.GatewayIP.IsValid() {
			g := s.GatewayIP.String()
			ds.GatewayIP = &g
		}
		if s.GatewayMAC != nil {
			m := s.GatewayMAC.String()
			ds.GatewayMAC = &m
		}
		rpc.subnets[id] = ds
	}

	var ports struct{ Ports []apiPort }
	if err := json.Unmarshal(read(t, dir, "api-ports.json"), &ports); err != nil {
		t.Fatal(err)
	}
	cache := map[string]*neutron.Port{}
	for _, p := range ports.Ports {
		np := &neutron.Port{ID: p.ID, NetworkID: p.NetworkID, MACAddress: p.MAC, DeviceOwner: p.DeviceOwner}
		for _, ip := range p.FixedIPs {
			np.FixedIPs = append(np.FixedIPs, neutron.IPAllocation{SubnetID: ip.SubnetID, IPAddress: ip.IP})
		}
		for _, ap := range p.Pairs {
			np.AllowedAddressPairs = append(np.AllowedAddressPairs, neutron.AllowedAddressPair{IPAddress: ap.IP, MACAddress: ap.MAC})
		}
		cache[p.ID] = np
	}
	f := NewFeature(Deps{RPC: rpc, Port: func(id string) *neutron.Port { return cache[id] }})
	f.Attach(h)
	for _, p := range ports.Ports {
		ofp, ok := intP["tap"+p.ID[:11]]
		if !ok {
			continue
		}
		nw := golden.Networks[p.NetworkID]
		fp := feature.Port{ID: p.ID, Name: "tap" + p.ID[:11], OFPort: ofp, MAC: p.MAC, Wiring: feature.WiredUp,
			LocalVLAN: nw.LocalVLAN, NetworkID: p.NetworkID, NetworkType: nw.Type,
			PhysicalNetwork: nw.PhysicalNetwork, DeviceOwner: p.DeviceOwner}
		if nw.Type == "vlan" {
			seg := int(nw.SegmentationID)
			fp.SegmentationID = &seg
		}
		f.PortWired(fp)
	}
	return f, h, rpc, golden
}

func featureFlows(t *testing.T, f *Feature) map[string][]string {
	t.Helper()
	out, errs := f.Flows(f.Owners())
	if len(errs) != 0 {
		t.Fatalf("Flows: %v", errs)
	}
	r := map[string][]string{}
	for br, fs := range out[Owner] {
		r[br] = render(fs)
	}
	return r
}

// The feature, fed as the agent feeds it and answered as the server answered,
// decides what Flows decides from the capture's state: the golden flows (but
// br-int's int-br-<phys> drop, which the base pipeline owns).
func TestFeatureAgainstCaptures(t *testing.T) {
	cases := []struct{ dir, hv, host string }{
		{"testdata/2026.2-two-hosts", "hv1", "refhv-2026-2-dvr"},
		{"testdata/2026.2-two-hosts", "hv2", "refhv-2026-2-dvr-hv2"},
		{"testdata/2026.2-one-host", "hv1", "refhv-2026-2-dvr"},
		{"testdata/2026.2-three-hosts", "hv1", "refhv-2026-2-dvr"},
		{"testdata/2026.2-three-hosts", "hv2", "refhv-2026-2-dvr-hv2"},
		{"testdata/2026.2-three-hosts", "hv3", "refhv-2026-2-dvr-hv3"},
		{"testdata/2026.2-three-hosts-vlan", "hv1", "refhv-2026-2-dvr"},
		{"testdata/2026.2-three-hosts-vlan", "hv2", "refhv-2026-2-dvr-hv2"},
		{"testdata/2026.2-three-hosts-vlan", "hv3", "refhv-2026-2-dvr-hv3"},
		{"testdata/2026.2-three-hosts-gre", "hv1", "refhv-2026-2-dvr"},
		{"testdata/2026.2-three-hosts-gre", "hv2", "refhv-2026-2-dvr-hv2"},
		{"testdata/2026.2-three-hosts-gre", "hv3", "refhv-2026-2-dvr-hv3"},
		{"testdata/2026.2-three-hosts-geneve", "hv1", "refhv-2026-2-dvr"},
		{"testdata/2026.2-three-hosts-geneve", "hv2", "refhv-2026-2-dvr-hv2"},
		{"testdata/2026.2-three-hosts-geneve", "hv3", "refhv-2026-2-dvr-hv3"},
		{"testdata/2026.2-three-hosts-v6", "hv1", "refhv-2026-2-dvr"},
		{"testdata/2026.2-three-hosts-v6", "hv2", "refhv-2026-2-dvr-hv2"},
		{"testdata/2026.2-three-hosts-v6", "hv3", "refhv-2026-2-dvr-hv3"},
	}
	for _, c := range cases {
		t.Run(c.dir[9:]+"/"+c.hv, func(t *testing.T) {
			f, h, rpc, golden := featureFixture(t, c.dir, c.hv, c.host)
			if f.InDistributedMode() {
				t.Fatal("in distributed mode before the server answered")
			}
			if got := featureFlows(t, f); len(got) != 0 {
				t.Fatalf("flows before this host's DVR MAC is known: %v", got)
			}
			h.Reset()
			if err := f.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			if !h.AnyTouched() {
				t.Fatal("Sync learnt the MACs and subnets but touched nothing")
			}
			conf := map[string]any{}
			f.Configurations(conf)
			if conf["in_distributed_mode"] != true {
				t.Fatalf("configurations %v", conf)
			}
			if rpc.calls[0] != "get_dvr_mac_address_by_host" || rpc.calls[1] != "get_dvr_mac_address_list" {
				t.Fatalf("calls %v", rpc.calls)
			}
			for _, sc := range rpc.subnetCalls {
				// a router interface passes its fixed_ips, a csnat port None
				isRI := false
				for _, p := range golden.Ports {
					if p.Kind == KindRouterInterface && len(p.FixedIPs) > 0 && p.FixedIPs[0].SubnetID == sc.subnet {
						isRI = true
					}
				}
				if isRI != (sc.fixedIPs != nil) {
					t.Errorf("get_subnet_for_dvr(%s, %v): router interface %v", sc.subnet, sc.fixedIPs, isRI)
				}
			}
			want, err := Flows(golden)
			if err != nil {
				t.Fatal(err)
			}
			var wantInt []of.Flow
			for _, fl := range want.Int {
				if fl.Table == 0 && fl.Priority == 2 && len(fl.Actions) == 0 {
					continue
				}
				wantInt = append(wantInt, fl)
			}
			got := featureFlows(t, f)
			for br, w := range map[string][]string{"br-int": render(wantInt), "br-tun": render(want.Tun), "br-phys": render(want.Phys["br-phys"])} {
				if strings.Join(got[br], "\n") != strings.Join(w, "\n") {
					t.Errorf("%s:\n got %d flows:\n%s\nwant %d:\n%s", br, len(got[br]), strings.Join(got[br], "\n"), len(w), strings.Join(w, "\n"))
				}
			}
			// a second Sync asks nothing again
			n := len(rpc.calls)
			if err := f.Sync(context.Background()); err != nil || len(rpc.calls) != n {
				t.Fatalf("second Sync: %v, calls %v", err, rpc.calls[n:])
			}
		})
	}
}

// dvr_mac_address_update, as the server casts it, reaches the loop through
// Notify and changes the other hosts' flows; ignored before this host's MAC.
func TestFeatureMACUpdate(t *testing.T) {
	f, h, _, _ := featureFixture(t, "testdata/2026.2-two-hosts", "hv1", "refhv-2026-2-dvr")
	eps := f.Endpoints()
	if len(eps) != 1 || eps[0].Version != "1.0" || eps[0].Namespace != "" {
		t.Fatalf("endpoints %+v", eps)
	}
	call := func(args string) {
		t.Helper()
		if _, err := eps[0].Methods["dvr_mac_address_update"](context.Background(), &neutron.Request{Method: "dvr_mac_address_update", Args: json.RawMessage(args)}); err != nil {
			t.Fatal(err)
		}
		evs := h.Events()
		if len(evs) == 0 {
			t.Fatal("no Notify")
		}
		f.HandleEvent(evs[len(evs)-1])
	}
	h.Reset()
	upd := `{"dvr_macs": [{"host": "refhv-2026-2-dvr", "mac_address": "FA-16-3F-8E-8E-11"}, {"host": "hv9", "mac_address": "FA-16-3F-00-00-99"}]}`
	call(upd)
	if f.others != nil || h.AnyTouched() {
		t.Fatalf("update applied before this host's MAC: %v", f.others)
	}
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if tun := strings.Join(featureFlows(t, f)["br-tun"], "\n"); !strings.Contains(tun, "dl_src=fa:16:3f:58:35:bd") {
		t.Fatalf("hv2's MAC not in br-tun:\n%s", tun)
	}
	h.Reset()
	call(upd)
	tun := strings.Join(featureFlows(t, f)["br-tun"], "\n")
	if !h.AnyTouched() || !strings.Contains(tun, "table=9, priority=1,dl_src=fa:16:3f:00:00:99 actions=output:1") || strings.Contains(tun, "fa:16:3f:58:35:bd") {
		t.Fatalf("after the update (touched %v):\n%s", h, tun)
	}
	h.Reset()
	call(upd) // the same list again: nothing to do
	if h.AnyTouched() {
		t.Fatal("an unchanged list touched the owner")
	}
	if _, err := eps[0].Methods["dvr_mac_address_update"](context.Background(), &neutron.Request{Args: json.RawMessage(`{"dvr_macs": 3}`)}); !errors.Is(err, neutron.ErrBadArgs) {
		t.Fatalf("bad args: %v", err)
	}
}

// A server that does not answer: no flows, not in distributed mode, Sync's
// error is retried by the loop.
func TestFeatureServerDown(t *testing.T) {
	f, _, rpc, _ := featureFixture(t, "testdata/2026.2-two-hosts", "hv2", "refhv-2026-2-dvr-hv2")
	rpc.fail = errors.New("MessagingTimeout")
	if err := f.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), "get_dvr_mac_address_by_host") {
		t.Fatalf("Sync: %v", err)
	}
	if f.InDistributedMode() || len(featureFlows(t, f)) != 0 {
		t.Fatal("distributed without a MAC")
	}
	rpc.fail = nil
	if err := f.Sync(context.Background()); err != nil || !f.InDistributedMode() {
		t.Fatalf("retry: %v", err)
	}
	// a removed router interface takes its flows
	before := len(featureFlows(t, f)["br-tun"])
	for id, p := range f.ports {
		if KindOf(p.DeviceOwner) == KindRouterInterface {
			f.PortRemoved(id)
		}
	}
	if after := len(featureFlows(t, f)["br-tun"]); after >= before {
		t.Fatalf("br-tun flows %d -> %d after the router interfaces left", before, after)
	}
}

// A router interface removed and added back (a new port with a new MAC, as
// remove_router_interface then add_router_interface make it): the subnet is
// asked again and the flows name the new gateway MAC, none the old one.
// Without forgetting the subnet at the removal the old answer's gateway_mac
// stayed: the re-added interface's flows named the removed port's MAC.
func TestFeatureInterfaceAddedBack(t *testing.T) {
	f, _, rpc, _ := featureFixture(t, "testdata/2026.2-two-hosts", "hv2", "refhv-2026-2-dvr-hv2")
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	var qr feature.Port
	for _, id := range slices.Sorted(maps.Keys(f.ports)) {
		if KindOf(f.ports[id].DeviceOwner) == KindRouterInterface {
			qr = f.ports[id]
			break
		}
	}
	if qr.ID == "" {
		t.Fatal("no router interface in the fixture")
	}
	sid := f.fixedIPs(qr.ID)[0].SubnetID
	oldMAC := strings.ToLower(qr.MAC)
	all := func() string {
		var b strings.Builder
		for _, fs := range featureFlows(t, f) {
			b.WriteString(strings.Join(fs, "\n") + "\n")
		}
		return b.String()
	}
	if !strings.Contains(all(), oldMAC) {
		t.Fatalf("gateway MAC %s not in the flows before the removal", oldMAC)
	}
	f.PortRemoved(qr.ID)
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if fl := all(); strings.Contains(fl, oldMAC) {
		t.Fatalf("gateway MAC %s still in the flows after the removal:\n%s", oldMAC, fl)
	}
	// added back: a new port, a new MAC, the server's answer names it
	const newMAC = "fa:16:3e:00:aa:01"
	np := *f.cached(qr.ID)
	np.ID, np.MACAddress = "0d5e0c7e-0000-4000-8000-000000000001", newMAC
	prev := f.d.Port
	f.d.Port = func(id string) *neutron.Port {
		if id == np.ID {
			return &np
		}
		return prev(id)
	}
	ds := rpc.subnets[sid]
	m := newMAC
	ds.GatewayMAC = &m
	rpc.subnets[sid] = ds
	wired := qr
	wired.ID, wired.Name, wired.MAC, wired.OFPort = np.ID, "tap"+np.ID[:11], newMAC, 99
	f.PortWired(wired)
	calls := len(rpc.subnetCalls)
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(rpc.subnetCalls) != calls+1 || rpc.subnetCalls[calls].subnet != sid {
		t.Fatalf("get_subnet_for_dvr not asked again for %s: %v", sid, rpc.subnetCalls[calls:])
	}
	fl := all()
	if strings.Contains(fl, oldMAC) || !strings.Contains(fl, newMAC) {
		t.Fatalf("after the re-add: old MAC %s present %v, new MAC %s present %v:\n%s",
			oldMAC, strings.Contains(fl, oldMAC), newMAC, strings.Contains(fl, newMAC), fl)
	}
}

// TestFeatureReportGate: the reference asks for its DVR MAC in its
// constructor, before its first report_state, so that report already says
// in_distributed_mode true. The feature is a feature.ReportGate whose gate
// opens once the first attempt ended: answered, the configurations say true
// at that moment; not answered, the gate opens too and they say false (no
// claim of a mode without the MAC), and true after a later answer.
func TestFeatureReportGate(t *testing.T) {
	open := func(f *Feature) bool {
		g, ok := any(f).(feature.ReportGate)
		if !ok {
			t.Fatal("the dvr feature is not a feature.ReportGate: the first report_state does not wait for the DVR MAC")
		}
		select {
		case <-g.ReportReady():
			return true
		default:
			return false
		}
	}
	mode := func(f *Feature) any {
		c := map[string]any{}
		f.Configurations(c)
		return c["in_distributed_mode"]
	}

	f, _, _, _ := featureFixture(t, "testdata/2026.2-two-hosts", "hv2", "refhv-2026-2-dvr-hv2")
	if open(f) {
		t.Fatal("gate open before the DVR MAC was asked for")
	}
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !open(f) || mode(f) != true {
		t.Fatalf("after the answer: gate open %v, in_distributed_mode %v; want true, true", open(f), mode(f))
	}

	f, _, rpc, _ := featureFixture(t, "testdata/2026.2-two-hosts", "hv2", "refhv-2026-2-dvr-hv2")
	rpc.fail = errors.New("MessagingTimeout")
	if err := f.Sync(context.Background()); err == nil {
		t.Fatal("Sync without an answer succeeded")
	}
	if !open(f) || mode(f) != false {
		t.Fatalf("after an unanswered attempt: gate open %v, in_distributed_mode %v; want true, false", open(f), mode(f))
	}
	rpc.fail = nil
	if err := f.Sync(context.Background()); err != nil || mode(f) != true {
		t.Fatalf("retry: %v, in_distributed_mode %v", err, mode(f))
	}

	// no server (RPC nil): nothing to wait for
	n := NewFeature(Deps{})
	if err := n.Sync(context.Background()); err != nil || !open(n) || mode(n) != false {
		t.Fatalf("without RPC: %v, gate open %v, mode %v", err, open(n), mode(n))
	}
}
