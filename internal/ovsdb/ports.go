package ovsdb

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/ovsagent/ovsagent/internal/ovsdb/vswitchd"
	"github.com/ovsagent/ovsagent/internal/ovsdb/wire"
)

// Ofport values besides real port numbers.
const (
	OfportUnassigned = 0  // the column is empty: ovs-vswitchd has not set it yet
	OfportInvalid    = -1 // ovs-vswitchd failed to create the port
)

// NoTag is PortInfo.Tag for a port without a VLAN tag.
const NoTag = -1

// PatchPort is one end of a patch pair.
type PatchPort struct {
	Bridge string
	Name   string
	Peer   string
	// CreateUnpeered creates a missing port with peer "nonexistent-peer" and
	// leaves an existing port's peer alone, so that drop flows can be installed
	// before traffic passes (the reference's physical-bridge order). A second
	// call without it then connects the pair.
	CreateUnpeered bool
	// PortOtherConfig pairs to set on the Port (mcast-snooping-flood, ...).
	PortOtherConfig map[string]string
}

// PatchPair returns both ends of a patch pair between bridge a (port an) and
// bridge b (port bn), e.g. PatchPair("br-int", "patch-tun", "br-tun", "patch-int").
func PatchPair(a, an, b, bn string) []PatchPort {
	return []PatchPort{{Bridge: a, Name: an, Peer: bn}, {Bridge: b, Name: bn, Peer: an}}
}

// TunnelPort is a tunnel interface on the tunnel bridge. Name is derived with
// TunnelPortName when empty.
type TunnelPort struct {
	Bridge   string
	Name     string
	Type     string // vxlan, gre, geneve
	RemoteIP string
	LocalIP  string
	// DstPort is the vxlan UDP port; written only when not 4789, as the reference.
	DstPort      int
	DontFragment bool   // options:df_default
	Csum         bool   // options:csum=true when set
	TOS          string // options:tos when non-empty ("inherit" or a number)
	// NoEgressPktMark omits egress_pkt_mark=0 (the reference does so with hw-offload).
	NoEgressPktMark bool
	// Hash selects the IPv6 naming rule when Name is empty.
	Hash TunnelHash
}

// InterfaceType is the OVS interface type: gre becomes ip6gre over IPv6.
func (t TunnelPort) InterfaceType() string {
	if t.Type == "gre" && (isV6(t.RemoteIP) || isV6(t.LocalIP)) {
		return "ip6gre"
	}
	return t.Type
}

func isV6(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is6() && !a.Is4In6()
}

// tunnelOptionKeys are every option TunnelPort.Options may write.
var tunnelOptionKeys = []string{"df_default", "remote_ip", "local_ip", "in_key", "out_key", "dst_port",
	"egress_pkt_mark", "csum", "tos", "packet_type"}

// Options are the interface options, exactly as the reference's add_tunnel_port.
func (t TunnelPort) Options() map[string]string {
	o := map[string]string{
		"df_default": strconv.FormatBool(t.DontFragment),
		"remote_ip":  t.RemoteIP,
		"local_ip":   t.LocalIP,
		"in_key":     "flow",
		"out_key":    "flow",
	}
	if t.Type == "vxlan" && t.DstPort != 0 && t.DstPort != 4789 {
		o["dst_port"] = strconv.Itoa(t.DstPort)
	}
	if !t.NoEgressPktMark {
		o["egress_pkt_mark"] = "0"
	}
	if t.Csum {
		o["csum"] = "true"
	}
	if t.TOS != "" {
		o["tos"] = t.TOS
	}
	if t.InterfaceType() == "ip6gre" {
		o["packet_type"] = "legacy_l2"
	}
	return o
}

func (t TunnelPort) name() (string, error) {
	if t.Name != "" {
		return t.Name, nil
	}
	return TunnelPortName(t.Type, t.RemoteIP, t.Hash)
}

// wantPort is a port with one interface of the same name, as the agent creates them.
type wantPort struct {
	bridge, name, ifType string
	options              map[string]string
	keepPeer             bool     // CreateUnpeered on an existing port
	managed              []string // option keys the agent owns (removed when not wanted)
	portOther            map[string]string
}

