package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/firewall"
	"github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/pipeline"
	"github.com/ovsagent/ovsagent/internal/secgroup"
	"github.com/ovsagent/ovsagent/internal/testing/fakes"
)

var errDown = fakes.ErrDown

// fakeSwitch is an in-memory OVSDB: bridges, Port rows with tag and
// other_config, tunnel ports (the shared fake), and the monitor's event
// channel.
type fakeSwitch struct {
	*fakes.Tunnels
	mu         sync.Mutex
	layout     BridgeLayout
	rows       map[string]*VIF // by port name
	nextOF     int32           // the VIFs' last ofport
	setups     int
	onSetup    func() // called by SetupBridges, outside the lock
	writes     int    // Port rows written
	failWrites int    // next SetPorts calls that fail
	events     chan PortEvent
	deleted    []string // VIF ports removed by DeleteVIFPort
}

func newFakeSwitch(tunnel bool) *fakeSwitch {
	l := BridgeLayout{Integration: "br-int", PatchTun: 0, Physical: map[string]PhysBridge{
		"physnet1": {Bridge: "br-phys", IntOFPort: 2, PhyOFPort: 1},
	}}
	if tunnel {
		l.Tunnel, l.PatchTun, l.PatchInt = "br-tun", 1, 1
	}
	return &fakeSwitch{Tunnels: fakes.NewTunnels(100), layout: l, rows: map[string]*VIF{}, nextOF: 10, events: make(chan PortEvent, 1024)}
}

func (s *fakeSwitch) SetupBridges(context.Context) (BridgeLayout, error) {
	s.mu.Lock()
	s.setups++
	hook := s.onSetup
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.layout, nil
}

func (s *fakeSwitch) SetPorts(_ context.Context, ps []PortSetting) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failWrites > 0 {
		s.failWrites--
		return errDown
	}
	for _, p := range ps {
		r := s.rows[p.Name]
		if r == nil {
			continue
		}
		r.Tag = int(p.Tag)
		if r.OtherConfig == nil {
			r.OtherConfig = map[string]string{}
		}
		maps.Copy(r.OtherConfig, p.OtherConfig)
		if p.IfaceOtherConfig != nil {
			r.IfaceOtherConfig = maps.Clone(p.IfaceOtherConfig)
		}
		s.writes++
	}
	return nil
}

func (s *fakeSwitch) DeleteVIFPort(_ context.Context, name string) error {
	s.mu.Lock()
	v := s.rows[name]
	delete(s.rows, name)
	s.deleted = append(s.deleted, name)
	s.mu.Unlock()
	if v != nil {
		go func() { s.events <- PortEvent{Kind: PortRemoved, VIF: *v} }() // the monitor's echo
	}
	return nil
}

func (s *fakeSwitch) PortEvents() <-chan PortEvent { return s.events }

// plug adds a VIF row and emits its event (as the monitor would).
func (s *fakeSwitch) plug(id, name, mac string) { s.plugWith(id, name, mac, nil) }

// plugWith plugs a VIF whose Interface already has other_config ifaceOC.
func (s *fakeSwitch) plugWith(id, name, mac string, ifaceOC map[string]string) {
	s.mu.Lock()
	s.nextOF++
	v := &VIF{PortID: id, Name: name, MAC: mac, OFPort: s.nextOF, Tag: -1, UUID: "uuid-" + name + fmt.Sprint(s.nextOF),
		IfaceOtherConfig: maps.Clone(ifaceOC)}
	s.rows[name] = v
	cp := *v
	s.mu.Unlock()
	s.events <- PortEvent{Kind: PortUpserted, VIF: cp}
}

func (s *fakeSwitch) unplug(name string) {
	s.mu.Lock()
	v := s.rows[name]
	delete(s.rows, name)
	s.mu.Unlock()
	s.events <- PortEvent{Kind: PortRemoved, VIF: *v}
}

// snapshot emits the monitor's initial dump.
func (s *fakeSwitch) snapshot() {
	s.mu.Lock()
	var vifs []VIF
	for _, v := range s.rows {
		cp := *v
		cp.OtherConfig = maps.Clone(v.OtherConfig)
		vifs = append(vifs, cp)
	}
	s.mu.Unlock()
	s.events <- PortEvent{Kind: PortSnapshot, Snapshot: vifs}
}

