package dvr

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/neutron"
	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// DVR on the agent's feature seam (internal/feature): the port lifecycle and
// the server's DVR RPCs build a State, Flows (pure, golden) decides the flows
// of one owner. The base pipeline leaves DVR's hooks to it when
// pipeline.Config.Distributed is set (enable_distributed_routing).

// FeatureName is the feature's name and its owner kind.
const FeatureName = "dvr"

// Owner is the one owner of every DVR flow: DVR's flows depend on each other
// (a router interface's subnet decides its VMs' flows, the host MACs every
// bridge's), so they are recomputed together; the reconciler applies only
// what changed.
const Owner = FeatureName

// UpdateTopic is the fanout topic of dvr_mac_address_update
// (topics.get_topic_name("q-agent-notifier", "dvr", "update")).
const UpdateTopic = "q-agent-notifier-dvr-update"

// RPC is the server side the feature calls (neutron.Client's DVR methods).
type RPC interface {
	GetDVRMACAddressByHost(ctx context.Context) (neutron.DVRHostMAC, error)
	GetDVRMACAddressList(ctx context.Context) ([]neutron.DVRHostMAC, error)
	GetSubnetForDVR(ctx context.Context, subnetID string, fixedIPs []neutron.DVRFixedIP) (neutron.DVRSubnet, bool, error)
}

// Deps are the feature's edges. RPC nil: a dry run (explain, takeover
// --dry-run), nothing is called and no flows are decided.
type Deps struct {
	RPC RPC
	// Port reads the cached server port (fixed IPs, allowed address pairs).
	Port func(id string) *neutron.Port
}

// macUpdate is a dvr_mac_address_update cast, handed to the loop.
type macUpdate struct{ list []HostMAC }

// Feature is DVR.
type Feature struct {
	d Deps
	h feature.Host

	notifyMu sync.Mutex
	notify   func(any) // Host.Notify once attached (the RPC consumer runs on its own goroutine)

	localMAC net.HardwareAddr
	// inMode mirrors localMAC != nil for Configurations, which report_state
	// calls from its own goroutine.
	inMode atomic.Bool
	// ready is closed once the first get_dvr_mac_address_by_host (and
	// _list) attempt ended, answered or not (feature.ReportGate): the
	// first report_state waits for it, as the reference asks before its
	// first report.
	ready     chan struct{}
	readyOnce sync.Once
	hostMACs  []HostMAC // the last list or update, applied once localMAC is known
	others    []net.HardwareAddr
	ports     map[string]feature.Port
	subnets   map[string]*Subnet
	// gone are subnets get_subnet_for_dvr answered {} for (deleted, or no
	// gateway): not asked again until a port naming them is wired again.
	gone map[string]bool
	// relist: read get_dvr_mac_address_list again at the next Sync (a
	// resync: casts may have been lost).
	relist bool
}

// NewFeature builds the feature.
func NewFeature(d Deps) *Feature {
	return &Feature{d: d, ports: map[string]feature.Port{}, subnets: map[string]*Subnet{}, gone: map[string]bool{},
		ready: make(chan struct{})}
}

func (f *Feature) Name() string      { return FeatureName }
func (f *Feature) Kinds() []string   { return []string{FeatureName} }
func (f *Feature) Extension() string { return "" }

// Attach implements feature.Attacher.
func (f *Feature) Attach(h feature.Host) {
	f.h = h
	f.notifyMu.Lock()
	f.notify = h.Notify
	f.notifyMu.Unlock()
}

// InDistributedMode is the reference's in_distributed_mode: this host's DVR
// MAC is known.
func (f *Feature) InDistributedMode() bool { return f.inMode.Load() }

// Configurations implements feature.Reporter: in_distributed_mode as the
// reference's report_state (enable_distributed_routing is the agent's own key).
func (f *Feature) Configurations(c map[string]any) { c["in_distributed_mode"] = f.InDistributedMode() }

// ReportReady implements feature.ReportGate: closed once the first attempt
// at this host's DVR MAC ended. The reference gets its MAC in its
// constructor (get_dvr_mac_address, before its first report_state, which
// therefore says in_distributed_mode true; it exits when the server does not
// answer). Ours reports after the first attempt: true when it was answered,
// false when not (it keeps asking; the flows wait for the MAC).
func (f *Feature) ReportReady() <-chan struct{} { return f.ready }

