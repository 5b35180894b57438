package agent

import (
	"maps"
	"slices"

	"github.com/ovsagent/ovsagent/internal/overlay"
)

// Event is a notification from the server side (resource-cache changes,
// l2pop and tunnel casts, connection changes) handed to the loop through
// Agent.Notify. The concrete types below are the whole set.
type Event interface{ isEvent() }

// PortChanged: the cached Port changed (binding, admin state, security
// groups, addresses, status …); its details are read again.
type PortChanged struct{ PortID string }

// PortDeleted: the Port was deleted on the server.
type PortDeleted struct{ PortID string }

// NetworkChanged: a Network changed (e.g. a VLAN's segmentation id); every
// local port of it is re-read.
type NetworkChanged struct{ NetworkID string }

// BindingDeactivated: the port's binding on this host was deactivated (live
// migration moved it away): its VIF leaves br-int, as in the reference.
type BindingDeactivated struct{ PortID string }

// SecurityGroupChanged: rules or members of these groups changed; the local
// ports in them are refiltered.
type SecurityGroupChanged struct{ GroupIDs []string }

// FDBAdd, FDBRemove: l2population add_fdb_entries / remove_fdb_entries.
type FDBAdd struct{ Entries FDBEntries }
type FDBRemove struct{ Entries FDBEntries }

// FDBEntries is l2pop's fdb_entries argument (spec §3.3), already decoded:
// network id → segment and remote agent IP → [mac, ip] pairs. The pair
// ("00:00:00:00:00:00", "0.0.0.0") is the flooding entry.
type FDBEntries = overlay.FDBEntries

// FDBNetwork is one network of an fdb_entries argument.
type FDBNetwork = overlay.FDBNetwork

// FDBUpdate is update_fdb_entries' chg_ip form: network → agent IP →
// before/after [mac, ip] pairs (ARP responder entries only).
type FDBUpdate struct {
	ChgIP map[string]map[string]FDBChange
}

// FDBChange is one agent's before/after pairs.
type FDBChange = overlay.FDBChange

// TunnelUpdate, TunnelDelete: the q-agent-notifier-tunnel-* casts.
type TunnelUpdate struct{ IP, Type string }
type TunnelDelete struct{ IP, Type string }

// ResyncRevived is the Resync reason after report_state's "revived": the
// server had lost track of this agent (restarted, or the agent was away).
const ResyncRevived = "revived"

// ResyncBrokerReconnect is the Resync reason after the broker connection came
// back: pushes sent while it was down are lost.
const ResyncBrokerReconnect = "broker-reconnect"

// ResyncOVSDBReconnect is the Resync reason after the OVSDB connection came
// back (the bridges and ports may have changed behind the agent's back).
const ResyncOVSDBReconnect = "ovsdb-reconnect"

// pushesMayBeLost reports whether a full resync of this reason may follow
// lost server pushes, so that the cached server objects (ports, networks,
// security groups, rules, address groups …) are re-read (Cache.ResyncCache):
// a broker reconnect, and "revived" (the server lost track of the agent). An
// OVSDB reconnect, an ovs-vswitchd restart or an inbox overflow lose none.
func pushesMayBeLost(reason string) bool {
	return reason == ResyncBrokerReconnect || reason == ResyncRevived
}

// Resync asks for a full resync: broker reconnect, "revived" report, or
// anything else that may have lost notifications.
type Resync struct{ Reason string }

// fdbRefresh: l2pop entries of this network were folded away on an inbox
// overflow; the server is asked for the network's whole FDB again.
type fdbRefresh struct{ NetworkID string }

// tunnelResync: tunnel_update/delete casts of this type ("" every type) were
// folded away on an inbox overflow; tunnel_sync runs again.
type tunnelResync struct{ Type string }

func (fdbRefresh) isEvent()           {}
func (tunnelResync) isEvent()         {}
func (PortChanged) isEvent()          {}
func (PortDeleted) isEvent()          {}
func (NetworkChanged) isEvent()       {}
func (BindingDeactivated) isEvent()   {}
func (SecurityGroupChanged) isEvent() {}
func (FDBAdd) isEvent()               {}
func (FDBRemove) isEvent()            {}
func (FDBUpdate) isEvent()            {}
func (TunnelUpdate) isEvent()         {}
func (TunnelDelete) isEvent()         {}
func (Resync) isEvent()               {}

