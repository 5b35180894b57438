// Package feature is the seam between the agent's loop (internal/agent)
// and what the agent does on the dataplane: the pipeline, the OVS
// firewall, and extensions such as QoS and trunk ports.
//
// A feature is a value that implements Feature and any of the optional
// interfaces of this file; the loop asks each registered feature for what
// it implements (a type assertion) and never knows the feature's own
// state. Every call runs on the agent's loop goroutine, so a feature needs
// no locking of the state the hooks touch; the Host a feature is given
// (Attach) may be used from the hooks only.
//
// What a feature can declare:
//
//   - FlowSource: the flows it owns, as owner keys "<kind>:<id>" (or
//     "<kind>" alone) whose kinds are its own. The loop dispatches every
//     dirty owner to the source of its kind, applies what changed in one
//     bundle per bridge with every other feature's owners, keeps a digest
//     per owner and retries rejected owners with back-off. The flows
//     themselves are computed by pure functions of the feature's state
//     (golden-tested like internal/pipeline and internal/firewall).
//   - PortHandler: the port lifecycle (a port's wiring decided, a port
//     gone), with the port's network and local VLAN.
//   - ResourceHandler: the server objects (OVO types of the resource cache)
//     whose changes it wants, delivered on the loop.
//   - Syncer: work that talks to something outside the flows (OVSDB rows,
//     RPC calls), run once per batch and retried with back-off on error.
//   - Runner: work of its own outside the loop (started with the agent).
//   - Resyncer: told of a full resync (broker or OVSDB reconnect, revived).
//   - EventHandler: its own events from other goroutines (Host.Notify).
//   - Explainer: the owners of a port's flows and what each flow is for
//     (`ovs-agent explain`).
//   - Takeover: the host state it would not rebuild at a start or takeover
//     (UnrebuiltState refuses while any feature names some).
//   - Reporter: its name in report_state's `extensions` and its part of
//     the configurations.
//   - ReportGate: a Reporter whose part is known only once it asked the
//     server (dvr: this host's DVR MAC); the first report_state waits for
//     it, at most one report interval.
//   - Waiter: it still waits on the server (the firewall's security
//     groups): the stale-flow sweep and the in-sync state wait for it.
//   - FlowObserver: told which owners' flows went into a bridge, and when
//     the stale flows are swept.
//   - Adopter: told once what the bridges held at start.
//   - SecurityGroupHandler: told of security-group rule and member changes.
//   - Prefetcher: server calls sent while the batch reads the ports'
//     details (tunnel_sync).
//   - BridgeAdopter: its OVSDB rows on the bridges read into its state once
//     the bridges are set up (br-tun's tunnel ports).
//   - Completer: its part of the dataplane waits on the server after the
//     wiring (l2pop's FDB): in-sync waits, and so does the sweep of the
//     bridges it holds.
//   - Refresher: networks whose state the server is asked for again by the
//     next update_device_list (refresh_tunnels: l2pop's FDB).
//
// Metrics: a feature registers its families on the *metrics.Metrics the
// wiring gives it (metrics.Metrics.NewCounter / NewGauge) when it is built.
//
// Features are built and registered in one place, cmd/ovs-agent
// (features.go, from the configuration), and passed to the agent in
// agent.Deps.Features. The pipeline (pipeline.Source over the pipeline
// state) and its tunnel overlay (internal/overlay: tunnel ports,
// tunnel_sync, l2pop's FDB) are registered by the agent itself and come
// first; the OVS firewall (internal/secgroup) is built in features.go like
// any other.
package feature

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/ovsagent/ovsagent/internal/openflow"
)

// Feature is one part of the agent. Name is short and stable ("pipeline",
// "firewall", "qos", "trunk"): it names the feature in logs, back-off and
// the absent-feature checks (Absent).
type Feature interface {
	Name() string
}

// FlowSource is a feature that owns flows.
type FlowSource interface {
	Feature
	// Kinds are the owner-key kinds it owns: the text of an owner key
	// before its first ':' ("fw" for "fw:port:X", "base" for "base"). No
	// two registered sources may share a kind.
	Kinds() []string
	// Owners are every owner it has flows for now: after a bridge setup or
	// an ovs-vswitchd restart every one is recomputed.
	Owners() []string
	// Flows computes the owners' flows: owner → bridge → flows. An owner
	// absent from the result, or with no flows on a bridge, has none there
	// (what it had is deleted). An owner in errs is not applied (logged).
	// A flow with Cookie 0 is installed with the bridge's cookie.
	Flows(owners []string) (flows map[string]map[string][]openflow.Flow, errs map[string]error)
}