func (f *Feature) markReady() { f.readyOnce.Do(func() { close(f.ready) }) }

// Endpoints is the consumer of UpdateTopic: dvr_mac_address_update(dvr_macs),
// version 1.0, no namespace (DVRAgentRpcCallbackMixin). It runs on the
// transport's goroutine and only hands the list to the loop.
func (f *Feature) Endpoints() []neutron.Endpoint {
	return []neutron.Endpoint{{Version: "1.0", Methods: map[string]neutron.Handler{
		"dvr_mac_address_update": func(_ context.Context, req *neutron.Request) (any, error) {
			var a struct {
				DVRMACs []HostMAC `json:"dvr_macs"`
			}
			if err := json.Unmarshal(req.Args, &a); err != nil {
				return nil, fmt.Errorf("%w: dvr_mac_address_update: %v", neutron.ErrBadArgs, err)
			}
			f.notifyMu.Lock()
			n := f.notify
			f.notifyMu.Unlock()
			if n == nil {
				// not attached yet: the start's get_dvr_mac_address_list is later than this cast
				return nil, nil
			}
			n(macUpdate{a.DVRMACs})
			return nil, nil
		},
	}}}
}

// HandleEvent implements feature.EventHandler.
func (f *Feature) HandleEvent(data any) {
	u, ok := data.(macUpdate)
	if !ok {
		return
	}
	if len(u.list) == 0 {
		return // the server never casts an empty list (DVRAgentRpcApiMixin)
	}
	f.hostMACs = u.list
	if f.localMAC == nil {
		return // the reference ignores updates until its own MAC is known
	}
	if err := f.setOthers(); err != nil {
		f.h.Log().Warn("dvr: dvr_mac_address_update ignored", "err", err)
	}
}

func (f *Feature) setOthers() error {
	others, err := OtherHostMACs(f.localMAC, f.hostMACs)
	if err != nil {
		return err
	}
	if macsEqual(others, f.others) {
		return nil
	}
	f.others = others
	f.touch()
	return nil
}

// Sync implements feature.Syncer: this host's MAC and the list at the start
// (the reference's get_dvr_mac_address, retried with the loop's back-off
// rather than exiting), then get_subnet_for_dvr for each subnet a local router
// interface or csnat port names.
func (f *Feature) Sync(ctx context.Context) error {
	if f.d.RPC == nil {
		f.markReady()
		return nil
	}
	if f.localMAC == nil {
		defer f.markReady()
		me, err := f.d.RPC.GetDVRMACAddressByHost(ctx)
		if err != nil {
			return fmt.Errorf("dvr: get_dvr_mac_address_by_host: %w", err)
		}
		m, err := ParseHostMAC(me.MAC)
		if err != nil {
			return fmt.Errorf("dvr: get_dvr_mac_address_by_host: %w", err)
		}
		list, err := f.d.RPC.GetDVRMACAddressList(ctx)
		if err != nil {
			return fmt.Errorf("dvr: get_dvr_mac_address_list: %w", err)
		}
		hm := make([]HostMAC, 0, len(list))
		for _, e := range list {
			hm = append(hm, HostMAC{Host: e.Host, MAC: e.MAC})
		}
		f.localMAC, f.hostMACs = m, hm
		if err := f.setOthers(); err != nil {
			f.localMAC = nil
			return fmt.Errorf("dvr: get_dvr_mac_address_list: %w", err)
		}
		f.inMode.Store(true)
		f.h.Log().Info("dvr: in distributed mode", "dvr_mac", m.String(), "other_hosts", len(f.others))
		f.relist = false
		f.touch()
	}
	if f.relist {
		list, err := f.d.RPC.GetDVRMACAddressList(ctx)
		if err != nil {
			return fmt.Errorf("dvr: get_dvr_mac_address_list: %w", err)
		}
		hm := make([]HostMAC, 0, len(list))
		for _, e := range list {
			hm = append(hm, HostMAC{Host: e.Host, MAC: e.MAC})
		}
		f.hostMACs = hm
		if err := f.setOthers(); err != nil {
			return fmt.Errorf("dvr: get_dvr_mac_address_list: %w", err)
		}
		f.relist = false
	}
	// router interfaces first: their answer (gateway_mac of the interface
	// itself) serves the csnat port of the same subnet as well
	ids := slices.Sorted(maps.Keys(f.ports))
	for _, k := range []Kind{KindRouterInterface, KindCentralizedSNAT} {
		if err := f.askSubnets(ctx, ids, k); err != nil {
			return err
		}
	}
	return nil
}