// ifaceOC is the Interface other_config of port name; ok is false while
// the agent never wrote the column (nil: untouched, empty: cleared).
func (s *fakeSwitch) ifaceOC(name string) (oc map[string]string, written bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.rows[name]; r != nil && r.IfaceOtherConfig != nil {
		return maps.Clone(r.IfaceOtherConfig), true
	}
	return nil, false
}

func (s *fakeSwitch) tag(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.rows[name]; r != nil {
		return r.Tag
	}
	return -2
}

// fakeFlows is an in-memory ovs-vswitchd flow table per bridge. Each entry
// remembers the owner that installed it; entries of an earlier round have
// owner "" and go only with a sweep.
type fakeFlows struct {
	mu      sync.Mutex
	tables  map[string]map[string]fakeEntry // bridge → flow key → entry
	bundles int
	fail    int
	// reject names the owners whose flows the switch refuses: Apply then
	// applies the others and returns an OwnersRejectedError, as the
	// reconciler does; rejects counts the refusals per owner.
	reject  func(owner string) bool
	rejects map[string]int
	rereads map[string]int // bridge → Reread calls
	events  chan DataplaneEvent
	onApply func(br string) // called by Apply before it changes anything
	onSweep func(br string) // called by Apply when it sweeps, before it changes anything
}

type fakeEntry struct {
	owner string
	flow  openflow.Flow
}

func newFakeFlows() *fakeFlows {
	return &fakeFlows{tables: map[string]map[string]fakeEntry{}, events: make(chan DataplaneEvent, 8)}
}

func (f *fakeFlows) Apply(_ context.Context, br string, ch FlowChange) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.onApply != nil {
		f.onApply(br)
	}
	if f.fail > 0 {
		f.fail--
		return errDown
	}
	if ch.Sweep && f.onSweep != nil {
		f.onSweep(br)
	}
	f.bundles++
	t := f.tables[br]
	if t == nil {
		t = map[string]fakeEntry{}
		f.tables[br] = t
	}
	var rej *openflow.OwnersRejectedError
	for owner, fs := range ch.Set {
		if len(fs) > 0 && f.reject != nil && f.reject(owner) {
			if rej == nil {
				rej = &openflow.OwnersRejectedError{Owners: map[string]error{}}
			}
			rej.Owners[owner] = errors.New("fake switch: flow rejected")
			if f.rejects == nil {
				f.rejects = map[string]int{}
			}
			f.rejects[owner]++
			continue
		}
		for k, e := range t {
			if e.owner == owner {
				delete(t, k)
			}
		}
		for _, fl := range fs {
			t[fl.Key()] = fakeEntry{owner: owner, flow: fl}
		}
	}
	if ch.Sweep {
		may := sweepable(ch.SweepTables)
		for k, e := range t {
			if e.owner == "" && may(&e.flow) {
				delete(t, k)
			}
		}
	}
	if rej != nil {
		return rej
	}
	return nil
}

func (f *fakeFlows) rejected(owner string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rejects[owner]
}

func (f *fakeFlows) setReject(reject func(owner string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reject = reject
}

func (f *fakeFlows) Reset(string) {}

// Reread counts the calls: the fake's tables are always what was applied.
func (f *fakeFlows) Reread(_ context.Context, br string, _ bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rereads == nil {
		f.rereads = map[string]int{}
	}
	f.rereads[br]++
	return nil
}

func (f *fakeFlows) Cookie(br string) uint64 { return uint64(len(br)) << 32 }

func (f *fakeFlows) DropAll(_ context.Context, br string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tables[br] = map[string]fakeEntry{}
	return nil
}

func (f *fakeFlows) CanaryPresent(_ context.Context, br string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.tables[br] {
		if e.flow.Table == 23 {
			return true, nil
		}
	}
	return false, nil
}

func (f *fakeFlows) Events() <-chan DataplaneEvent { return f.events }

// Desired: the owner's entries, by key (as the reconciler orders them).
func (f *fakeFlows) Desired(br, owner string) []openflow.Flow {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []openflow.Flow
	for _, e := range f.tables[br] {
		if e.owner == owner {
			out = append(out, e.flow)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// newRound marks every installed flow as left by an earlier run.
func (f *fakeFlows) newRound() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.tables {
		for k, e := range t {
			e.owner = ""
			t[k] = e
		}
	}
}

// wipe empties every table (ovs-vswitchd restarted).
func (f *fakeFlows) wipe() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.tables)
}

func (f *fakeFlows) owners(br string) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, e := range f.tables[br] {
		out[e.owner]++
	}
	return out
}

