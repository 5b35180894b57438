// Package trunk decides the Open vSwitch layout of trunk ports (vlan-aware VMs) the
// way the reference OVS agent's trunk handler does
// (neutron/services/trunk/drivers/openvswitch/agent: ovsdb_handler.py, trunk_manager.py):
//
//   - nova/os-vif plugs the VM into a trunk bridge tbr-<trunk id> (the parent port's
//     vif_details bridge_name) instead of br-int;
//   - the parent is patched to br-int by tpi-<parent port id> (br-int side) and
//     tpt-<parent port id> (trunk bridge side, access port, tag 0: untagged frames);
//   - each subport by spi-<subport id> / spt-<subport id>, the trunk side an access port
//     tagged with the subport's segmentation id, so the VM's VLAN-tagged frames come out
//     untagged on spi-;
//   - the br-int ends carry iface-id and attached-mac of their Neutron port: the agent
//     then wires them as it wires any VIF (local VLAN, flows, ACTIVE);
//   - the VM's interface on the trunk bridge carries the trunk's metadata
//     (bridge_name, trunk_id, subport_ids) so that its removal can be undone without
//     asking the server;
//   - the trunk status reported is ACTIVE when every expected subport was wired (and
//     every stale one unwired), DEGRADED otherwise, ERROR when the parent could not be
//     patched. DOWN is the server's: it sets it when the parent is unbound.
//
// Everything here is pure: inputs are the trunk from the server and what OVSDB holds,
// outputs the rows to create and delete and the status to report. internal/ovsdb
// applies the rows (ApplyTrunk).
package trunk

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/ovsagent/ovsagent/internal/neutron"
)

// Names (neutron/services/trunk/drivers/openvswitch: constants.TRUNK_BR_PREFIX,
// utils.gen_trunk_br_name, trunk_manager get_br_int_port_name / get_br_trunk_port_name).
const (
	BridgePrefix = "tbr-"
	// deviceNameMaxLen is neutron-lib's DEVICE_NAME_MAX_LEN (IFNAMSIZ-1).
	deviceNameMaxLen = 15
	parentPrefix     = "tp"
	subportPrefix    = "sp"
)

// External ids the handler writes: on the patch ports (the Neutron port they stand for)
// and on the VM's interface (the trunk's metadata).
const (
	KeyIfaceID     = "iface-id"
	KeyAttachedMAC = "attached-mac"
	KeyBridgeName  = "bridge_name"
	KeyTrunkID     = "trunk_id"
	KeySubportIDs  = "subport_ids"
)

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// BridgeName is the trunk bridge of a trunk: tbr- and the head of its id, 14 characters
// (one less than a device name, as the reference leaves room for nothing else).
func BridgeName(trunkID string) string { return truncate(BridgePrefix+trunkID, deviceNameMaxLen-1) }

// ParentPatchNames are the names of the parent's patch pair (tpi- on br-int, tpt- on the
// trunk bridge).
func ParentPatchNames(portID string) (intSide, trunkSide string) {
	return truncate(parentPrefix+"i-"+portID, deviceNameMaxLen), truncate(parentPrefix+"t-"+portID, deviceNameMaxLen)
}

// SubportPatchNames are the names of a subport's patch pair (spi- / spt-).
func SubportPatchNames(portID string) (intSide, trunkSide string) {
	return truncate(subportPrefix+"i-"+portID, deviceNameMaxLen), truncate(subportPrefix+"t-"+portID, deviceNameMaxLen)
}

// IsTrunkBridge says whether a bridge (or interface) name is a trunk bridge's.
func IsTrunkBridge(name string) bool { return strings.HasPrefix(name, BridgePrefix) }

// IsServicePort says whether an interface is one the handler made (or the trunk bridge's
// own): the reference tests the first two characters only, so any "tp…" or "sp…"
// interface counts, and so does it here.
func IsServicePort(name string) bool {
	return IsTrunkBridge(name) || strings.HasPrefix(name, parentPrefix) || strings.HasPrefix(name, subportPrefix)
}

// IsSubportPort says whether an interface of a trunk bridge is a subport's patch end.
func IsSubportPort(name string) bool { return strings.HasPrefix(name, subportPrefix) }

// Iface is an interface of a trunk bridge as OVSDB holds it.
type Iface struct {
	Name        string
	ExternalIDs map[string]string
	Options     map[string]string
}

