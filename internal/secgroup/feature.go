// Package secgroup is the OVS firewall as a feature of the agent
// (internal/feature): the security groups of the ports on br-int, their
// conjunction ids, the conntrack cleanup of the zones a change touched, and
// the fw: owners of br-int. The flows themselves are computed by the pure
// functions of internal/firewall; this package holds the state they are
// computed from and talks to the server (security_group_info) and to
// ovs-vswitchd's conntrack.
//
// It is built in cmd/ovs-agent/features.go when [securitygroup]
// firewall_driver is openvswitch (with enable_security_group); without it
// the agent has no fw: owners.
package secgroup

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/firewall"
	"github.com/ovsagent/ovsagent/internal/metrics"
	"github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/pipeline"
)

// FeatureName is the firewall's name among the features.
const FeatureName = "firewall"

// Groups is where the security groups come from: the resource cache
// (agent.NeutronServer) in a running agent, what was read beforehand in the
// one-shot subcommands (Static).
type Groups interface {
	// SecurityGroups returns the given groups with their rules, and the
	// members of every remote group or address group those rules name.
	SecurityGroups(ctx context.Context, ids []string) (map[string]firewall.SecurityGroup, map[string][]firewall.Member, error)
}

// Static is a fixed answer of Groups: the groups and members read before
// a one-shot subcommand (explain, takeover --dry-run) computes the flows.
type Static struct {
	Groups  map[string]firewall.SecurityGroup
	Members map[string][]firewall.Member
}

// SecurityGroups implements Groups: all it holds, whatever the ids.
func (s Static) SecurityGroups(context.Context, []string) (map[string]firewall.SecurityGroup, map[string][]firewall.Member, error) {
	g, m := s.Groups, s.Members
	if g == nil {
		g = map[string]firewall.SecurityGroup{}
	}
	if m == nil {
		m = map[string][]firewall.Member{}
	}
	return g, m, nil
}

// Deps are what the firewall is built with.
type Deps struct {
	Config firewall.Config
	// Groups answers the security groups of the ports (nil: none known).
	Groups Groups
	// Conntrack, when set, deletes the conntrack entries the firewall marked
	// invalid (ct_mark=1) in the zones a firewall change touched (Run).
	Conntrack Conntrack
	Metrics   *metrics.Metrics
}

// Feature is the OVS firewall. Every method but Run is called on the
// agent's loop.
type Feature struct {
	d Deps
	h feature.Host

	fw    *firewall.State // what the flows are computed from
	conj  firewall.ConjIDs
	ports map[string]firewall.Port // desired ports (fw.Ports once updated)
	// changed: ports changed since the last update.
	changed bool
	// dirty: the groups must be (re)read; retry is the back-off of reading them.
	dirty bool
	retry struct {
		failures int
		at       time.Time
	}
	// problems: what the firewall skips in the current state, logged and
	// counted once (reportProblems).
	problems map[string]bool
	// installed holds the firewall-table flows found at start, to recover
	// the conjunction ids they use (no rewrite of every remote-group flow).
	installed []openflow.Flow
	// intApplied: some flows went into br-int (the firewall's base flows
	// are then in or dirty; before, an empty firewall dirties them itself).
	intApplied bool
	ct         *conntrackCleaner
}

// New builds the firewall.
func New(d Deps) *Feature {
	f := &Feature{d: d, ports: map[string]firewall.Port{},
		fw: &firewall.State{Config: d.Config, Ports: map[string]firewall.Port{}, Groups: map[string]firewall.SecurityGroup{}, Members: map[string][]firewall.Member{}}}
	if d.Conntrack != nil {
		f.ct = &conntrackCleaner{ct: d.Conntrack, in: make(chan []uint16, 1024), mark: 1}
	}
	return f
}