// PortFlows is implemented by a FlowSource with an owner per port that
// holds the port's own flows (the pipeline's port:, the firewall's
// fw:port:). While the switch rejects such an owner's latest flows the
// port is not reported up, and it is held on the dead VLAN when the bridge
// has none of the owner's earlier flows (fail closed).
type PortFlows interface {
	// PortOwner is the port's owner.
	PortOwner(portID string) string
	// OwnerPort is the port whose owner this is (ok false: not a port's).
	OwnerPort(owner string) (portID string, ok bool)
}

// Dependents is implemented by a FlowSource whose owners' flows depend on
// other owners' objects: when owner changes, these are recomputed too.
type Dependents interface {
	Dependents(owner string) []string
}

// Host is what the loop offers a feature. Use it only from the hooks (the
// loop's goroutine).
type Host interface {
	// Touch marks owners dirty: their flows are recomputed (Flows) and
	// applied in this batch, or the next one when called outside a batch.
	Touch(owners ...string)
	// Layout is the bridges as set up (zero until the first setup).
	Layout() BridgeLayout
	// Cookie is this run's cookie on the bridge (0 without OpenFlow).
	Cookie(bridge string) uint64
	// Log is the agent's logger.
	Log() *slog.Logger
	// Now is the loop's clock (the agent's, faked in tests).
	Now() time.Time
	// Backoff is the wait after failures failures in a row (the agent's
	// retry_min/retry_max doubling, the one back-off of the loop).
	Backoff(failures int) time.Duration
	// ObserveRPC records a server call the feature made (metrics, and
	// whether the server answers: the agent's view of the server).
	ObserveRPC(method string, took time.Duration, err error)
	// Notify hands data to the feature's HandleEvent on the loop (the
	// feature must implement EventHandler). It is the one Host method safe
	// from any goroutine, and never blocks; like every event, it wakes the
	// loop for a batch. Beyond the loop's inbox bound it is folded into a
	// full resync (Resyncer).
	Notify(data any)
}

// EventHandler is a feature with events of its own from other goroutines
// (a monitor of its OVSDB rows, an RPC endpoint of its own topic): they
// reach it through Host.Notify, on the loop.
type EventHandler interface {
	HandleEvent(data any)
}

// Attacher is implemented by a feature that needs the Host; Attach is
// called once, when the agent is built.
type Attacher interface {
	Attach(h Host)
}

// Wiring is how a port is wired.
type Wiring uint8

const (
	// WiredUp: on its network's local VLAN, forwarding.
	WiredUp Wiring = iota + 1
	// WiredAdminDown: admin_state_up false, on the dead VLAN.
	WiredAdminDown
	// WiredDead: unbound, unknown or a bad segment, on the dead VLAN.
	WiredDead
)

// Port is one VIF on br-int as the loop has decided its wiring.
type Port struct {
	ID     string // Neutron port id (external_ids:iface-id)
	Name   string // OVS Interface/Port name
	OFPort uint32
	MAC    string
	Wiring Wiring
	// LocalVLAN is the network's local VLAN when WiredUp (4095 otherwise).
	LocalVLAN       uint16
	NetworkID       string
	NetworkType     string
	PhysicalNetwork string
	SegmentationID  *int
	DeviceOwner     string
	// From the port's details, what the firewall filters by.
	PortSecurity bool
	// Filtered: the pipeline sends the port's traffic through the firewall
	// (port security on and not a trusted network:* port).
	Filtered            bool
	SecurityGroups      []string
	FixedIPs            []string
	AllowedAddressPairs []AddressPair
}

// AddressPair is a port's allowed address pair as the server gives it (IP
// may be a CIDR, MAC may be empty).
type AddressPair struct{ MAC, IP string }

// PortHandler is a feature that follows the port lifecycle.
type PortHandler interface {
	// PortWired: the port's wiring was (re)decided; called whenever the
	// port's details or state changed, idempotent.
	PortWired(p Port)
	// PortRemoved: the port left br-int (or its wiring was dropped).
	PortRemoved(id string)
}