// maxInbox bounds the events waiting for the loop. Beyond it an event is folded
// into inboxOverflow, which keeps only which resource must be read again: a
// flood of notifications costs a bounded amount of memory and one resync of
// what it touched, and nothing is dropped silently.
const maxInbox = 4096

// ResyncInboxOverflow is the Resync reason when even the folded resources
// exceed maxInbox.
const ResyncInboxOverflow = "inbox-overflow"

// inboxOverflow is what the events that did not fit in the inbox asked for.
type inboxOverflow struct {
	n       int // events folded
	ports   map[string]bool
	nets    map[string]bool
	fdbNets map[string]bool
	tunnels map[string]bool
	// deactivated ports keep their own event even past a full resync: a
	// resync re-reads the port (dead on VLAN 4095) but would not unplug it.
	deactivated map[string]bool
	sg          bool
	full        string // full resync reason
	// lost: a reason after which pushes may have been lost (pushesMayBeLost)
	// folded behind another full one: its cache resync must not be lost.
	lost string
}

// add folds ev; limit bounds the resources remembered, beyond which a full
// resync stands for all of them.
func (o *inboxOverflow) add(ev Event, limit int) {
	o.n++
	if o.ports == nil {
		o.ports, o.nets, o.fdbNets, o.tunnels = map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
		o.deactivated = map[string]bool{}
	}
	switch e := ev.(type) {
	case PortChanged:
		o.ports[e.PortID] = true
	case PortDeleted: // handled exactly like PortChanged: the port is read again
		o.ports[e.PortID] = true
	case NetworkChanged:
		o.nets[e.NetworkID] = true
	case BindingDeactivated:
		o.deactivated[e.PortID] = true
	case SecurityGroupChanged:
		o.sg = true
	case FDBAdd:
		for id := range e.Entries {
			o.fdbNets[id] = true
		}
	case FDBRemove:
		for id := range e.Entries {
			o.fdbNets[id] = true
		}
	case FDBUpdate:
		for id := range e.ChgIP {
			o.fdbNets[id] = true
		}
	case fdbRefresh:
		o.fdbNets[e.NetworkID] = true
	case TunnelUpdate:
		o.tunnels[e.Type] = true
	case TunnelDelete:
		o.tunnels[e.Type] = true
	case tunnelResync:
		o.tunnels[e.Type] = true
	case Resync:
		if o.full == "" {
			o.full = e.Reason
		}
		if pushesMayBeLost(e.Reason) && o.lost == "" {
			o.lost = e.Reason
		}
	default:
		// An event kind not folded above: a full resync, never nothing.
		if o.full == "" {
			o.full = ResyncInboxOverflow
		}
	}
	if o.full == "" && len(o.ports)+len(o.nets)+len(o.fdbNets)+len(o.tunnels)+len(o.deactivated) > limit {
		o.full = ResyncInboxOverflow
	}
	if o.full != "" {
		// A full resync reads every port, group and FDB again; tunnels too.
		clear(o.ports)
		clear(o.nets)
		clear(o.fdbNets)
		clear(o.tunnels)
		o.tunnels[""] = true
		o.sg = false
	}
}

// events turns the folded resources into events and empties o.
func (o *inboxOverflow) events() []Event {
	if o.n == 0 {
		return nil
	}
	var out []Event
	if o.full != "" {
		out = append(out, Resync{Reason: o.full})
	}
	if o.lost != "" && o.lost != o.full {
		out = append(out, Resync{Reason: o.lost})
	}
	for _, id := range slices.Sorted(maps.Keys(o.ports)) {
		out = append(out, PortChanged{PortID: id})
	}
	for _, id := range slices.Sorted(maps.Keys(o.nets)) {
		out = append(out, NetworkChanged{NetworkID: id})
	}
	for _, id := range slices.Sorted(maps.Keys(o.deactivated)) {
		out = append(out, BindingDeactivated{PortID: id})
	}
	for _, id := range slices.Sorted(maps.Keys(o.fdbNets)) {
		out = append(out, fdbRefresh{NetworkID: id})
	}
	for _, t := range slices.Sorted(maps.Keys(o.tunnels)) {
		out = append(out, tunnelResync{Type: t})
	}
	if o.sg {
		out = append(out, SecurityGroupChanged{})
	}
	*o = inboxOverflow{}
	return out
}
