package ovsdb

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/ovsagent/ovsagent/internal/ovsdb/vswitchd"
	"github.com/ovsagent/ovsagent/internal/ovsdb/wire"
)

// Bridge settings the reference writes (ovs_lib.OVSBridge.create and the
// agent's setup_*_br).
const (
	FailModeSecure      = "secure"
	DatapathNetdev      = "netdev"
	DatapathSystem      = "system"
	DefaultMACTableSize = "50000"
)

// DefaultProtocols is the reference's initial protocol set for every bridge.
var DefaultProtocols = []string{"OpenFlow10", "OpenFlow13", "OpenFlow14"}

// BridgeSpec is what a bridge must look like. Maps and protocols are merged
// into what exists (keys and protocols the spec does not name are kept), as
// the reference's db_set/db_add do.
type BridgeSpec struct {
	Name         string
	DatapathType string // "system" when empty; "netdev" on these hosts
	FailMode     string // "secure" when empty
	// Protocols are added when missing (DefaultProtocols when nil); never removed.
	Protocols []string
	// OtherConfig pairs to set, e.g. mac-table-size, disable-in-band.
	OtherConfig map[string]string
	// ExternalIDs pairs to set.
	ExternalIDs map[string]string
	// McastSnoopingEnable, when non-nil, sets mcast_snooping_enable.
	McastSnoopingEnable *bool
	// Controllers, when non-nil, is the exact controller target list
	// (e.g. "tcp:127.0.0.1:6633"); nil leaves controllers alone.
	Controllers []string
	// InactivityProbeMS, when > 0, is set on the bridge's controllers.
	InactivityProbeMS int
	// ControllerConnectionMode, when set ("out-of-band" in the reference's
	// rows), is set on the bridge's controllers.
	ControllerConnectionMode string
}

// IGMP is the reference's [ovs] igmp_* options, as neutron 2026.2 (since
// 2024.1) writes them: igmp_snooping_enable turns snooping on for br-int;
// the three flood options say what is flooded anyway. Zed wrote
// disable-flood-unregistered=false on br-int and str(igmp_snooping_enable)
// ("True"/"False") for both port flood keys instead.
type IGMP struct {
	Snooping          bool // igmp_snooping_enable (default False)
	Flood             bool // igmp_flood (default False)
	FloodReports      bool // igmp_flood_reports (default True)
	FloodUnregistered bool // igmp_flood_unregistered (default False)
}

// DefaultIGMP is the options' defaults.
func DefaultIGMP() IGMP { return IGMP{FloodReports: true} }

// BridgeOtherConfig is the other_config the reference sets on br-int: the OVS
// key says "disable", the option "flood", hence the inversion.
func (g IGMP) BridgeOtherConfig() map[string]string {
	return map[string]string{"mcast-snooping-disable-flood-unregistered": strconv.FormatBool(!g.FloodUnregistered)}
}

// PortOtherConfig is the Port other_config the reference sets on br-int's
// patch ports (int-<br>, patch-tun), lower-case as str(bool).lower().
func (g IGMP) PortOtherConfig() map[string]string {
	return map[string]string{
		"mcast-snooping-flood":         strconv.FormatBool(g.Flood),
		"mcast-snooping-flood-reports": strconv.FormatBool(g.FloodReports),
	}
}

// ReferenceBridge is the spec the reference agent (2026.2) leaves on its
// bridges: secure, OpenFlow10/13/14, other_config:mac-table-size
// (bridge_mac_table_size); on br-int also mcast_snooping_enable and
// other_config:mcast-snooping-disable-flood-unregistered (IGMP).
// Controllers are left alone; set Controllers, InactivityProbeMS and
// ControllerConnectionMode to add the reference's tcp:127.0.0.1:6633, 10000 ms,
// out-of-band.
func ReferenceBridge(name, datapathType string, macTableSize int, integration bool, igmp IGMP) BridgeSpec {
	s := BridgeSpec{
		Name:         name,
		DatapathType: datapathType,
		FailMode:     FailModeSecure,
		Protocols:    DefaultProtocols,
		OtherConfig:  map[string]string{"mac-table-size": strconv.Itoa(macTableSize)},
	}
	if integration {
		maps.Copy(s.OtherConfig, igmp.BridgeOtherConfig())
		s.McastSnoopingEnable = &igmp.Snooping
	}
	return s
}