// askSubnets calls get_subnet_for_dvr for the subnets of the ports of kind k
// not answered yet.
func (f *Feature) askSubnets(ctx context.Context, ids []string, kind Kind) error {
	for _, id := range ids {
		p := f.ports[id]
		k := KindOf(p.DeviceOwner)
		if k != kind {
			continue
		}
		ips := f.fixedIPs(id)
		if len(ips) == 0 {
			continue
		}
		sid := ips[0].SubnetID
		if f.subnets[sid] != nil || f.gone[sid] {
			continue
		}
		// the reference passes the router interface's fixed_ips and None for a
		// csnat port (the server then uses the subnet's gateway port's MAC)
		var arg []neutron.DVRFixedIP
		if k == KindRouterInterface {
			for _, ip := range ips {
				arg = append(arg, neutron.DVRFixedIP{SubnetID: ip.SubnetID, IPAddress: ip.IP.String()})
			}
		}
		ds, ok, err := f.d.RPC.GetSubnetForDVR(ctx, sid, arg)
		if err != nil {
			return fmt.Errorf("dvr: get_subnet_for_dvr %s: %w", sid, err)
		}
		if !ok {
			f.gone[sid] = true
			continue
		}
		s, err := subnetOf(ds)
		if err != nil {
			f.h.Log().Warn("dvr: subnet not plumbed", "subnet", sid, "err", err)
			f.gone[sid] = true
			continue
		}
		f.subnets[sid] = s
		f.touch()
	}
	return nil
}

// subnetOf reads get_subnet_for_dvr's answer.
func subnetOf(ds neutron.DVRSubnet) (*Subnet, error) {
	s := &Subnet{ID: ds.ID, NetworkID: ds.NetworkID}
	var err error
	if s.CIDR, err = netip.ParsePrefix(ds.CIDR); err != nil {
		return nil, fmt.Errorf("cidr %q: %w", ds.CIDR, err)
	}
	if ds.GatewayIP != nil && *ds.GatewayIP != "" {
		if s.GatewayIP, err = netip.ParseAddr(*ds.GatewayIP); err != nil {
			return nil, fmt.Errorf("gateway_ip %q: %w", *ds.GatewayIP, err)
		}
	}
	if ds.GatewayMAC == nil || *ds.GatewayMAC == "" {
		return nil, fmt.Errorf("no gateway_mac")
	}
	if s.GatewayMAC, err = net.ParseMAC(*ds.GatewayMAC); err != nil {
		return nil, fmt.Errorf("gateway_mac %q: %w", *ds.GatewayMAC, err)
	}
	return s, nil
}

// PortWired implements feature.PortHandler: every wired-up port is part of
// the state (router interfaces, csnat and DVR-serviced ports get flows;
// their networks' local VLANs come with them).
func (f *Feature) PortWired(p feature.Port) {
	if p.Wiring != feature.WiredUp {
		f.PortRemoved(p.ID)
		return
	}
	if ips := f.fixedIPs(p.ID); len(ips) > 0 {
		delete(f.gone, ips[0].SubnetID) // a new binding asks again, as the reference does
		// a router interface new to this host (one added back after a removal
		// has a new port and MAC) asks again too: the answer's gateway_mac is
		// that port's MAC
		if _, known := f.ports[p.ID]; !known && KindOf(p.DeviceOwner) == KindRouterInterface {
			delete(f.subnets, ips[0].SubnetID)
		}
	}
	f.ports[p.ID] = p
	f.touch()
}

// PortRemoved implements feature.PortHandler. A subnet no router interface or
// csnat port of this host names any more is forgotten (the reference drops its
// local_dvr_map entry): added back, it is asked again.
func (f *Feature) PortRemoved(id string) {
	if _, ok := f.ports[id]; !ok {
		return
	}
	delete(f.ports, id)
	named := map[string]bool{}
	for pid, p := range f.ports {
		if k := KindOf(p.DeviceOwner); k == KindRouterInterface || k == KindCentralizedSNAT {
			if ips := f.fixedIPs(pid); len(ips) > 0 {
				named[ips[0].SubnetID] = true
			}
		}
	}
	for sid := range f.subnets {
		if !named[sid] {
			delete(f.subnets, sid)
		}
	}
	f.touch()
}

