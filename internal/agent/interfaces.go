// Package agent is the heart of ovsagent: the port lifecycle (ports, their
// details, mapping and tag; the tunnel overlay and the other features sit
// behind internal/feature), the single event loop that turns OVSDB port events,
// server notifications and timers into one dataplane batch, the status
// reporting to the server and the resync logic.
//
// The loop talks to the edges only through the narrow interfaces of this
// file; each is what the loop needs, nothing more. The edges (internal/ovsdb,
// internal/openflow, internal/neutron, internal/pipeline, internal/firewall)
// are adapted to them in adapters*.go; tests use stateful in-memory fakes.
package agent

import (
	"context"
	"errors"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/overlay"
)

// DeadVLAN is the tag of a port that must not forward (the reference's
// DEAD_VLAN_TAG); br-int drops vlan 4095 at p65535.
const DeadVLAN = 4095

// VIF is a VM interface on br-int as OVSDB shows it: an Interface row with
// external_ids iface-id and attached-mac (spec §6).
type VIF struct {
	PortID string // external_ids:iface-id, the Neutron port id
	Name   string // Interface (and Port) name
	MAC    string // external_ids:attached-mac
	// OFPort is 0 while OVS has not assigned one yet and -1 when it failed.
	OFPort int32
	// Tag is the Port's current VLAN tag, -1 when none. Read at start to adopt
	// the existing dataplane.
	Tag int
	// OtherConfig is the Port's other_config (net_uuid, segmentation_id, …).
	OtherConfig map[string]string
	// IfaceOtherConfig is the Interface's other_config (the port hints').
	IfaceOtherConfig map[string]string
	// UUID is the Interface row's identity; it changes when the VIF is
	// unplugged and plugged again (the reference's "re_added").
	UUID string
}

// Ready reports whether the VIF can be wired (it has a usable ofport).
func (v VIF) Ready() bool { return v.OFPort > 0 }

// PortEventKind says what happened to a VIF.
type PortEventKind uint8

const (
	// PortUpserted: a VIF appeared or changed (add and update are handled the
	// same way: handlers must be idempotent since the OVSDB cache is refilled on
	// reconnect).
	PortUpserted PortEventKind = iota + 1
	// PortRemoved: the VIF left br-int.
	PortRemoved
	// PortSnapshot: the complete set of VIFs on br-int (the monitor's
	// initial dump, and again after an OVSDB reconnect). VIFs the agent knows
	// that are absent from it are removed.
	PortSnapshot
)

// PortEvent is one OVSDB monitor event.
type PortEvent struct {
	Kind     PortEventKind
	VIF      VIF   // PortUpserted, PortRemoved (PortID is enough for removal)
	Snapshot []VIF // PortSnapshot
	// Seen is when the edge received the event; the wiring latency metric
	// starts here. Zero means "when the loop saw it".
	Seen time.Time
}

// PortSetting is one Port's tag and the other_config keys the agent owns.
type PortSetting struct {
	Name        string
	Tag         uint16
	OtherConfig map[string]string // merged into the Port's other_config
	// IfaceOtherConfig, when not nil, replaces the Interface's other_config
	// (the port hints' tx-steering; empty clears it).
	IfaceOtherConfig map[string]string
}

// BridgeLayout is what SetupBridges built: the names and patch-port
// ofports the pipeline needs (defined in internal/feature, which the
// features see it through).
type BridgeLayout = feature.BridgeLayout

// PhysBridge is one bridge_mappings entry after setup.
type PhysBridge = feature.PhysBridge

// TunnelPort is a tunnel interface on br-tun (the overlay's, which
// creates and removes them).
type TunnelPort = overlay.Port

// Switch is what the loop needs from OVSDB.
type Switch interface {
	// SetupBridges creates or updates br-int, br-tun and the physical
	// bridges with their patch ports (idempotent, may-exist semantics).
	SetupBridges(ctx context.Context) (BridgeLayout, error)
	// SetPorts writes tag (clearing vlan_mode/trunks) and other_config of
	// every given Port in one transaction.
	SetPorts(ctx context.Context, ports []PortSetting) error
	// EnsureTunnelPort creates the tunnel port to t.RemoteIP if missing
	// and returns it with its Name and OFPort filled in.
	EnsureTunnelPort(ctx context.Context, t TunnelPort) (TunnelPort, error)
	// DeleteTunnelPort removes a tunnel port from br-tun.
	DeleteTunnelPort(ctx context.Context, t TunnelPort) error
	// DeleteVIFPort removes a VIF's Port from br-int (binding_deactivate:
	// the reference unplugs a port whose binding here was deactivated).
	DeleteVIFPort(ctx context.Context, name string) error
	// TunnelPorts lists the tunnel ports on br-tun (adopted at start).
	TunnelPorts(ctx context.Context) ([]TunnelPort, error)
	// PortEvents delivers the br-int VIF monitor's events; the first is a
	// PortSnapshot.
	PortEvents() <-chan PortEvent
}

// FlowChange is what one bundle does on one bridge: for each owner in Set
// its installed flows become exactly the given ones (an empty slice deletes
// the owner's flows). Sweep also deletes, in the same bundle, every flow
// carrying an ovs-agent cookie (any round's) that no owner re-installed,
// and, in SweepTables, flows of any cookie that no owner wants.
type FlowChange struct {
	Set   map[string][]openflow.Flow
	Sweep bool
	// SweepTables: the tables the reference clears of every cookie but its
	// own at its first iteration (cleanup_stale_flows over INT_BR_ALL_TABLES
	// etc.); only the start-up sweep names them.
	SweepTables []uint8
}