func (s BridgeSpec) normalized() BridgeSpec {
	if s.DatapathType == "" {
		s.DatapathType = DatapathSystem
	}
	if s.FailMode == "" {
		s.FailMode = FailModeSecure
	}
	if s.Protocols == nil {
		s.Protocols = DefaultProtocols
	}
	return s
}

// EnsureBridges creates missing bridges (with their internal port) and brings
// existing ones to spec, all in one transaction, and waits for ovs-vswitchd to
// apply it. It returns the number of operations sent: 0 when everything
// already matched.
func (c *Client) EnsureBridges(ctx context.Context, specs ...BridgeSpec) (int, error) {
	v, err := c.readView(ctx, true)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	root := c.rootUUID
	c.mu.Unlock()
	var ops []wire.Operation
	for i, s := range specs {
		s = s.normalized()
		if s.Name == "" || len(s.Name) > DeviceNameMaxLen {
			return 0, fmt.Errorf("ovsdb: ensure bridge %q: invalid name", s.Name)
		}
		if b := v.bridges[s.Name]; b != nil {
			ops = append(ops, bridgeDiffOps(v, b, s, i)...)
			continue
		}
		ops = append(ops, newBridgeOps(root, s, i)...)
	}
	if err := c.transact(ctx, "ensure bridges", ops, true); err != nil {
		return 0, err
	}
	// A bridge whose datapath cannot be opened keeps its rows but has no
	// valid ofport on its internal port.
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return len(ops), c.checkOfports(ctx, names)
}

func newBridgeOps(root string, s BridgeSpec, seq int) []wire.Operation {
	ifRef, portRef, brRef := fmt.Sprintf("briface%d", seq), fmt.Sprintf("brport%d", seq), fmt.Sprintf("bridge%d", seq)
	row := wire.Row{
		"name":          s.Name,
		"datapath_type": s.DatapathType,
		"fail_mode":     s.FailMode,
		"protocols":     strSet(s.Protocols),
		"ports":         namedRefs(portRef),
	}
	if len(s.OtherConfig) > 0 {
		row["other_config"] = wire.Map(s.OtherConfig)
	}
	if len(s.ExternalIDs) > 0 {
		row["external_ids"] = wire.Map(s.ExternalIDs)
	}
	if s.McastSnoopingEnable != nil {
		row["mcast_snooping_enable"] = *s.McastSnoopingEnable
	}
	ops := []wire.Operation{
		{Op: wire.OpInsert, Table: "Interface", UUIDName: ifRef,
			Row: wire.Row{"name": s.Name, "type": "internal"}},
		{Op: wire.OpInsert, Table: "Port", UUIDName: portRef,
			Row: wire.Row{"name": s.Name, "interfaces": namedRefs(ifRef)}},
	}
	ctlOps, ctlRefs := s.controllerOps(seq)
	ops = append(ops, ctlOps...)
	if len(ctlRefs) > 0 {
		row["controller"] = namedRefs(ctlRefs...)
	}
	ops = append(ops,
		wire.Operation{Op: wire.OpInsert, Table: "Bridge", UUIDName: brRef, Row: row},
		mutateOp("Open_vSwitch", byUUID(root),
			wire.Mutation{Column: "bridges", Mutator: wire.MutInsert, Value: namedRefs(brRef)}))
	return ops
}

func (s BridgeSpec) controllerOps(seq int) ([]wire.Operation, []string) {
	var ops []wire.Operation
	var refs []string
	for j, t := range s.Controllers {
		ref := fmt.Sprintf("ctl%d_%d", seq, j)
		crow := wire.Row{"target": t}
		if s.InactivityProbeMS > 0 {
			crow["inactivity_probe"] = s.InactivityProbeMS
		}
		if s.ControllerConnectionMode != "" {
			crow["connection_mode"] = s.ControllerConnectionMode
		}
		ops = append(ops, wire.Operation{Op: wire.OpInsert, Table: "Controller", UUIDName: ref, Row: crow})
		refs = append(refs, ref)
	}
	return ops, refs
}