// EnsurePatchPorts creates or fixes patch ports, all in one transaction, and
// waits for ovs-vswitchd so that their ofports are known (BridgePorts). It
// returns the number of operations sent (0: nothing to do).
func (c *Client) EnsurePatchPorts(ctx context.Context, ports ...PatchPort) (int, error) {
	want := make([]wantPort, 0, len(ports))
	for _, p := range ports {
		peer := p.Peer
		if p.CreateUnpeered {
			peer = NonexistentPeer
		}
		want = append(want, wantPort{bridge: p.Bridge, name: p.Name, ifType: "patch",
			options: map[string]string{"peer": peer}, keepPeer: p.CreateUnpeered, portOther: p.PortOtherConfig,
			managed: []string{"peer"}})
	}
	return c.ensurePorts(ctx, "ensure patch ports", want)
}

// EnsureTunnelPorts creates or fixes tunnel ports in one transaction and
// waits for ovs-vswitchd. Existing ports of the same name are reused and their
// type and options replaced when they differ.
func (c *Client) EnsureTunnelPorts(ctx context.Context, ports ...TunnelPort) (int, error) {
	want := make([]wantPort, 0, len(ports))
	for _, t := range ports {
		name, err := t.name()
		if err != nil {
			return 0, err
		}
		if len(name) > DeviceNameMaxLen {
			return 0, fmt.Errorf("ovsdb: tunnel port %q: name too long", name)
		}
		want = append(want, wantPort{bridge: t.Bridge, name: name, ifType: t.InterfaceType(), options: t.Options(),
			managed: tunnelOptionKeys})
	}
	return c.ensurePorts(ctx, "ensure tunnel ports", want)
}

func (c *Client) ensurePorts(ctx context.Context, what string, want []wantPort) (int, error) {
	v, err := c.readView(ctx, true)
	if err != nil {
		return 0, err
	}
	var ops []wire.Operation
	for i, w := range want {
		if v.bridges[w.bridge] == nil {
			return 0, fmt.Errorf("ovsdb: %s: port %s: bridge %s: %w", what, w.name, w.bridge, ErrNotFound)
		}
		p := v.portByName[w.name]
		if p == nil {
			ops = append(ops, newPortOps(w.bridge, w.name, w.ifType, w.options, w.portOther, i)...)
			continue
		}
		if br := v.portBridge[p.UUID]; br != w.bridge {
			// Port names are global in OVS; one on another bridge is not ours to move.
			return 0, fmt.Errorf("ovsdb: %s: port %s is on bridge %q, not %s", what, w.name, br, w.bridge)
		}
		if m := mergeMutations("other_config", p.OtherConfig, w.portOther); m != nil {
			ops = append(ops, mutateOp("Port", byName(w.name), m...))
		}
		ifc := v.iface(p)
		if ifc == nil {
			continue
		}
		// Options the agent manages are set or removed; others (an
		// operator's) are kept, as the reference's db_set merge keeps them.
		wantOpts := make(map[string]string, len(ifc.Options)+len(w.options))
		for k, val := range ifc.Options {
			if !slices.Contains(w.managed, k) {
				wantOpts[k] = val
			}
		}
		maps.Copy(wantOpts, w.options)
		if _, ok := ifc.Options["peer"]; ok && w.keepPeer {
			wantOpts["peer"] = ifc.Options["peer"]
		}
		row := wire.Row{}
		if ifc.Type != w.ifType {
			row["type"] = w.ifType
		}
		if !mapsEqual(ifc.Options, wantOpts) {
			row["options"] = wire.Map(wantOpts)
		}
		if len(row) > 0 {
			ops = append(ops, updateOp("Interface", byUUID(ifc.UUID), row))
		}
	}
	if err := c.transact(ctx, what, ops, true); err != nil {
		return 0, err
	}
	names := make([]string, len(want))
	for i, w := range want {
		names[i] = w.name
	}
	return len(ops), c.checkOfports(ctx, names)
}

// FailedPortsError lists ports ovs-vswitchd could not bring up (no valid
// ofport once it applied the change), with the Interface's error column. The
// rows are committed; the caller decides (the reference exits for patch
// ports and skips a failed tunnel).
type FailedPortsError struct {
	Ports map[string]string // name -> Interface error (may be empty)
}

func (e *FailedPortsError) Error() string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(e.Ports)) {
		parts = append(parts, fmt.Sprintf("%s (%s)", n, e.Ports[n]))
	}
	return "ovsdb: ovs-vswitchd could not create ports: " + strings.Join(parts, ", ")
}