// Flows is what the loop needs from OpenFlow: one reconciler per bridge.
type Flows interface {
	// Apply applies the change to the bridge in one atomic bundle. On error
	// nothing changed on the bridge, except with an
	// *openflow.OwnersRejectedError: the switch rejected the flows of the
	// owners it names (they keep what the bridge held for them) and every
	// other owner's change was applied.
	Apply(ctx context.Context, bridge string, ch FlowChange) error
	// Cookie is the cookie of this run's flows on the bridge (the pipeline
	// embeds it in br-tun's learn action).
	Cookie(bridge string) uint64
	// Reset forgets what the reconciler believes is installed on the bridge
	// (after ovs-vswitchd restarted, the switch's tables are empty).
	Reset(bridge string)
	// DropAll deletes every flow of the bridge, whatever its table or
	// cookie, and forgets what was installed ([agent] drop_flows_on_start).
	DropAll(ctx context.Context, bridge string) error
	// Reread re-reads what the bridge holds (after a reconnect it may differ
	// from what was installed: flows restored by ovs-ctl lose their flags)
	// and re-sends what differs from the desired flows; with sweep, flows
	// carrying an ovs-agent cookie that no owner desires are deleted in the
	// same bundle (another controller's flows stay).
	Reread(ctx context.Context, bridge string, sweep bool) error
	// CanaryPresent reports whether br-int still has the canary flow in
	// table 23; false means ovs-vswitchd restarted and lost every flow.
	CanaryPresent(ctx context.Context, bridge string) (bool, error)
	// Events delivers connection events (one per OpenFlow reconnect).
	Events() <-chan DataplaneEvent
	// Desired returns the flows applied for owner on the bridge (for
	// explain: the agent keeps only a digest of them).
	Desired(bridge, owner string) []openflow.Flow
}

// DataplaneEvent says a bridge's OpenFlow connection came back.
type DataplaneEvent struct {
	Bridge string
}

// Plugin is the server's plugin RPC (topic q-plugin) the loop calls.
type Plugin interface {
	UpdateDeviceList(ctx context.Context, up, down []string, refreshTunnels bool) (DeviceListResult, error)
	TunnelSync(ctx context.Context, tunnelIP, tunnelType string) ([]TunnelEndpoint, error)
}

// DeviceListResult is update_device_list's reply.
type DeviceListResult struct {
	Up         []string
	FailedUp   []string
	Down       []string
	FailedDown []string
}

// TunnelEndpoint is one entry of tunnel_sync's reply.
type TunnelEndpoint = overlay.Endpoint

// StateReporter sends report_state (topic q-reports-plugin). It returns the
// server's answer: "new", "alive", "revived" or "".
type StateReporter interface {
	ReportState(ctx context.Context, startFlag bool, devices int) (string, error)
}

// Device is a port's details as the resource cache computes them (spec §2.1).
type Device struct {
	PortID string
	// Bound is false for an unknown or unbound port, or one whose active
	// binding is on another host ("no_active_binding"); such ports stay dead.
	Bound           bool
	NetworkID       string
	MAC             string
	AdminStateUp    bool
	Status          string // ACTIVE, DOWN, BUILD …
	NetworkType     string // vxlan, gre, geneve, vlan, flat, local
	SegmentationID  *int
	PhysicalNetwork string
	FixedIPs        []FixedIP
	AllowedPairs    []AddressPair
	DeviceOwner     string
	PortSecurity    bool
	SecurityGroups  []string
	MTU             int
	// Hints is the port's port_hints dict (nil: none; porthints decides).
	Hints map[string]any
}

// FixedIP is one of a port's addresses.
type FixedIP struct{ SubnetID, IP string }

// AddressPair is an allowed address pair (IP may be a CIDR).
type AddressPair struct{ MAC, IP string }

// Cache is the resource cache: device details computed locally from cached
// OVOs, pulling misses from the server in bulk.
type Cache interface {
	// Devices returns details of the given ports. A port the server does not
	// know is absent from devs or returned with Bound false; a port whose
	// details could not be had is in failed with the reason, retried: one
	// wrapping ErrDetailsUnavailable when the server's answer did not come
	// (an outage), else the server's answer for it, which was no use (a
	// refusal; ErrDetailsUndecodable when it could not be decoded). fresh
	// bypasses the cache (full resync: notifications may have been lost). An
	// error fails every port, as unavailable.
	Devices(ctx context.Context, ids []string, fresh bool) (devs map[string]Device, failed map[string]error, err error)
	// ResyncCache re-reads from the server every object the cache holds
	// (ports, networks, security groups, rules, address groups …) after
	// pushes may have been lost (a broker reconnect, "revived"); what changed
	// or is gone reaches the agent as news, the cache's ordinary update and
	// delete events. undecodable names the objects the server returned that
	// could not be decoded ("type id"): dropped from the cache, the rest is
	// applied; no retry is asked for them. err is a pull that failed (an
	// outage): to be retried.
	ResyncCache(ctx context.Context) (undecodable []string, err error)
}

// ErrDetailsUnavailable is wrapped by the reason of a port whose details
// could not be had because the server's answer did not come: a pull failed
// or timed out, the broker is down, the server raised an error. That says
// nothing about the port (the server may answer report_state meanwhile: a
// partial outage): it is retried with back-off, its dataplane left as it
// is, and it keeps holding back the stale-flow sweep; it is no refusal.
var ErrDetailsUnavailable = errors.New("device details unavailable")

// ErrDetailsUndecodable is wrapped by the reason of a port whose port or
// network object the server returned in a form that could not be decoded.
var ErrDetailsUndecodable = errors.New("device details undecodable")