// Resources implements feature.ResourceHandler: a port's fixed IPs and pairs.
func (f *Feature) Resources() []string { return []string{neutron.TypePort} }

// ResourceChanged implements feature.ResourceHandler.
func (f *Feature) ResourceChanged(r feature.Resource) {
	if _, ok := f.ports[r.ID]; ok {
		f.touch()
	}
}

// Waiting implements feature.Waiter: until this host's DVR MAC is known and
// the subnet of every local router interface and csnat port has its
// get_subnet_for_dvr answer, the DVR flows are incomplete, so the sweep of
// the flows found at start (the reference's, at a takeover) waits: it would
// otherwise delete DVR flows that carry traffic before ours replace them.
// A failed Sync is retried by the loop's back-off (no RetryAt of its own).
func (f *Feature) Waiting() bool {
	if f.d.RPC == nil {
		return false // a dry run asks nothing
	}
	if f.localMAC == nil {
		return true
	}
	for id, p := range f.ports {
		if k := KindOf(p.DeviceOwner); k != KindRouterInterface && k != KindCentralizedSNAT {
			continue
		}
		ips := f.fixedIPs(id)
		if len(ips) == 0 {
			continue
		}
		if sid := ips[0].SubnetID; f.subnets[sid] == nil && !f.gone[sid] {
			return true
		}
	}
	return false
}

// RetryAt implements feature.Waiter.
func (f *Feature) RetryAt() time.Time { return time.Time{} }

// Resync implements feature.Resyncer: casts may have been lost; the list is
// read again at the next Sync (the flows stay as they are until it answers),
// and subnets answered {} are asked again.
func (f *Feature) Resync(string) {
	f.relist = f.localMAC != nil
	f.gone = map[string]bool{}
}

// Owners implements feature.FlowSource.
func (f *Feature) Owners() []string { return []string{Owner} }

// Flows implements feature.FlowSource.
func (f *Feature) Flows(owners []string) (map[string]map[string][]of.Flow, map[string]error) {
	out := map[string]map[string][]of.Flow{}
	for _, o := range owners {
		if o != Owner {
			continue
		}
		l := f.h.Layout()
		d, err := Flows(f.State(l))
		if err != nil {
			return nil, map[string]error{Owner: err}
		}
		byBridge := map[string][]of.Flow{}
		// br-int's table-0 drop of int-br-<phys> is the base pipeline's too
		// (setup_physical_bridges); one owner keeps it, or a change of ours
		// would delete the pipeline's flow.
		for _, fl := range d.Int {
			if fl.Table == intLocalSwitching && fl.Priority == 2 && len(fl.Actions) == 0 {
				continue
			}
			byBridge[l.Integration] = append(byBridge[l.Integration], fl)
		}
		if l.Tunnel != "" && len(d.Tun) > 0 {
			byBridge[l.Tunnel] = d.Tun
		}
		for br, fs := range d.Phys {
			byBridge[br] = fs
		}
		out[Owner] = byBridge
	}
	return out, nil
}

// State is the pure function's input from the feature's state and the layout.
func (f *Feature) State(l feature.BridgeLayout) *State {
	s := &State{
		Config:   Config{Tunneling: l.Tunnel != ""},
		Bridges:  Bridges{IntPatchTun: l.PatchTun, TunPatchInt: l.PatchInt, Phys: map[string]PhysPatch{}},
		LocalMAC: f.localMAC,
		Others:   f.others,
		Networks: map[string]*Network{},
		Subnets:  f.subnets,
	}
	for pn, pb := range l.Physical {
		s.Bridges.Phys[pn] = PhysPatch{Bridge: pb.Bridge, IntOfport: pb.IntOFPort, PhysOfport: pb.PhyOFPort}
	}
	for _, id := range slices.Sorted(maps.Keys(f.ports)) {
		p := f.ports[id]
		if _, ok := s.Networks[p.NetworkID]; !ok && p.NetworkID != "" {
			n := &Network{Type: p.NetworkType, PhysicalNetwork: p.PhysicalNetwork, LocalVLAN: p.LocalVLAN}
			if p.SegmentationID != nil && p.NetworkType == "vlan" {
				n.SegmentationID = uint16(*p.SegmentationID)
			}
			s.Networks[p.NetworkID] = n
		}
		k := KindOf(p.DeviceOwner)
		if k == KindOther {
			continue
		}
		mac, err := net.ParseMAC(p.MAC)
		if err != nil {
			continue // no MAC, no DVR flow can name it
		}
		dp := &Port{ID: p.ID, Kind: k, NetworkID: p.NetworkID, Ofport: p.OFPort, MAC: mac, FixedIPs: f.fixedIPs(id)}
		if np := f.cached(id); np != nil {
			for _, ap := range np.AllowedAddressPairs {
				pm, err := net.ParseMAC(ap.MACAddress)
				if err != nil {
					pm = mac // a pair without its own MAC uses the port's
				}
				pfx, err := netip.ParsePrefix(ap.IPAddress)
				if err != nil {
					a, err2 := netip.ParseAddr(ap.IPAddress)
					if err2 != nil {
						continue
					}
					pfx = netip.PrefixFrom(a, a.BitLen())
				}
				dp.Pairs = append(dp.Pairs, AddressPair{IP: pfx, MAC: pm})
			}
		}
		// a port whose subnet has no answer yet: its flows come when it has
		// (Flows reports an unknown subnet as a bug otherwise)
		if (k == KindRouterInterface || k == KindCentralizedSNAT) &&
			(len(dp.FixedIPs) == 0 || s.Subnets[dp.FixedIPs[0].SubnetID] == nil) {
			continue
		}
		s.Ports = append(s.Ports, dp)
	}
	return s
}