var (
	_ feature.FlowSource           = (*Feature)(nil)
	_ feature.Attacher             = (*Feature)(nil)
	_ feature.PortHandler          = (*Feature)(nil)
	_ feature.Syncer               = (*Feature)(nil)
	_ feature.Waiter               = (*Feature)(nil)
	_ feature.Resyncer             = (*Feature)(nil)
	_ feature.SecurityGroupHandler = (*Feature)(nil)
	_ feature.FlowObserver         = (*Feature)(nil)
	_ feature.Adopter              = (*Feature)(nil)
	_ feature.Explainer            = (*Feature)(nil)
	_ feature.Runner               = (*Feature)(nil)
	_ feature.PortFlows            = (*Feature)(nil)
)

func (f *Feature) Name() string    { return FeatureName }
func (f *Feature) Kinds() []string { return []string{"fw"} }

// PortOwner implements feature.PortFlows: the port's firewall flows.
func (f *Feature) PortOwner(portID string) string { return firewall.OwnerPort(portID) }

// OwnerPort implements feature.PortFlows.
func (f *Feature) OwnerPort(owner string) (string, bool) {
	if kind, id, ok := firewall.ParseOwner(owner); ok && kind == "port" {
		return id, true
	}
	return "", false
}

// Attach implements feature.Attacher.
func (f *Feature) Attach(h feature.Host) {
	f.h = h
	if f.ct != nil {
		f.ct.log = h.Log()
	}
}

// Owners implements feature.FlowSource.
func (f *Feature) Owners() []string { return firewall.Owners(f.fw, f.conj) }

// Flows implements feature.FlowSource: the fw: owners' flows, on br-int.
func (f *Feature) Flows(owners []string) (map[string]map[string][]openflow.Flow, map[string]error) {
	fs, errs := firewall.FlowsForOwners(f.fw, f.conj, owners)
	out := make(map[string]map[string][]openflow.Flow, len(fs))
	br := f.h.Layout().Integration
	for o, fl := range fs {
		out[o] = map[string][]openflow.Flow{br: fl}
	}
	return out, errs
}

// PortWired implements feature.PortHandler: the port as the firewall must
// see it (dead and admin-down ports are not filtered). Whether it is
// filtered at all is the pipeline's decision (Port.Filtered): a trusted
// network:* port is passed through here exactly as table 60 passes it.
func (f *Feature) PortWired(p feature.Port) {
	if p.Wiring != feature.WiredUp {
		f.PortRemoved(p.ID)
		return
	}
	mac, _ := net.ParseMAC(p.MAC)
	fp := firewall.Port{ID: p.ID, OFPort: p.OFPort, VLAN: p.LocalVLAN, MAC: mac, PortSecurity: p.Filtered}
	if f.fw.Config.ExplicitlyEgressDirect {
		fp.EgressDirectPatch = f.egressDirectPatch(p)
	}
	if fp.PortSecurity {
		// An unfiltered port's groups are not fetched (the reference's
		// server leaves trusted ports out of security group info).
		fp.SecurityGroupIDs = slices.Clone(p.SecurityGroups)
		sort.Strings(fp.SecurityGroupIDs)
	}
	for _, ip := range p.FixedIPs {
		if ad, err := netip.ParseAddr(ip); err == nil {
			fp.FixedIPs = append(fp.FixedIPs, ad)
		} else {
			fp.Invalid = append(fp.Invalid, fmt.Sprintf("fixed ip %q", ip))
		}
	}
	for _, ap := range p.AllowedAddressPairs {
		pfx, ok := firewall.ParsePrefix(ap.IP)
		if !ok {
			fp.AllowedAddressPairs = append(fp.AllowedAddressPairs, firewall.AddressPair{Invalid: fmt.Sprintf("allowed address pair %q", ap.IP)})
			continue
		}
		var m net.HardwareAddr
		if ap.MAC != "" {
			m, _ = net.ParseMAC(ap.MAC)
		}
		fp.AllowedAddressPairs = append(fp.AllowedAddressPairs, firewall.AddressPair{MAC: m, IP: pfx})
	}
	old, had := f.ports[p.ID]
	if had && !slices.Equal(old.SecurityGroupIDs, fp.SecurityGroupIDs) {
		f.dirty = true
	}
	if !had {
		for _, g := range fp.SecurityGroupIDs {
			if _, ok := f.fw.Groups[g]; !ok {
				f.dirty = true
			}
		}
	}
	f.ports[p.ID] = fp
	f.changed = true
}