func (f *fakeFlows) dump(br string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.tables[br] {
		out = append(out, strings.TrimSpace(e.flow.String()))
	}
	sort.Strings(out)
	return out
}

func (f *fakeFlows) has(br, substr string) bool {
	for _, l := range f.dump(br) {
		if strings.Contains(l, substr) {
			return true
		}
	}
	return false
}

// fakeServer is neutron-server as the agent sees it: ports with their
// binding and status, tunnel endpoints (the shared fake, whose down switch
// is the only one: setDown takes every call down at once), state reports.
type fakeServer struct {
	*fakes.TunnelServer
	mu           sync.Mutex
	devices      map[string]Device
	groups       map[string]firewall.SecurityGroup
	udlCalls     int
	udlUp        [][]string
	refreshCalls int
	reports      int
	startFlags   int
	answer       string
	gate         chan struct{}      // when set, update_device_list waits for a token
	udlOut       int                // update_device_list calls in the server now
	udlOutMax    int                // … the most at once since the last reset
	udlFailed    int                // update_device_list calls refused (down)
	onDevices    func()             // called by Devices (a slow server: advance a fake clock)
	onUDL        func()             // called by UpdateDeviceList once through the gate
	onUDLStart   func(refresh bool) // called when an UpdateDeviceList call arrives, before the gate
	refuse       map[string]bool    // ports whose details Devices fails (the server answering)
	refused      map[string]int     // … how often it did, per port
	downAsFailed bool               // when down, Devices fails every port as unavailable without an error, as the cache does when its pulls fail
	devicesFresh []bool             // the fresh argument of every Devices call
	cacheResyncs int                // ResyncCache calls
	resyncFail   int                // … the next ones of which fail (an outage)
	undecodable  []string           // … the objects every one finds undecodable
}

// outNow returns the calls in the server now and the most at once since
// the last call of outNow(true).
func (s *fakeServer) outNow(reset bool) (now, most int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, most = s.udlOut, s.udlOutMax
	if reset {
		s.udlOutMax = s.udlOut
	}
	return now, most
}

func newFakeServer() *fakeServer {
	return &fakeServer{TunnelServer: &fakes.TunnelServer{}, devices: map[string]Device{}, groups: map[string]firewall.SecurityGroup{}, answer: "alive"}
}

func (s *fakeServer) addPort(id, net, typ string, seg int, mac string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sg := seg
	d := Device{PortID: id, Bound: true, NetworkID: net, MAC: mac, AdminStateUp: true, Status: "DOWN",
		NetworkType: typ, SegmentationID: &sg, PortSecurity: true, FixedIPs: []FixedIP{{SubnetID: "s", IP: "10.0.0." + fmt.Sprint(len(s.devices)+2)}}}
	if typ == "vlan" {
		d.PhysicalNetwork = "physnet1"
	}
	s.devices[id] = d
}

func (s *fakeServer) update(id string, fn func(*Device)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.devices[id]
	fn(&d)
	s.devices[id] = d
}

func (s *fakeServer) status(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.devices[id].Status
}

func (s *fakeServer) setDown(v bool) {
	s.TunnelServer.SetDown(v)
}

func (s *fakeServer) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.udlCalls
}