func bridgeDiffOps(v *view, b *vswitchd.Bridge, s BridgeSpec, seq int) []wire.Operation {
	where := byName(s.Name)
	row := wire.Row{}
	if b.DatapathType != s.DatapathType {
		row["datapath_type"] = s.DatapathType
	}
	if b.FailMode == nil || string(*b.FailMode) != s.FailMode {
		row["fail_mode"] = s.FailMode
	}
	if s.McastSnoopingEnable != nil && b.McastSnoopingEnable != *s.McastSnoopingEnable {
		row["mcast_snooping_enable"] = *s.McastSnoopingEnable
	}
	var ops []wire.Operation
	if s.Controllers != nil {
		var have []string
		for _, u := range b.Controller {
			if ct := v.controllers[u]; ct != nil {
				have = append(have, ct.Target)
			}
		}
		want := slices.Clone(s.Controllers)
		slices.Sort(have)
		slices.Sort(want)
		if !slices.Equal(have, want) || len(have) != len(b.Controller) {
			ctlOps, refs := s.controllerOps(seq)
			ops = append(ops, ctlOps...)
			row["controller"] = namedRefs(refs...)
		} else {
			for _, u := range b.Controller {
				ct := v.controllers[u]
				if ct == nil {
					continue
				}
				crow := wire.Row{}
				if s.InactivityProbeMS > 0 && deref(ct.InactivityProbe) != s.InactivityProbeMS {
					crow["inactivity_probe"] = s.InactivityProbeMS
				}
				if s.ControllerConnectionMode != "" && string(deref(ct.ConnectionMode)) != s.ControllerConnectionMode {
					crow["connection_mode"] = s.ControllerConnectionMode
				}
				if len(crow) > 0 {
					ops = append(ops, updateOp("Controller", byUUID(u), crow))
				}
			}
		}
	}
	if len(row) > 0 {
		ops = append(ops, updateOp("Bridge", where, row))
	}
	var muts []wire.Mutation
	var missing []string
	for _, p := range s.Protocols {
		if !slices.Contains(b.Protocols, p) {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		muts = append(muts, wire.Mutation{Column: "protocols", Mutator: wire.MutInsert, Value: strSet(missing)})
	}
	muts = append(muts, mergeMutations("other_config", b.OtherConfig, s.OtherConfig)...)
	muts = append(muts, mergeMutations("external_ids", b.ExternalIDs, s.ExternalIDs)...)
	if len(muts) > 0 {
		ops = append(ops, mutateOp("Bridge", where, muts...))
	}
	return ops
}

// BridgeExists reports whether a bridge of that name exists (the reference
// requires bridge_mappings bridges to pre-exist).
func (c *Client) BridgeExists(ctx context.Context, name string) (bool, error) {
	v, err := c.readView(ctx, false)
	if err != nil {
		return false, fmt.Errorf("ovsdb: bridge %s: %w", name, err)
	}
	return v.bridges[name] != nil, nil
}

// Bridges lists the names of all bridges.
func (c *Client) Bridges(ctx context.Context) ([]string, error) {
	v, err := c.readView(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("ovsdb: list bridges: %w", err)
	}
	return slices.Sorted(maps.Keys(v.bridges)), nil
}

// BridgeInfo is the cached state of one bridge.
type BridgeInfo struct {
	Name         string
	UUID         string
	DatapathType string
	DatapathID   string
	FailMode     string
	Protocols    []string
	OtherConfig  map[string]string
	ExternalIDs  map[string]string
	Controllers  []string
}

// Bridge returns one bridge's state; the error wraps ErrNotFound when absent.
func (c *Client) Bridge(ctx context.Context, name string) (BridgeInfo, error) {
	v, err := c.readView(ctx, true)
	if err != nil {
		return BridgeInfo{}, err
	}
	b := v.bridges[name]
	if b == nil {
		return BridgeInfo{}, fmt.Errorf("ovsdb: bridge %s: %w", name, ErrNotFound)
	}
	bi := BridgeInfo{
		Name: b.Name, UUID: b.UUID, DatapathType: b.DatapathType, DatapathID: deref(b.DatapathID),
		OtherConfig: cloneMap(b.OtherConfig), ExternalIDs: cloneMap(b.ExternalIDs),
	}
	if b.FailMode != nil {
		bi.FailMode = string(*b.FailMode)
	}
	for _, p := range b.Protocols {
		bi.Protocols = append(bi.Protocols, string(p))
	}
	slices.Sort(bi.Protocols)
	for _, u := range b.Controller {
		if ct := v.controllers[u]; ct != nil {
			bi.Controllers = append(bi.Controllers, ct.Target)
		}
	}
	slices.Sort(bi.Controllers)
	return bi, nil
}

// BridgeExternalIDs returns a bridge's external_ids (the agent keeps its
// cookie round there).
func (c *Client) BridgeExternalIDs(ctx context.Context, bridge string) (map[string]string, error) {
	v, err := c.readView(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("ovsdb: bridge %s external_ids: %w", bridge, err)
	}
	b := v.bridges[bridge]
	if b == nil {
		return nil, fmt.Errorf("ovsdb: bridge %s external_ids: %w", bridge, ErrNotFound)
	}
	if b.ExternalIDs == nil {
		return map[string]string{}, nil
	}
	return cloneMap(b.ExternalIDs), nil
}

// SetBridgeExternalIDs sets the given pairs and removes the keys in del, in one
// transaction; other keys are kept.
func (c *Client) SetBridgeExternalIDs(ctx context.Context, bridge string, set map[string]string, del ...string) error {
	var muts []wire.Mutation
	if len(del) > 0 {
		muts = append(muts, wire.Mutation{Column: "external_ids", Mutator: wire.MutDelete, Value: strSet(del)})
	}
	if len(set) > 0 {
		keys := make([]string, 0, len(set))
		for k := range set {
			keys = append(keys, k)
		}
		muts = append(muts,
			wire.Mutation{Column: "external_ids", Mutator: wire.MutDelete, Value: strSet(keys)},
			wire.Mutation{Column: "external_ids", Mutator: wire.MutInsert, Value: wire.Map(set)})
	}
	if len(muts) == 0 {
		return nil
	}
	op := mutateOp("Bridge", byName(bridge), muts...)
	if err := c.transactOne(ctx, "set external_ids of bridge "+bridge, op); err != nil {
		return err
	}
	return nil
}

// transactOne runs a single mutate/update and fails when it matched no row.
func (c *Client) transactOne(ctx context.Context, what string, op wire.Operation) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.transactRaw(ctx, []wire.Operation{op})
	if err != nil {
		return fmt.Errorf("ovsdb: %s: %w", what, err)
	}
	if res[0].Count == 0 {
		return fmt.Errorf("ovsdb: %s: %w", what, ErrNotFound)
	}
	return nil
}