// PortRemoved implements feature.PortHandler.
func (f *Feature) PortRemoved(id string) {
	if _, ok := f.ports[id]; ok {
		delete(f.ports, id)
		f.changed = true
	}
}

// egressDirectPatch is the br-int port accepted egress unicast of a port on
// the port's network leaves by with explicitly_egress_direct, as the
// reference's install_accepted_egress_direct_flow picks it: patch-tun for
// tunnel networks, int-<bridge> of the physical network for VLAN networks,
// none (0) for flat and local networks or a missing port.
func (f *Feature) egressDirectPatch(p feature.Port) uint32 {
	l := f.h.Layout()
	switch pipeline.NetworkType(p.NetworkType) {
	case pipeline.TypeVXLAN, pipeline.TypeGRE, pipeline.TypeGeneve:
		return l.PatchTun
	case pipeline.TypeVLAN:
		if pb, ok := l.Physical[p.PhysicalNetwork]; ok && p.PhysicalNetwork != "" {
			return pb.IntOFPort
		}
	}
	return 0
}

// SecurityGroupsChanged implements feature.SecurityGroupHandler: the groups
// are read again (all of the ports', as the state is rebuilt whole).
func (f *Feature) SecurityGroupsChanged([]string) { f.dirty = true }

// Resync implements feature.Resyncer: notifications may have been lost.
func (f *Feature) Resync(string) { f.dirty = true }

// Waiting implements feature.Waiter: the groups are still to be read.
func (f *Feature) Waiting() bool { return f.dirty }

// RetryAt implements feature.Waiter.
func (f *Feature) RetryAt() time.Time { return f.retry.at }

// Sync implements feature.Syncer: it builds the firewall's next state
// (re-reading the security groups when they changed) and touches the owners
// whose flows differ. A failed read is retried with its own back-off while
// the ports' changes still go in, so it never returns an error.
func (f *Feature) Sync(ctx context.Context) error {
	if !f.changed && !f.dirty && len(f.fw.Ports) > 0 {
		return nil
	}
	next := &firewall.State{Config: f.fw.Config, Ports: make(map[string]firewall.Port, len(f.ports)), Groups: f.fw.Groups, Members: f.fw.Members}
	for id, p := range f.ports {
		next.Ports[id] = p
	}
	if now := f.h.Now(); f.dirty && !f.retry.at.After(now) {
		ids := map[string]bool{}
		for _, p := range next.Ports {
			for _, g := range p.SecurityGroupIDs {
				ids[g] = true
			}
		}
		list := make([]string, 0, len(ids))
		for id := range ids {
			list = append(list, id)
		}
		sort.Strings(list)
		groups, members, err := map[string]firewall.SecurityGroup{}, map[string][]firewall.Member{}, error(nil)
		if len(list) > 0 && f.d.Groups != nil {
			start := time.Now()
			groups, members, err = f.d.Groups.SecurityGroups(ctx, list)
			f.h.ObserveRPC("security_group_info", time.Since(start), err)
		}
		if err != nil {
			f.retry.failures++
			f.retry.at = now.Add(f.h.Backoff(f.retry.failures))
			f.h.Log().Warn("agent: security groups unavailable; retrying", "err", err)
		} else {
			f.retry.failures = 0
			f.dirty = false
			next.Groups, next.Members = groups, members
		}
	}
	if f.installed != nil && len(next.Ports) > 0 {
		f.conj = firewall.RecoverConjIDs(f.installed, next)
		f.installed = nil
	}
	f.reportProblems(next)
	ids, changed := firewall.Update(f.fw, next, f.conj)
	f.h.Touch(changed...)
	if len(f.fw.Ports) == 0 && !f.intApplied {
		f.h.Touch(firewall.OwnerBase)
	}
	f.fw, f.conj = next, ids
	f.changed = false
	return nil
}

