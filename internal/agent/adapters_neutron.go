package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/firewall"
	"github.com/ovsagent/ovsagent/internal/neutron"
)

// NeutronServer is Plugin and Cache over internal/neutron: the typed RPC
// client and the OVO resource cache.
type NeutronServer struct {
	Client *neutron.Client
	Cache  *neutron.Cache
	Host   string

	warmMu   sync.Mutex
	warming  map[string]bool // security groups queued or being fetched by WarmFromEvent
	warmQ    []string        // … queued
	warmBusy bool            // the fetching goroutine runs

	prefetchMu sync.Mutex
	prefetch   chan struct{} // closed when Prefetch's pull has ended
}

// Prefetch starts loading the ports of ids (the VM ports OVSDB holds at a
// start) into the cache, as Devices would, and returns at once. The agent's
// first batch asks for them only after the OpenFlow read-back of the earlier
// run's flows, so the server's pull (the remote group's members, the longer
// of the two) runs beside it instead of after it. On a host with few cores
// the two compete (ovs-vswitchd dumping flows, the server loading ports)
// and little is gained; with cores to spare, up to the read-back's time.
// Devices waits for a prefetch in
// flight rather than pulling the same ports again. Call it once the
// consumers listen: an update pushed after the pull must reach the cache.
func (s *NeutronServer) Prefetch(ctx context.Context, ids []string) {
	done := make(chan struct{})
	s.prefetchMu.Lock()
	s.prefetch = done
	s.prefetchMu.Unlock()
	go func() {
		defer close(done)
		s.loadUncached(ctx, ids)
	}()
}