// checkOfports runs after ovs-vswitchd acknowledged the change, so the cache
// holds the ofports it assigned.
func (c *Client) checkOfports(ctx context.Context, names []string) error {
	v, err := c.readView(ctx, false)
	if err != nil {
		return err
	}
	failed := map[string]string{}
	for _, n := range names {
		p := v.portByName[n]
		if p == nil {
			failed[n] = "port missing"
			continue
		}
		ifc := v.iface(p)
		if ifc == nil {
			failed[n] = "interface missing"
			continue
		}
		if deref(ifc.Ofport) <= 0 {
			failed[n] = deref(ifc.Error)
		}
	}
	if len(failed) > 0 {
		return &FailedPortsError{Ports: failed}
	}
	return nil
}

// DeletePorts removes ports from bridge in one transaction; names not on the
// bridge are ignored (like --if-exists).
func (c *Client) DeletePorts(ctx context.Context, bridge string, names ...string) error {
	v, err := c.readView(ctx, true)
	if err != nil {
		return err
	}
	var uuids []string
	for _, n := range names {
		if p := v.portByName[n]; p != nil && v.portBridge[p.UUID] == bridge {
			uuids = append(uuids, p.UUID)
		}
	}
	if len(uuids) == 0 {
		return nil
	}
	op := mutateOp("Bridge", byName(bridge),
		wire.Mutation{Column: "ports", Mutator: wire.MutDelete, Value: uuidRefs(uuids...)})
	return c.transact(ctx, fmt.Sprintf("delete %d ports from %s", len(uuids), bridge), []wire.Operation{op}, false)
}

// PortInfo is a port on a bridge with its (single) interface.
type PortInfo struct {
	Name   string
	Bridge string
	// Ofport: >0 a port number, OfportUnassigned not yet, OfportInvalid failed.
	Ofport int
	Type   string // interface type: "", internal, patch, vxlan, ...
	// Tag is the Port's VLAN tag or NoTag.
	Tag         int
	VLANMode    string
	Trunks      []int
	OtherConfig map[string]string // Port other_config (net_uuid, segmentation_id, ...)
	ExternalIDs map[string]string // Interface external_ids (iface-id, attached-mac, ...)
	Options     map[string]string // Interface options (peer, remote_ip, ...)
	Error       string            // Interface error, when OVS could not create it
}

// IsVIF reports whether this is a VM port as the reference recognises them:
// external_ids iface-id and attached-mac (ofport not considered).
func (p PortInfo) IsVIF() bool {
	return p.ExternalIDs["iface-id"] != "" && p.ExternalIDs["attached-mac"] != ""
}