// SystemInfo is the Open_vSwitch row's content the agent reports.
type SystemInfo struct {
	OVSVersion    string
	DatapathTypes []string
	IfaceTypes    []string
	ExternalIDs   map[string]string // hostname, system-id, rundir
	OtherConfig   map[string]string // e.g. hw-offload
}

// HWOffload reports other_config:hw-offload=true (tunnel ports then omit
// egress_pkt_mark, as the reference does).
func (s SystemInfo) HWOffload() bool { return s.OtherConfig["hw-offload"] == "true" }

// System reads the Open_vSwitch row.
func (c *Client) System(ctx context.Context) (SystemInfo, error) {
	v, err := c.readView(ctx, false)
	if err != nil {
		return SystemInfo{}, fmt.Errorf("ovsdb: read Open_vSwitch: %w", err)
	}
	r := v.root
	if r == nil {
		return SystemInfo{}, fmt.Errorf("ovsdb: read Open_vSwitch: no row")
	}
	si := SystemInfo{
		OVSVersion:    deref(r.OVSVersion),
		DatapathTypes: slices.Sorted(slices.Values(r.DatapathTypes)),
		IfaceTypes:    slices.Sorted(slices.Values(r.IfaceTypes)),
		ExternalIDs:   cloneMap(r.ExternalIDs),
		OtherConfig:   cloneMap(r.OtherConfig),
	}
	return si, nil
}

// CountRows counts the rows of an OVSDB table the monitor does not follow
// (QoS, Queue: state of the reference's QoS extension).
func (c *Client) CountRows(ctx context.Context, table string) (int, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.transactRaw(ctx, []wire.Operation{{Op: wire.OpSelect, Table: table, Columns: []string{"_uuid"}}})
	if err != nil {
		return 0, fmt.Errorf("ovsdb: count %s rows: %w", table, err)
	}
	if len(res) != 1 {
		return 0, fmt.Errorf("ovsdb: count %s rows: %d results", table, len(res))
	}
	return len(res[0].Rows), nil
}