// awaitPrefetch waits for a Prefetch still in flight.
func (s *NeutronServer) awaitPrefetch(ctx context.Context) {
	s.prefetchMu.Lock()
	done := s.prefetch
	s.prefetchMu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// WarmFromEvent fetches, off the wiring path, the security groups (rules,
// remote-group members, address groups) of a port the server announced as
// bound to this host, so that they are cached when the port is plugged: the
// first port of a group otherwise waits for them on the wiring path (the
// remote group's member pull, seconds for a large group). Call it from the cache's
// OnEvent; it returns at once. The agent's own fills (AgentRestarted) are
// skipped: the loop asks for their groups itself right after.
func (s *NeutronServer) WarmFromEvent(ctx context.Context, ev neutron.Event) {
	p, ok := ev.New.(*neutron.Port)
	if !ok || ev.Kind != neutron.Updated || ev.AgentRestarted || len(p.SecurityGroupIDs) == 0 || !boundTo(p, s.Host) {
		return
	}
	s.warmMu.Lock()
	if s.warming == nil {
		s.warming = map[string]bool{}
	}
	for _, id := range p.SecurityGroupIDs {
		if !s.warming[id] && len(s.warmQ) < maxWarmQueued && s.Cache.SecurityGroup(id) == nil {
			s.warming[id] = true
			s.warmQ = append(s.warmQ, id)
		}
	}
	start := !s.warmBusy && len(s.warmQ) > 0
	s.warmBusy = s.warmBusy || start
	s.warmMu.Unlock()
	if start {
		go s.warm(ctx)
	}
}

// maxWarmQueued bounds the groups waiting to be warmed. Warming only saves
// the wiring path a wait; a group beyond it is fetched when its port is wired.
const maxWarmQueued = 256

// warm fetches the queued groups, all queued at once, until none is left: a
// burst of pushes (or a forged one naming many groups) costs one fetch at a
// time, never one goroutine and one server call per message.
func (s *NeutronServer) warm(ctx context.Context) {
	for {
		s.warmMu.Lock()
		ids := s.warmQ
		s.warmQ = nil
		if len(ids) == 0 || ctx.Err() != nil {
			for _, id := range ids {
				delete(s.warming, id)
			}
			s.warmBusy = false
			s.warmMu.Unlock()
			return
		}
		s.warmMu.Unlock()
		// An error is not retried here: a later event, or the wiring, asks again.
		_, _, _ = s.SecurityGroups(ctx, ids)
		s.warmMu.Lock()
		for _, id := range ids {
			// Fetched (the cache answers, and Ensure asks the server for no id
			// it asked before) or failed (a later event tries again).
			delete(s.warming, id)
		}
		s.warmMu.Unlock()
	}
}

func boundTo(p *neutron.Port, host string) bool {
	for _, b := range p.Bindings {
		if b.Host == host {
			return true
		}
	}
	return false
}

// UpdateDeviceList implements Plugin.
func (s *NeutronServer) UpdateDeviceList(ctx context.Context, up, down []string, refresh bool) (DeviceListResult, error) {
	r, err := s.Client.UpdateDeviceList(ctx, up, down, refresh)
	if err != nil {
		return DeviceListResult{}, err
	}
	out := DeviceListResult{Up: r.DevicesUp, FailedUp: r.FailedDevicesUp, FailedDown: r.FailedDevicesDown}
	for _, d := range r.DevicesDown {
		out.Down = append(out.Down, d.Device)
	}
	return out, nil
}

// TunnelSync implements Plugin.
func (s *NeutronServer) TunnelSync(ctx context.Context, ip, typ string) ([]TunnelEndpoint, error) {
	ts, err := s.Client.TunnelSync(ctx, ip, typ)
	if err != nil {
		return nil, err
	}
	out := make([]TunnelEndpoint, 0, len(ts))
	for _, t := range ts {
		out = append(out, TunnelEndpoint{IP: t.IPAddress, Host: t.Host})
	}
	return out, nil
}

// Devices implements Cache: one bulk_pull for the ports not cached (all of
// them when fresh), one for their networks. The cache tells a pull that
// failed (neutron.ErrUnavailable: ErrDetailsUnavailable here) from an
// answer that was no use.
func (s *NeutronServer) Devices(ctx context.Context, ids []string, fresh bool) (map[string]Device, map[string]error, error) {
	s.awaitPrefetch(ctx)
	var stale []neutron.BadObject
	if fresh {
		if err := s.refreshPorts(ctx, ids); err != nil {
			bad, failed := neutron.SplitPullError(err)
			if failed {
				return nil, nil, fmt.Errorf("%w: neutron: refresh ports: %w", ErrDetailsUnavailable, err)
			}
			stale = bad
		}
	} else {
		s.loadUncached(ctx, ids)
	}
	// Fills we ask for are flagged agentRestarted: their cache events are
	// the answer to this call, not news (see NotifyFromCache).
	details, failedN := s.Cache.DevicesDetails(ctx, ids, s.Host, true)
	failed := make(map[string]error, len(failedN))
	for id, err := range failedN {
		failed[id] = detailsReason(err)
	}
	// A port whose refreshed object could not be decoded may still have an
	// older copy cached: details from it would be stale.
	asked := make(map[string]bool, len(ids))
	for _, id := range ids {
		asked[id] = true
	}
	for _, b := range stale {
		if asked[b.ID] {
			failed[b.ID] = fmt.Errorf("%w: device %s: refreshed port could not be decoded: %w", ErrDetailsUndecodable, b.ID, b.Err)
			// and not from that copy next time: the retry pulls it again
			s.Cache.Forget(neutron.TypePort, b.ID)
		}
	}
	out := make(map[string]Device, len(details))
	for _, d := range details {
		if failed[d.Device] == nil {
			out[d.Device] = deviceOf(d)
		}
	}
	return out, failed, nil
}

// ResyncCache implements Cache: neutron.Cache's resync with agentRestarted
// false, so that what changed while pushes were lost reaches the agent and
// the features as news (NotifyFromCache: PortChanged, SecurityGroupChanged
// …). Every answered query is forgotten first (new objects, a rule or a
// member added meanwhile, are only found by asking again), then one type at
// a time: the first type whose pull fails (an outage) ends it, the next ones
// would only wait out their timeouts too; the retry re-reads every type.
//
// The ports last, in the order of refreshPorts: most cached ports are the
// members of the remote groups the cached rules name, which the firewall
// asks for again anyway once the queries are forgotten; asking for them
// here first re-reads those (and finds new members) in one pull, and only
// the ports it did not return are re-read by id: no port is pulled twice.
func (s *NeutronServer) ResyncCache(ctx context.Context) ([]string, error) {
	var undecodable []string
	seen := map[string]bool{}
	failed := func(rtype string, err error) bool {
		bad, failed := neutron.SplitPullError(err)
		for _, b := range bad {
			name := rtype + " " + cmp.Or(b.ID, "(id unreadable)")
			if !seen[name] {
				seen[name] = true
				undecodable = append(undecodable, name)
			}
		}
		return failed
	}
	s.Cache.Unsatisfy()
	for _, t := range neutron.CachedTypes {
		if t == neutron.TypePort {
			continue
		}
		if err := s.Cache.ResyncTypes(ctx, []string{t}, false); failed(t, err) {
			return undecodable, fmt.Errorf("neutron: re-read %s: %w", t, err)
		}
	}
	ports := s.Cache.IDs(neutron.TypePort)
	before := make(map[string]*neutron.Port, len(ports))
	for _, id := range ports {
		before[id] = s.Cache.Port(id)
	}
	remote := map[string]bool{}
	for _, id := range s.Cache.IDs(neutron.TypeSecurityGroupRule) {
		if r := s.Cache.SecurityGroupRule(id); r != nil && r.RemoteGroupID != "" {
			remote[r.RemoteGroupID] = true
		}
	}
	if len(remote) > 0 && len(ports) > 0 {
		err := s.Cache.Ensure(ctx, neutron.TypePort, neutron.Filter{"security_group_ids": slices.Sorted(maps.Keys(remote))}, false)
		if failed(neutron.TypePort, err) {
			return undecodable, fmt.Errorf("neutron: re-read the remote groups' ports: %w", err)
		}
	}
	var rest []string
	for _, id := range ports {
		// A port object that changed identity was just pulled (as in refreshPorts).
		if p := s.Cache.Port(id); p != nil && p == before[id] {
			rest = append(rest, id)
		}
	}
	if err := s.Cache.ResyncIDs(ctx, neutron.TypePort, rest, false); failed(neutron.TypePort, err) {
		return undecodable, fmt.Errorf("neutron: re-read %s: %w", neutron.TypePort, err)
	}
	return undecodable, nil
}

// detailsReason is the reason Devices gives for a port the cache failed.
func detailsReason(err error) error {
	switch {
	case errors.Is(err, neutron.ErrUnavailable):
		return fmt.Errorf("%w: %w", ErrDetailsUnavailable, err)
	case errors.Is(err, neutron.ErrBadReply):
		return fmt.Errorf("%w: %w", ErrDetailsUndecodable, err)
	}
	return err
}

// refreshSample is how many ports refreshPorts pulls first to learn their
// security groups.
const refreshSample = 10

// loadUncached loads the ports of ids the cache does not hold. A cold cache
// (the agent's start, or a burst of new ports) is loaded in the order of a
// refresh, so that ports that are also members of a remote group are loaded
// by the server once, not by id and then again by group (at a restart,
// every port of a large group would be loaded twice). refreshSample or
// fewer, and whatever this misses (a
// failed pull included), DevicesDetails pulls by id, and reports if that
// fails too.
func (s *NeutronServer) loadUncached(ctx context.Context, ids []string) {
	if missing := s.uncachedPorts(ids); len(missing) > refreshSample {
		_ = s.refreshPorts(ctx, missing)
	}
}

// uncachedPorts returns the ids the cache neither holds nor knows deleted.
func (s *NeutronServer) uncachedPorts(ids []string) []string {
	var out []string
	for _, id := range ids {
		if s.Cache.Port(id) == nil && !s.Cache.IsDeleted(neutron.TypePort, id) {
			out = append(out, id)
		}
	}
	return out
}

// refreshPorts pulls every port of ids again (the first batch after a
// start). The remote-group members the firewall needs next are pulled by
// security group, which returns the local ports of those groups as well:
// pulling them by id too had the server load every port twice (half of a
// restart's time to in sync). So: a small
// sample by id, its groups' members by group, then by id only the ports
// those did not bring.
//
// Objects that could not be decoded (neutron.SplitPullError) do not stop
// the refresh of the others; they are in the error returned.
func (s *NeutronServer) refreshPorts(ctx context.Context, ids []string) error {
	if len(ids) <= refreshSample {
		return s.Cache.Fill(ctx, neutron.TypePort, neutron.Filter{"id": ids}, true)
	}
	sampleErr := s.Cache.Fill(ctx, neutron.TypePort, neutron.Filter{"id": ids[:refreshSample]}, true)
	if _, failed := neutron.SplitPullError(sampleErr); failed {
		return sampleErr
	}
	sgs := map[string]bool{}
	for _, id := range ids[:refreshSample] {
		if p := s.Cache.Port(id); p != nil {
			for _, sg := range p.SecurityGroupIDs {
				sgs[sg] = true
			}
		}
	}
	before := map[string]*neutron.Port{}
	for _, id := range ids[refreshSample:] {
		before[id] = s.Cache.Port(id)
	}
	// The sample's networks are pulled while the security groups are: the
	// server overlaps two calls (one waits on the database while the other
	// runs), and DevicesDetails then finds them cached. A failed prefetch
	// is pulled again there.
	nets := map[string]bool{}
	for _, id := range ids[:refreshSample] {
		if p := s.Cache.Port(id); p != nil && p.NetworkID != "" {
			nets[p.NetworkID] = true
		}
	}
	prefetched := make(chan struct{})
	go func() {
		defer close(prefetched)
		if len(nets) > 0 {
			_ = s.Cache.Ensure(ctx, neutron.TypeNetwork, neutron.Filter{"id": slices.Sorted(maps.Keys(nets))}, true)
		}
	}()
	if len(sgs) > 0 {
		// Errors are not fatal here: the by-id pull below covers every port.
		_, _, _ = s.SecurityGroups(ctx, slices.Sorted(maps.Keys(sgs)))
	}
	<-prefetched
	var rest []string
	for _, id := range ids[refreshSample:] {
		// A port object that changed identity was just pulled (the cache
		// keeps the newest pointer); one still equal to what was there
		// before was not: pull it by id.
		if p := s.Cache.Port(id); p == nil || p == before[id] {
			rest = append(rest, id)
		}
	}
	if len(rest) == 0 {
		return sampleErr
	}
	return errors.Join(sampleErr, s.Cache.Fill(ctx, neutron.TypePort, neutron.Filter{"id": rest}, true))
}

func deviceOf(d neutron.DeviceDetails) Device {
	out := Device{PortID: d.Device, Bound: d.Bound && !d.NoActiveBinding}
	if !out.Bound {
		return out
	}
	out.NetworkID, out.MAC, out.AdminStateUp, out.Status = d.NetworkID, d.MACAddress, d.AdminStateUp, d.Status
	out.NetworkType, out.SegmentationID, out.PhysicalNetwork = d.NetworkType, d.SegmentationID, d.PhysicalNetwork
	out.DeviceOwner, out.PortSecurity, out.SecurityGroups, out.MTU = d.DeviceOwner, d.PortSecurityEnabled, d.SecurityGroups, d.MTU
	out.Hints = d.Hints.Map()
	for _, ip := range d.FixedIPs {
		out.FixedIPs = append(out.FixedIPs, FixedIP{SubnetID: ip.SubnetID, IP: ip.IPAddress})
	}
	for _, ap := range d.AllowedAddressPairs {
		out.AllowedPairs = append(out.AllowedPairs, AddressPair{MAC: ap.MACAddress, IP: ap.IPAddress})
	}
	return out
}

// SecurityGroups implements secgroup.Groups: the groups and rules from the cache
// (pulled in bulk when missing), and the members of every remote group
// (its ports' addresses) and address group the rules name.
func (s *NeutronServer) SecurityGroups(ctx context.Context, ids []string) (map[string]firewall.SecurityGroup, map[string][]firewall.Member, error) {
	// The groups and their rules are independent pulls: both out at once.
	rulesErr := make(chan error, 1)
	go func() {
		rulesErr <- s.Cache.Ensure(ctx, neutron.TypeSecurityGroupRule, neutron.Filter{"security_group_id": ids}, true)
	}()
	sgErr := s.Cache.Ensure(ctx, neutron.TypeSecurityGroup, neutron.Filter{"id": ids}, true)
	if err := <-rulesErr; err != nil {
		return nil, nil, fmt.Errorf("neutron: security group rules: %w", err)
	}
	if sgErr != nil {
		return nil, nil, fmt.Errorf("neutron: security groups: %w", sgErr)
	}
	groups := map[string]firewall.SecurityGroup{}
	remoteSGs, remoteAGs := map[string]bool{}, map[string]bool{}
	for _, id := range ids {
		sg := s.Cache.SecurityGroup(id)
		g := firewall.SecurityGroup{ID: id}
		if sg != nil {
			g.Stateless = !sg.Stateful
		}
		for _, r := range s.Cache.RulesOf(id) {
			fr, ok := ruleOf(r)
			if !ok {
				continue
			}
			g.Rules = append(g.Rules, fr)
			if fr.RemoteGroupID != "" {
				remoteSGs[fr.RemoteGroupID] = true
			}
			if fr.RemoteAddressGroupID != "" {
				remoteAGs[fr.RemoteAddressGroupID] = true
			}
		}
		groups[id] = g
	}
	members := map[string][]firewall.Member{}
	if len(remoteSGs) > 0 {
		rs := slices.Sorted(maps.Keys(remoteSGs))
		if err := s.Cache.Ensure(ctx, neutron.TypePort, neutron.Filter{"security_group_ids": rs}, true); err != nil {
			return nil, nil, fmt.Errorf("neutron: remote group members: %w", err)
		}
		for _, rg := range rs {
			for _, p := range s.Cache.Ports(func(p *neutron.Port) bool { return hasString(p.SecurityGroupIDs, rg) }) {
				members[rg] = append(members[rg], portMembers(p)...)
			}
		}
	}
	if len(remoteAGs) > 0 {
		ags := slices.Sorted(maps.Keys(remoteAGs))
		if err := s.Cache.Ensure(ctx, neutron.TypeAddressGroup, neutron.Filter{"id": ags}, true); err != nil {
			return nil, nil, fmt.Errorf("neutron: address groups: %w", err)
		}
		for _, id := range ags {
			ag := s.Cache.AddressGroup(id)
			if ag == nil {
				continue
			}
			for _, a := range ag.Addresses {
				if p, ok := parsePrefix(a.Address); ok {
					members[id] = append(members[id], firewall.Member{IP: p})
				} else {
					members[id] = append(members[id], firewall.Member{Invalid: fmt.Sprintf("address %q", a.Address)})
				}
			}
		}
	}
	return groups, members, nil
}

func hasString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func portMembers(p *neutron.Port) []firewall.Member {
	mac, _ := net.ParseMAC(p.MACAddress)
	var out []firewall.Member
	for _, ip := range p.FixedIPs {
		if a, err := netip.ParseAddr(ip.IPAddress); err == nil {
			out = append(out, firewall.Member{IP: netip.PrefixFrom(a, a.BitLen()), MAC: mac})
		} else {
			out = append(out, firewall.Member{Invalid: fmt.Sprintf("port %s fixed ip %q", p.ID, ip.IPAddress)})
		}
	}
	for _, ap := range p.AllowedAddressPairs {
		pfx, ok := parsePrefix(ap.IPAddress)
		if !ok {
			out = append(out, firewall.Member{Invalid: fmt.Sprintf("port %s allowed address pair %q", p.ID, ap.IPAddress)})
			continue
		}
		m := mac
		if ap.MACAddress != "" {
			if pm, err := net.ParseMAC(ap.MACAddress); err == nil {
				m = pm
			}
		}
		out = append(out, firewall.Member{IP: pfx, MAC: m})
	}
	return out
}

// ruleOf decodes a rule. What it cannot read is kept as the rule's Invalid
// reason (the firewall skips the rule, the agent logs and counts it): a rule
// translated without its prefix would allow every source.
func ruleOf(r *neutron.SecurityGroupRule) (firewall.Rule, bool) {
	fr := firewall.Rule{ID: r.ID, Protocol: strings.ToLower(string(r.Protocol)),
		PortRangeMin: r.PortRangeMin, PortRangeMax: r.PortRangeMax,
		RemoteGroupID: r.RemoteGroupID, RemoteAddressGroupID: r.RemoteAddressGroupID}
	var err error
	if fr.Direction, err = firewall.ParseDirection(r.Direction); err != nil {
		fr.Invalid = err.Error()
		return fr, true
	}
	if fr.EtherType, err = firewall.ParseEtherType(r.Ethertype); err != nil {
		fr.Invalid = err.Error()
		return fr, true
	}
	prefix := r.RemoteIPPrefix
	if r.NormalizedCIDR != "" {
		prefix = r.NormalizedCIDR
	}
	if prefix != "" {
		p, ok := parsePrefix(prefix)
		if !ok {
			fr.Invalid = fmt.Sprintf("remote_ip_prefix %q", prefix)
			return fr, true
		}
		fr.RemoteIPPrefix = p
	}
	return fr, true
}

// NotifyFromCache turns a resource-cache event into agent events, through
// the reference's synthesised notifications (spec §3.2). Use it as (part
// of) neutron.CacheOptions.OnEvent.
func NotifyFromCache(a *Agent, host string, ev neutron.Event) {
	if a.resourceTypes[ev.Type] {
		r := feature.Resource{Type: ev.Type, ID: ev.ID, Deleted: ev.Kind == neutron.Deleted, Changed: ev.Changed}
		if ev.Old != nil {
			r.Old = ev.Old
		}
		if ev.New != nil {
			r.New = ev.New
		}
		a.Notify(ResourceChanged{r})
	}
	for _, n := range neutron.Synthesize(ev) {
		switch n.Kind {
		case neutron.PortUpdate:
			if !n.AgentRestarted {
				a.Notify(PortChanged{PortID: n.PortID})
			}
		case neutron.PortDelete:
			a.Notify(PortDeleted{PortID: n.PortID})
		case neutron.NetworkUpdate:
			a.Notify(NetworkChanged{NetworkID: n.NetworkID})
		case neutron.BindingActivate:
			if n.Host == host {
				a.Notify(PortChanged{PortID: n.PortID})
			}
		case neutron.BindingDeactivate:
			if n.Host == host {
				a.Notify(BindingDeactivated{PortID: n.PortID})
			}
		case neutron.SecurityGroupsRuleUpdated, neutron.SecurityGroupsMemberUpdated:
			a.Notify(SecurityGroupChanged{GroupIDs: n.SecurityGroups})
		case neutron.AddressGroupUpdated, neutron.AddressGroupDeleted:
			a.Notify(SecurityGroupChanged{})
		}
	}
}

// NeutronHandler is neutron.NotificationHandler feeding the agent (tunnel
// and l2population casts).
type NeutronHandler struct{ A *Agent }

var _ neutron.NotificationHandler = NeutronHandler{}

func (h NeutronHandler) TunnelUpdate(_ context.Context, ev neutron.TunnelEvent) error {
	h.A.Notify(TunnelUpdate{IP: ev.TunnelIP, Type: ev.TunnelType})
	return nil
}

func (h NeutronHandler) TunnelDelete(_ context.Context, ev neutron.TunnelEvent) error {
	h.A.Notify(TunnelDelete{IP: ev.TunnelIP, Type: ev.TunnelType})
	return nil
}

func (h NeutronHandler) FDBAdd(_ context.Context, e neutron.FDBEntries) error {
	h.A.Notify(FDBAdd{Entries: fdbOf(e)})
	return nil
}

func (h NeutronHandler) FDBRemove(_ context.Context, e neutron.FDBEntries) error {
	h.A.Notify(FDBRemove{Entries: fdbOf(e)})
	return nil
}

func (h NeutronHandler) FDBUpdate(_ context.Context, u neutron.FDBUpdate) error {
	out := FDBUpdate{ChgIP: map[string]map[string]FDBChange{}}
	for netID, agents := range u.ChgIP {
		m := map[string]FDBChange{}
		for ip, c := range agents {
			m[ip] = FDBChange{Before: pairsOf(c.Before), After: pairsOf(c.After)}
		}
		out.ChgIP[netID] = m
	}
	h.A.Notify(out)
	return nil
}

func fdbOf(e neutron.FDBEntries) FDBEntries {
	out := FDBEntries{}
	for netID, n := range e {
		f := FDBNetwork{SegmentID: n.SegmentID, NetworkType: n.NetworkType, Ports: map[string][][2]string{}}
		for ip, ps := range n.Ports {
			f.Ports[ip] = pairsOf(ps)
		}
		out[netID] = f
	}
	return out
}

func pairsOf(ps []neutron.PortInfo) [][2]string {
	out := make([][2]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, [2]string{p.MAC, p.IP})
	}
	return out
}