// BridgePorts returns every port of bridge, sorted by name, with tags and
// other_config (for local VLAN adoption at restart) and ofports.
func (c *Client) BridgePorts(ctx context.Context, bridge string) ([]PortInfo, error) {
	v, err := c.readView(ctx, true)
	if err != nil {
		return nil, err
	}
	b := v.bridges[bridge]
	if b == nil {
		return nil, fmt.Errorf("ovsdb: ports of %s: %w", bridge, ErrNotFound)
	}
	out := make([]PortInfo, 0, len(b.Ports))
	for _, u := range b.Ports {
		p := v.ports[u]
		if p == nil {
			continue
		}
		pi := PortInfo{Name: p.Name, Bridge: bridge, Tag: NoTag, Trunks: slices.Clone(p.Trunks), OtherConfig: cloneMap(p.OtherConfig)}
		if p.Tag != nil {
			pi.Tag = *p.Tag
		}
		if p.VLANMode != nil {
			pi.VLANMode = string(*p.VLANMode)
		}
		if ifc := v.iface(p); ifc != nil {
			pi.Type, pi.Options, pi.ExternalIDs = ifc.Type, cloneMap(ifc.Options), cloneMap(ifc.ExternalIDs)
			pi.Ofport = deref(ifc.Ofport)
			pi.Error = deref(ifc.Error)
		}
		out = append(out, pi)
	}
	slices.SortFunc(out, func(a, b PortInfo) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out, nil
}

// PortBinding is what the agent writes on a bound (or dead) port.
type PortBinding struct {
	Name string
	// Tag is the local VLAN. Any tag but DeadVLANTag also clears vlan_mode and
	// trunks (a port born dead has vlan_mode=trunk, trunks=[4095]); DeadVLANTag
	// only sets the tag, like the reference's port_dead.
	Tag int
	// OtherConfig pairs to set (net_uuid, network_type, physical_network,
	// segmentation_id, tag; all strings); other keys are kept.
	OtherConfig map[string]string
	// IfaceOtherConfig, when not nil, is the whole other_config the port's
	// Interface (same name) must have, replacing every key: the reference's
	// port hints set_db_attribute / clear_db_attribute (empty: cleared).
	IfaceOtherConfig map[string]string
}

// BindingOtherConfig builds the reference's Port other_config for a bound
// port: physical_network "None" when empty; segmentation_id only when set.
func BindingOtherConfig(netUUID, networkType, physicalNetwork string, segmentationID *int, tag int) map[string]string {
	if physicalNetwork == "" {
		physicalNetwork = "None"
	}
	m := map[string]string{
		"net_uuid":         netUUID,
		"network_type":     networkType,
		"physical_network": physicalNetwork,
		"tag":              strconv.Itoa(tag),
	}
	if segmentationID != nil {
		m["segmentation_id"] = strconv.Itoa(*segmentationID)
	}
	return m
}

// SetPortBindings writes tag (+ vlan_mode/trunks cleared), other_config and
// the Interface's other_config (IfaceOtherConfig) on many ports in one
// transaction. Ports already in that state are skipped, so
// a repeat sends nothing; written counts the ports written. Names that are not
// in the database are returned in missing and otherwise ignored (the port
// vanished; its removal event follows).
func (c *Client) SetPortBindings(ctx context.Context, bindings []PortBinding) (written int, missing []string, err error) {
	v, err := c.readView(ctx, true)
	if err != nil {
		return 0, nil, err
	}
	ops := make([]wire.Operation, 0, len(bindings))
	for _, b := range bindings {
		if b.Tag < 0 || b.Tag > DeadVLANTag {
			return 0, nil, fmt.Errorf("ovsdb: set binding of %s: tag %d out of range", b.Name, b.Tag)
		}
		p := v.portByName[b.Name]
		if p == nil {
			missing = append(missing, b.Name)
			continue
		}
		where := byUUID(p.UUID)
		row := wire.Row{}
		live := b.Tag != DeadVLANTag
		if p.Tag == nil || *p.Tag != b.Tag || (live && (p.VLANMode != nil || len(p.Trunks) > 0)) {
			row["tag"] = b.Tag
			if live {
				// Cleared whenever the row is written, as the reference does,
				// so a cache that lags an earlier vlan_mode=trunk does not matter.
				row["vlan_mode"] = wire.Set{}
				row["trunks"] = wire.Set{}
			}
		}
		if merged, changed := mergedMap(p.OtherConfig, b.OtherConfig); changed {
			// old ∪ new, written whole as the reference does; the cache was
			// synced by readView, and nobody else writes these keys.
			row["other_config"] = wire.Map(merged)
		}
		ifaceOp := ifaceOtherConfigOp(v, p, b)
		if len(row) > 0 {
			ops = append(ops, updateOp("Port", where, row))
		}
		if ifaceOp != nil {
			ops = append(ops, *ifaceOp)
		}
		if len(row) > 0 || ifaceOp != nil {
			written++
		}
	}
	if err := c.transact(ctx, fmt.Sprintf("set bindings of %d ports", written), ops, false); err != nil {
		return 0, missing, err
	}
	return written, missing, nil
}

// ifaceOtherConfigOp is the Interface other_config write binding b needs on
// port p, nil when none (not asked for, or already so).
func ifaceOtherConfigOp(v *view, p *vswitchd.Port, b PortBinding) *wire.Operation {
	if b.IfaceOtherConfig == nil {
		return nil
	}
	for _, id := range p.Interfaces {
		ifc := v.ifaces[id]
		if ifc == nil || ifc.Name != b.Name {
			continue
		}
		if mapsEqual(ifc.OtherConfig, b.IfaceOtherConfig) {
			return nil
		}
		op := updateOp("Interface", byUUID(ifc.UUID), wire.Row{"other_config": wire.Map(b.IfaceOtherConfig)})
		return &op
	}
	return nil
}

// mergedMap returns cur with want's pairs set, and whether that differs from cur.
func mergedMap(cur, want map[string]string) (map[string]string, bool) {
	changed := false
	for k, v := range want {
		if old, ok := cur[k]; !ok || old != v {
			changed = true
			break
		}
	}
	if !changed {
		return cur, false
	}
	out := make(map[string]string, len(cur)+len(want))
	maps.Copy(out, cur)
	maps.Copy(out, want)
	return out, true
}

// cloneMap is used where callers receive maps they may modify.
func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return maps.Clone(m)
}