// instanceIfaces are the interfaces of bridge other than its own local interface, sorted
// by name (the reference lists them with list-ifaces, which leaves the local one out).
func instanceIfaces(bridge string, ifaces []Iface) []Iface {
	out := make([]Iface, 0, len(ifaces))
	for _, i := range ifaces {
		if i.Name != bridge {
			out = append(out, i)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out
}

// ParentIface is the VM's interface on a trunk bridge: the first one that is no service
// port. false when the VM is not (or no longer) plugged.
func ParentIface(bridge string, ifaces []Iface) (Iface, bool) {
	for _, i := range instanceIfaces(bridge, ifaces) {
		if !IsServicePort(i.Name) {
			return i, true
		}
	}
	return Iface{}, false
}

// HasServicePort says whether the bridge was wired before (a restart, or the bridge
// re-announced): the reference then rewires, removing subports the server no longer has.
func HasServicePort(bridge string, ifaces []Iface) bool {
	for _, i := range instanceIfaces(bridge, ifaces) {
		if IsServicePort(i.Name) {
			return true
		}
	}
	return false
}

// ConnectedSubports are the Neutron ports of the subport patch ends on the trunk bridge.
func ConnectedSubports(bridge string, ifaces []Iface) []string {
	var out []string
	for _, i := range instanceIfaces(bridge, ifaces) {
		if IsSubportPort(i.Name) && i.ExternalIDs[KeyIfaceID] != "" {
			out = append(out, i.ExternalIDs[KeyIfaceID])
		}
	}
	return out
}

// Patch is one patch port to create (or fix) with its Interface external_ids; Access,
// when set, makes the Port an access port of that tag (vlan_mode=access, tag).
type Patch struct {
	Bridge      string
	Name        string
	Peer        string
	ExternalIDs map[string]string
	Access      *int
}

// PortRef names a port to delete from a bridge (absent: nothing to do).
type PortRef struct {
	Bridge string
	Name   string
}

// Metadata is what the handler keeps on the VM's interface.
type Metadata struct {
	Iface      string // the VM's interface on the trunk bridge
	BridgeName string
	TrunkID    string
	SubportIDs []string // sorted
}

// ExternalIDs are the keys Metadata sets (other keys of the interface are kept).
// subport_ids is the JSON list the reference writes (jsonutils.dumps: ", " between items).
func (m Metadata) ExternalIDs() map[string]string {
	ids := m.SubportIDs
	if ids == nil {
		ids = []string{}
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		q, _ := json.Marshal(id)
		b.Write(q)
	}
	b.WriteByte(']')
	return map[string]string{KeyBridgeName: m.BridgeName, KeyTrunkID: m.TrunkID, KeySubportIDs: b.String()}
}

// parseSubportIDs reads subport_ids; a value that does not decode is taken as empty (the
// reference would fail the whole operation; dropping stale metadata only loses what the
// next rewire recomputes).
func parseSubportIDs(s string) []string {
	var ids []string
	if s == "" || json.Unmarshal([]byte(s), &ids) != nil {
		return nil
	}
	return ids
}

// SubportStep is one subport's rows: applied (or failing) together, as the reference's
// one transaction per subport.
type SubportStep struct {
	PortID string
	Add    []Patch
	Del    []PortRef
	// Invalid says why the subport cannot be wired at all (no binding, a segmentation the
	// OVS driver does not do); such a step has no rows and counts as failed.
	Invalid string
}

// Plan is an ordered set of OVSDB changes: Parent, then each of Remove and Add, then
// Metadata (nil: none), then Dispose (a bridge to delete with everything on it).
type Plan struct {
	Parent   []Patch
	Remove   []SubportStep
	Add      []SubportStep
	Metadata *Metadata
	Dispose  string
	DelPorts []PortRef // ports to delete besides the steps (a removed trunk's, a disposed bridge's peers)
	// NoReport: the plan removes or disposes of a trunk; the reference reports no status
	// then (the VM may have moved to another host whose agent reports).
	NoReport bool
}

func patchPair(intBridge, trunkBridge, intName, trunkName, portID, mac string, tag int) []Patch {
	ids := map[string]string{KeyIfaceID: portID}
	if mac != "" {
		ids[KeyAttachedMAC] = mac
	}
	t := tag
	return []Patch{
		{Bridge: intBridge, Name: intName, Peer: trunkName, ExternalIDs: ids},
		{Bridge: trunkBridge, Name: trunkName, Peer: intName, ExternalIDs: maps.Clone(ids), Access: &t},
	}
}

// validSegmentation says whether the OVS driver can wire a subport: VLAN only, with a
// tag OVS accepts on an access port (1-4094; the server allows no other).
func validSegmentation(s neutron.SubPort) string {
	if s.SegmentationType != neutron.SegmentationVLAN {
		return "segmentation type " + s.SegmentationType + " is not vlan"
	}
	if s.SegmentationID < 1 || s.SegmentationID > 4094 {
		return "segmentation id out of 1-4094"
	}
	return ""
}

func addSteps(intBridge, trunkID string, subports []neutron.SubPort, bound map[string]string) []SubportStep {
	br := BridgeName(trunkID)
	steps := make([]SubportStep, 0, len(subports))
	for _, s := range subports {
		st := SubportStep{PortID: s.PortID}
		mac, ok := bound[s.PortID]
		switch {
		case !ok:
			st.Invalid = "not bound to this host by update_subport_bindings"
		case validSegmentation(s) != "":
			st.Invalid = validSegmentation(s)
		default:
			in, tn := SubportPatchNames(s.PortID)
			st.Add = patchPair(intBridge, br, in, tn, s.PortID, mac, s.SegmentationID)
		}
		steps = append(steps, st)
	}
	return steps
}

func removeSteps(intBridge, trunkID string, ids []string, bridgeExists bool) []SubportStep {
	br := BridgeName(trunkID)
	steps := make([]SubportStep, 0, len(ids))
	for _, id := range ids {
		in, tn := SubportPatchNames(id)
		st := SubportStep{PortID: id}
		if bridgeExists {
			st.Del = append(st.Del, PortRef{Bridge: br, Name: tn})
		}
		st.Del = append(st.Del, PortRef{Bridge: intBridge, Name: in})
		steps = append(steps, st)
	}
	return steps
}

// metadata is the parent's metadata after removing removed and adding added.
func metadata(trunkID string, parent Iface, removed, added []string) *Metadata {
	set := map[string]bool{}
	for _, id := range parseSubportIDs(parent.ExternalIDs[KeySubportIDs]) {
		set[id] = true
	}
	for _, id := range removed {
		delete(set, id)
	}
	for _, id := range added {
		set[id] = true
	}
	ids := slices.Sorted(maps.Keys(set))
	return &Metadata{Iface: parent.Name, BridgeName: BridgeName(trunkID), TrunkID: trunkID, SubportIDs: ids}
}

// WireInput is what wiring a trunk bridge needs: the trunk the server returned for the
// VM's parent port, the bridge's interfaces, and the MACs of the subports
// update_subport_bindings bound (by port id).
type WireInput struct {
	IntBridge string
	Trunk     neutron.Trunk
	Ifaces    []Iface
	Bound     map[string]string
}

// Wire is the reference's _wire_trunk for a trunk bridge whose VM is plugged: patch the
// parent, remove the subports the bridge has and the trunk no longer does (only when the
// bridge was wired before), add every subport of the trunk (again, if present: its
// segmentation id may have changed), record the metadata. ok is false when the bridge
// has no VM interface (the caller waits for one, then disposes of the bridge).
func Wire(in WireInput) (Plan, bool) {
	br := BridgeName(in.Trunk.ID)
	parent, ok := ParentIface(br, in.Ifaces)
	if !ok {
		return Plan{}, false
	}
	var p Plan
	pi, pt := ParentPatchNames(in.Trunk.PortID)
	p.Parent = patchPair(in.IntBridge, br, pi, pt, in.Trunk.PortID, parent.ExternalIDs[KeyAttachedMAC], 0)
	var stale []string
	if HasServicePort(br, in.Ifaces) {
		want := map[string]bool{}
		for _, s := range in.Trunk.SubPorts {
			want[s.PortID] = true
		}
		for _, id := range ConnectedSubports(br, in.Ifaces) {
			if !want[id] {
				stale = append(stale, id)
			}
		}
		p.Remove = removeSteps(in.IntBridge, in.Trunk.ID, stale, true)
	}
	p.Add = addSteps(in.IntBridge, in.Trunk.ID, in.Trunk.SubPorts, in.Bound)
	// The reference writes the metadata twice: without the stale subports (unwire), then
	// from the interface as it read it before (wire), so the stale ids come back. Kept:
	// a stale id only makes the unplug delete a port that is already gone, and the
	// interface then reads as the reference's would.
	p.Metadata = metadata(in.Trunk.ID, parent, nil, validIDs(p.Add))
	return p, true
}

func validIDs(steps []SubportStep) []string {
	var ids []string
	for _, s := range steps {
		if s.Invalid == "" {
			ids = append(ids, s.PortID)
		}
	}
	return ids
}

// AddSubports is handle_subports(CREATED) on a trunk this host wires: the subports'
// rows and the metadata, which needs the VM's interface (parent nil: the metadata cannot
// be written and the outcome is DEGRADED, as the reference's ParentPortNotFound).
func AddSubports(intBridge, trunkID string, parent *Iface, subports []neutron.SubPort, bound map[string]string) Plan {
	p := Plan{Add: addSteps(intBridge, trunkID, subports, bound)}
	if parent != nil {
		p.Metadata = metadata(trunkID, *parent, nil, validIDs(p.Add))
	}
	return p
}

// RemoveSubports is handle_subports(DELETED): delete both ends (the trunk side only when
// the bridge still exists) and drop the ids from the metadata when the VM is still there.
func RemoveSubports(intBridge, trunkID string, bridgeExists bool, parent *Iface, ids []string) Plan {
	p := Plan{Remove: removeSteps(intBridge, trunkID, ids, bridgeExists)}
	if bridgeExists && parent != nil {
		p.Metadata = metadata(trunkID, *parent, ids, nil)
	}
	return p
}

// Remove is handle_trunk_remove: the VM's interface left a trunk bridge (os-vif unplugged
// it, usually deleting the bridge too). Its last external_ids say which parent and
// subports were wired; their br-int ends (and trunk ends if the bridge is still there)
// are deleted. ok is false when the interface carries no trunk metadata.
func Remove(intBridge string, removed map[string]string, bridgeExists bool) (Plan, bool) {
	br, trunkID, parentID := removed[KeyBridgeName], removed[KeyTrunkID], removed[KeyIfaceID]
	if !IsTrunkBridge(br) || trunkID == "" || parentID == "" || BridgeName(trunkID) != br {
		return Plan{}, false
	}
	ids := parseSubportIDs(removed[KeySubportIDs])
	p := Plan{Remove: removeSteps(intBridge, trunkID, ids, bridgeExists)}
	pi, _ := ParentPatchNames(parentID)
	p.DelPorts = []PortRef{{Bridge: intBridge, Name: pi}}
	p.NoReport = true
	return p, true
}

// Dispose is dispose_trunk: a trunk bridge without a VM (it never came, or the agent
// restarted after the VM left) is deleted with the br-int peers of its patch ports.
func Dispose(intBridge, bridge string, ifaces []Iface) Plan {
	p := Plan{Dispose: bridge, NoReport: true}
	for _, i := range instanceIfaces(bridge, ifaces) {
		if peer := i.Options["peer"]; peer != "" {
			p.DelPorts = append(p.DelPorts, PortRef{Bridge: intBridge, Name: peer})
		}
	}
	return p
}

// Outcome is what applying a plan did: whether the parent's rows went in, which
// subports' steps failed, whether the metadata was written.
type Outcome struct {
	ParentFailed   bool
	Failed         map[string]bool // subport id -> its step failed
	MetadataFailed bool
}

// Status is the trunk status the reference reports after a plan:
//
//   - ERROR when the parent could not be patched (create_trunk failed; nothing else ran);
//   - DEGRADED when the metadata could not be written (including no VM interface for
//     it), or fewer subports than expected were wired or removed;
//   - ACTIVE otherwise.
//
// A plan that only removes a trunk (Remove) or disposes of a bridge reports nothing: ""
// (the reference avoids racing an agent the VM moved to).
func Status(p Plan, o Outcome) string {
	if p.NoReport {
		return ""
	}
	if len(p.Parent) > 0 && o.ParentFailed {
		return neutron.TrunkError
	}
	degraded := false
	for _, steps := range [][]SubportStep{p.Remove, p.Add} {
		for _, s := range steps {
			if s.Invalid != "" || o.Failed[s.PortID] {
				degraded = true
			}
		}
	}
	// Metadata is written when adding and when removing subports with the VM present; a
	// wire without the VM's interface has none to write.
	if p.Metadata == nil && len(p.Add) > 0 {
		degraded = true
	}
	if p.Metadata != nil && o.MetadataFailed {
		degraded = true
	}
	if degraded {
		return neutron.TrunkDegraded
	}
	return neutron.TrunkActive
}