func (f *Feature) cached(id string) *neutron.Port {
	if f.d.Port == nil {
		return nil
	}
	return f.d.Port(id)
}

// fixedIPs are the cached port's addresses, in the server's order.
func (f *Feature) fixedIPs(id string) []FixedIP {
	np := f.cached(id)
	if np == nil {
		return nil
	}
	var out []FixedIP
	for _, ip := range np.FixedIPs {
		a, err := netip.ParseAddr(ip.IPAddress)
		if err != nil {
			continue
		}
		out = append(out, FixedIP{SubnetID: ip.SubnetID, IP: a})
	}
	return out
}

func (f *Feature) touch() {
	if f.h != nil {
		f.h.Touch(Owner)
	}
}

func macsEqual(a, b []net.HardwareAddr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].String() != b[i].String() {
			return false
		}
	}
	return true
}

var (
	_ feature.FlowSource      = (*Feature)(nil)
	_ feature.PortHandler     = (*Feature)(nil)
	_ feature.ResourceHandler = (*Feature)(nil)
	_ feature.Syncer          = (*Feature)(nil)
	_ feature.Resyncer        = (*Feature)(nil)
	_ feature.EventHandler    = (*Feature)(nil)
	_ feature.Takeover        = (*Feature)(nil)
	_ feature.Reporter        = (*Feature)(nil)
	_ feature.ReportGate      = (*Feature)(nil)
	_ feature.Attacher        = (*Feature)(nil)
	_ feature.Waiter          = (*Feature)(nil)
)

// ReadOnly is the server side for `ovs-agent takeover --dry-run`, which
// must change nothing: get_dvr_mac_address_by_host allocates a MAC for a
// host that has none, so this host's MAC is read from
// get_dvr_mac_address_list instead (a host the reference ran with DVR is in
// it). get_subnet_for_dvr only reads.
type ReadOnly struct {
	RPC  RPC
	Host string
}

// GetDVRMACAddressByHost answers from the list.
func (r ReadOnly) GetDVRMACAddressByHost(ctx context.Context) (neutron.DVRHostMAC, error) {
	list, err := r.RPC.GetDVRMACAddressList(ctx)
	if err != nil {
		return neutron.DVRHostMAC{}, err
	}
	for _, e := range list {
		if e.Host == r.Host {
			return e, nil
		}
	}
	return neutron.DVRHostMAC{}, fmt.Errorf("host %q has no DVR MAC on the server yet (the agent has it allocated at its start)", r.Host)
}

// GetDVRMACAddressList implements RPC.
func (r ReadOnly) GetDVRMACAddressList(ctx context.Context) ([]neutron.DVRHostMAC, error) {
	return r.RPC.GetDVRMACAddressList(ctx)
}

// GetSubnetForDVR implements RPC.
func (r ReadOnly) GetSubnetForDVR(ctx context.Context, subnetID string, fixedIPs []neutron.DVRFixedIP) (neutron.DVRSubnet, bool, error) {
	return r.RPC.GetSubnetForDVR(ctx, subnetID, fixedIPs)
}
