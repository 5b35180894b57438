package agent

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
type FDBEntries map[string]FDBNetwork

// FDBNetwork is one network of an fdb_entries argument.
type FDBNetwork struct {
	SegmentID   *int
	NetworkType string
	Ports       map[string][][2]string // agent IP → [mac, ip]
}

// FDBUpdate is update_fdb_entries' chg_ip form: network → agent IP →
// before/after [mac, ip] pairs (ARP responder entries only).
type FDBUpdate struct {
	ChgIP map[string]map[string]FDBChange
}

// FDBChange is one agent's before/after pairs.
type FDBChange struct{ Before, After [][2]string }

// TunnelUpdate, TunnelDelete: the q-agent-notifier-tunnel-* casts.
type TunnelUpdate struct{ IP, Type string }
type TunnelDelete struct{ IP, Type string }

// ResyncRevived is the Resync reason after report_state's "revived": the
// server had lost track of this agent (restarted, or the agent was away).
const ResyncRevived = "revived"

// Resync asks for a full resync: broker reconnect, "revived" report, or
// anything else that may have lost notifications.
type Resync struct{ Reason string }

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

// FloodingEntry is l2pop's FLOODING_ENTRY MAC.
const floodMAC = "00:00:00:00:00:00"