func (s *fakeServer) UpdateDeviceList(ctx context.Context, up, down []string, refresh bool) (DeviceListResult, error) {
	s.mu.Lock()
	gate := s.gate
	if s.onUDLStart != nil {
		s.onUDLStart(refresh)
	}
	s.udlOut++
	s.udlOutMax = max(s.udlOutMax, s.udlOut)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.udlOut--
		s.mu.Unlock()
	}()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return DeviceListResult{}, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onUDL != nil {
		s.onUDL()
	}
	if s.TunnelServer.Down() {
		s.udlFailed++
		return DeviceListResult{}, errDown
	}
	s.udlCalls++
	s.udlUp = append(s.udlUp, up)
	if refresh {
		s.refreshCalls++
	}
	var r DeviceListResult
	for _, id := range up {
		d, ok := s.devices[id]
		if !ok {
			r.FailedUp = append(r.FailedUp, id)
			continue
		}
		d.Status = "ACTIVE"
		s.devices[id] = d
		r.Up = append(r.Up, id)
	}
	for _, id := range down {
		if d, ok := s.devices[id]; ok {
			d.Status = "DOWN"
			s.devices[id] = d
		}
		r.Down = append(r.Down, id)
	}
	return r, nil
}

func (s *fakeServer) Devices(_ context.Context, ids []string, fresh bool) (map[string]Device, map[string]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.devicesFresh = append(s.devicesFresh, fresh)
	if s.onDevices != nil {
		s.onDevices()
	}
	if s.TunnelServer.Down() && s.downAsFailed {
		failed := map[string]error{}
		for _, id := range ids {
			failed[id] = fmt.Errorf("%w: %w", ErrDetailsUnavailable, errDown)
		}
		return map[string]Device{}, failed, nil
	}
	if s.TunnelServer.Down() {
		return nil, nil, errDown
	}
	out := map[string]Device{}
	failed := map[string]error{}
	for _, id := range ids {
		if s.refuse[id] {
			if s.refused == nil {
				s.refused = map[string]int{}
			}
			s.refused[id]++
			failed[id] = errors.New("fake server: no ACTIVE binding")
			continue
		}
		if d, ok := s.devices[id]; ok {
			out[id] = d
		}
	}
	return out, failed, nil
}

// ResyncCache counts the cache's re-reads; it fails (an outage) while the
// server is down and for the next resyncFail calls.
func (s *fakeServer) ResyncCache(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cacheResyncs++
	if s.TunnelServer.Down() {
		return nil, errDown
	}
	if s.resyncFail > 0 {
		s.resyncFail--
		return slices.Clone(s.undecodable), errDown
	}
	return slices.Clone(s.undecodable), nil
}

// resyncs returns how many times the cache was re-read.
func (s *fakeServer) resyncs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cacheResyncs
}

// freshFetches returns the fresh argument of every Devices call so far.
func (s *fakeServer) freshFetches() []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.devicesFresh)
}

func (s *fakeServer) setRefuse(id string, v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse == nil {
		s.refuse = map[string]bool{}
	}
	s.refuse[id] = v
}

func (s *fakeServer) refusedCount(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused[id]
}

func (s *fakeServer) SecurityGroups(_ context.Context, ids []string) (map[string]firewall.SecurityGroup, map[string][]firewall.Member, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.TunnelServer.Down() {
		return nil, nil, errDown
	}
	out := map[string]firewall.SecurityGroup{}
	for _, id := range ids {
		if g, ok := s.groups[id]; ok {
			out[id] = g
		}
	}
	return out, map[string][]firewall.Member{}, nil
}

func (s *fakeServer) ReportState(_ context.Context, start bool, _ int) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.TunnelServer.Down() {
		return "", errDown
	}
	s.reports++
	if start {
		s.startFlags++
	}
	a := s.answer
	s.answer = "alive"
	return a, nil
}

// newTestAgent is New with the OVS firewall (internal/secgroup) registered
// first among d.Features when opt's pipeline asks for it, as
// cmd/ovs-agent's features.go registers it, reading the groups from d.Cache.
func newTestAgent(opt Options, d Deps) *Agent {
	if opt.Pipeline.OVSFirewall() {
		groups, _ := d.Cache.(secgroup.Groups)
		fw := secgroup.New(secgroup.Deps{Groups: groups, Metrics: d.Metrics})
		d.Features = append([]feature.Feature{fw}, d.Features...)
	}
	return New(opt, d)
}

// floodMAC is l2population's FLOODING_ENTRY MAC.
const floodMAC = pipeline.FloodMAC