// Adopt implements feature.Adopter: the firewall-table flows br-int held,
// whose conjunction ids the first update recovers.
func (f *Feature) Adopt(installed func(bridge string) []openflow.Flow) {
	if installed == nil {
		return
	}
	var fw []openflow.Flow
	for _, fl := range installed(f.h.Layout().Integration) {
		if pipeline.IsFirewallTable(fl.Table) {
			fw = append(fw, fl)
		}
	}
	if len(fw) > 0 {
		f.installed = fw
	}
}

// FlowsApplied implements feature.FlowObserver: the zones of the firewall
// owners that went into br-int are swept of the connections the change
// marked invalid.
func (f *Feature) FlowsApplied(bridge string, owners []string) {
	if bridge != f.h.Layout().Integration {
		return
	}
	f.intApplied = true
	f.ct.request(f.conntrackZones(owners))
}

// Swept implements feature.FlowObserver: the conjunction ids the previous
// run's flows held are free again.
func (f *Feature) Swept() { f.conj = f.conj.ReleaseReserved() }

// Run implements feature.Runner: the conntrack cleanup, off the loop.
func (f *Feature) Run(ctx context.Context) {
	if f.ct != nil {
		f.ct.run(ctx)
	}
}

// PortOwners implements feature.Explainer: the port's firewall flows and
// the remote-group addresses of its local VLAN.
func (f *Feature) PortOwners(p feature.Port) []string {
	out := []string{firewall.OwnerPort(p.ID)}
	if p.Wiring == feature.WiredUp && p.LocalVLAN != pipeline.DeadVLAN {
		out = append(out, firewall.OwnerConj(p.LocalVLAN))
	}
	return out
}

// Reason implements feature.Explainer.
func (f *Feature) Reason(owner, _ string, table uint8) string {
	what := "security groups (OVS firewall)"
	if k, id, _ := firewall.ParseOwner(owner); k == "conj" {
		what = "remote-group addresses on VLAN " + id
	}
	tn := pipeline.TableName(pipeline.IntTables, table)
	if tn == "" {
		tn = fmt.Sprintf("table %d", table)
	}
	return what + ": " + tn
}

// reportProblems logs and counts what the firewall skips in st (a rule,
// member, address pair or port value it cannot represent), each once while
// it lasts: the state is rebuilt on every change, the problem is not new
// each time.
func (f *Feature) reportProblems(st *firewall.State) {
	probs := firewall.Problems(st)
	if len(probs) == 0 && len(f.problems) == 0 {
		return
	}
	seen := make(map[string]bool, len(probs))
	for _, p := range probs {
		k := p.Kind + "\x00" + p.Owner + "\x00" + p.ID + "\x00" + p.Detail
		seen[k] = true
		if f.problems[k] {
			continue
		}
		f.d.Metrics.IncFirewallSkipped(p.Kind, p.Reason)
		f.h.Log().Warn("agent: firewall skips a value it cannot represent", "kind", p.Kind, "owner", p.Owner, "id", p.ID, "reason", p.Reason, "detail", p.Detail)
	}
	f.problems = seen
}

// conntrackZones are the zones (local VLANs) of the firewall owners among
// owners: a port's zone, or the VLAN of a remote-group address owner.
func (f *Feature) conntrackZones(owners []string) []uint16 {
	if f.ct == nil {
		return nil
	}
	seen := map[uint16]bool{}
	for _, owner := range owners {
		kind, id, ok := firewall.ParseOwner(owner)
		if !ok {
			continue
		}
		switch kind {
		case "port":
			if p, ok := f.fw.Ports[id]; ok && p.VLAN != 0 {
				seen[p.VLAN] = true
			}
		case "conj":
			if v, err := strconv.ParseUint(id, 10, 16); err == nil && v != 0 {
				seen[uint16(v)] = true
			}
		}
	}
	zones := make([]uint16, 0, len(seen))
	for z := range seen {
		zones = append(zones, z)
	}
	slices.Sort(zones)
	return zones
}