// Resource is one change of a cached server object (a neutron.Event
// without the neutron types: New and Old are the cache's values, e.g.
// *neutron.Port; never modify them).
type Resource struct {
	Type    string // OVO type name: "Port", "QosPolicy", "Trunk", …
	ID      string
	Deleted bool
	Old     any // nil for an object first seen
	New     any // nil for a delete
	Changed []string
}

// ResourceHandler is a feature that consumes server objects.
type ResourceHandler interface {
	// Resources are the OVO type names it wants (the push topics
	// neutron-vo-<Type>-<version> the agent must consume and the cache must
	// hold: see neutron.CachedTypes).
	Resources() []string
	// ResourceChanged delivers one change, on the loop.
	ResourceChanged(r Resource)
}

// Syncer is a feature with work outside the flows: OVSDB rows it owns
// (QoS/Queue rows, trunk bridges and patch ports), RPC calls. Sync runs
// once per batch, after the port tags are written and before the flows
// are applied; it must return quickly when it has nothing to do. On an
// error the loop logs it and calls again after a back-off (the agent's
// retry_min/retry_max doubling); the batch goes on.
type Syncer interface {
	Sync(ctx context.Context) error
}

// Runner is a feature with work of its own outside the loop: its own
// OVSDB watch and RPC calls that may wait (the trunk handler waits up to a
// minute for a VM on a new trunk bridge). Run is started once, after the
// agent's consumers are served, on its own goroutine, and returns when ctx
// ends. What it does must not touch the loop's state; it talks to OVSDB and
// the server through the edges it was built with.
type Runner interface {
	Run(ctx context.Context)
}

// Waiter is a feature whose state waits on the server (the firewall's
// security groups): while Waiting, the stale-flow sweep waits and the agent
// is not in sync; the loop wakes at RetryAt (zero: no retry pending) for
// the feature's next try in Sync.
type Waiter interface {
	Waiting() bool
	RetryAt() time.Time
}

// FlowObserver is told what the loop did with the flows.
type FlowObserver interface {
	// FlowsApplied: these owners' flows on bridge went in (changed or
	// deleted), whichever feature owns them.
	FlowsApplied(bridge string, owners []string)
	// Swept: the stale flows of earlier runs are gone from every bridge.
	Swept()
}

// Adopter is told, once at start (and in a takeover plan), the flows the
// bridges held when the agent adopted them (nil when unknown).
type Adopter interface {
	Adopt(installed func(bridge string) []openflow.Flow)
}

// SecurityGroupHandler is told that the rules or members of these security
// groups changed (none named: any may have).
type SecurityGroupHandler interface {
	SecurityGroupsChanged(ids []string)
}

// Prefetcher is a feature with server calls that the batch sends while it
// reads the ports' details (both wait on the server, which overlaps them):
// tunnel_sync. Prefetch sends what is due and returns at once; the batch
// calls finish, on the loop, once the details are read: it waits for the
// answers and applies them. The calls must not touch the loop's state.
type Prefetcher interface {
	Prefetch(ctx context.Context) (finish func())
}

// BridgeAdopter is a feature with OVSDB rows of its own on the bridges
// (br-tun's tunnel ports). AdoptBridges reads them into its state once the
// bridges are set up: at start, after a bridge setup that had failed
// succeeded, and after ovs-vswitchd restarted (restarted true: what it
// learnt from the server about the dataplane is asked for again).
type BridgeAdopter interface {
	AdoptBridges(ctx context.Context, restarted bool)
}

// Completer is a feature whose part of the dataplane is complete only once
// the server has sent more after the wiring (l2pop's FDB of the tunnelled
// networks, asked for by a Refresher). Until Complete the agent is not in
// sync, and a bridge it holds (HoldSweep) keeps the stale flows of earlier
// runs, which may still carry traffic its part has not rebuilt. The loop
// wakes at CompleteBy (zero: none), when Complete may turn true by itself
// (a wait's deadline).
type Completer interface {
	Complete() bool
	HoldSweep(bridge string) bool
	CompleteBy() time.Time
}

// Refresher is a feature that asks the server for a network's state again
// by reporting one of the network's ports up (already ACTIVE, wired here)
// in an update_device_list with refresh_tunnels: l2pop then casts the
// network's whole FDB. The agent carries the request in its next report
// and keeps a network's request out at most once at a time.
type Refresher interface {
	// RefreshNetworks are the network ids waiting for a refresh, sorted.
	RefreshNetworks() []string
	// RefreshReplied: a call asking for these networks' refresh, sent at
	// sent, succeeded at replied.
	RefreshReplied(nets []string, sent, replied time.Time)
}

// Resyncer is told of a full resync: state it caches from the server may
// be stale (notifications lost).
type Resyncer interface {
	Resync(reason string)
}

// Explainer says which of its owners hold flows because of a port and
// what a flow of one of its owners is for.
type Explainer interface {
	// PortOwners are the owners whose flows exist because of the port
	// (its own and shared ones, such as its network's).
	PortOwners(p Port) []string
	// Reason says what a flow of owner in table on bridge is for, e.g.
	// "bandwidth limit of policy X: table 58".
	Reason(owner, bridge string, table uint8) string
}

// Takeover is a feature with its own state on the host (flows outside its
// owners' keys, OVSDB rows, bridges). Unrebuilt names, one line each, the
// state found that it would remove or break and not rebuild; a start or
// takeover is refused while any line is returned.
type Takeover interface {
	Unrebuilt(h HostState) []string
}

// Reporter is a feature with a part in report_state.
type Reporter interface {
	// Extension is its name in the configurations' `extensions` list
	// ("qos"); "" for a built-in part of the agent.
	Extension() string
	// Configurations adds its keys to report_state's configurations (the
	// JSON object; e.g. resource_provider_* for QoS).
	Configurations(c map[string]any)
}

// ReportGate is a Reporter whose part of report_state is known only once it
// has asked the server: the dvr feature's in_distributed_mode, this host's
// DVR MAC, which the reference agent fetches in its constructor, before its
// first report_state. The agent's first report_state waits until
// ReportReady is closed (the feature's first attempt ended, answered or
// not: Configurations then says what it has) or one report interval
// passed, whichever is first; later reports do not wait.
type ReportGate interface {
	Reporter
	ReportReady() <-chan struct{}
}

// WaitReportGates waits until every ReportGate among fs is ready, at most
// max (0: no bound). It returns false when ctx ended first, and whether the
// bound cut the wait short.
func WaitReportGates(ctx context.Context, fs []Feature, max time.Duration) (ok, cut bool) {
	var gates []<-chan struct{}
	for _, f := range fs {
		if g, ok := f.(ReportGate); ok {
			gates = append(gates, g.ReportReady())
		}
	}
	if len(gates) == 0 {
		return true, false
	}
	var bound <-chan time.Time
	if max > 0 {
		t := time.NewTimer(max)
		defer t.Stop()
		bound = t.C
	}
	for _, g := range gates {
		select {
		case <-ctx.Done():
			return false, false
		case <-g:
		case <-bound:
			return true, true
		}
	}
	return true, false
}

// Cookies of ovs-agent carry OwnCookieTag in their low 16 bits, the rest
// random. A restarted agent recognises its predecessor's flows by the tag and
// keeps their cookie: the first bundle after a restart then carries only what
// changed, instead of every flow re-cookied (most of a restart's time at
// 1,000 ports; bench/README.md). The tag is also what makes a flow ours to
// delete (sweepable), and what tells a feature's Unrebuilt check our own
// earlier run from another agent's state. Flows of any other agent (the
// reference's random per-run cookie) are untagged but for a 1-in-65,536
// chance; such flows are re-installed under a fresh cookie.
const (
	OwnCookieTag  = 0x0a65
	OwnCookieMask = 0xffff
)

// OwnCookie: c is a cookie of ovs-agent (of any run).
func OwnCookie(c uint64) bool { return c&OwnCookieMask == OwnCookieTag }

// HostState is what the checks for state the agent cannot rebuild read
// from a host before a start or a takeover.
type HostState struct {
	Layout BridgeLayout
	// Flows are every flow installed on each bridge of the layout.
	Flows map[string][]openflow.Flow
	// Bridges are the names of all bridges on the host.
	Bridges []string
	// QoSRows and QueueRows count the OVSDB QoS and Queue rows.
	QoSRows, QueueRows int
}

// OwnerKind is the kind of an owner key: the text before its first ':'
// (the whole key without one). Ids may contain colons ("tun:fd00::1").
func OwnerKind(owner string) string {
	kind, _, _ := strings.Cut(owner, ":")
	return kind
}
