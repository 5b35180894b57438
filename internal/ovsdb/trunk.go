package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ovsagent/ovsagent/internal/ovsdb/wire"
)

// The rows of trunk ports (internal/trunk decides them): patch ports between br-int
// and a trunk bridge with external_ids and an access tag, the trunk's metadata on the
// VM's interface, the deletion of patch ports and of a trunk bridge. Each call is one
// transaction, as each of the reference's trunk_manager operations is one.

// BridgeIface is an interface of a bridge as the cache holds it (maps are copies).
type BridgeIface struct {
	Name        string
	Type        string
	ExternalIDs map[string]string
	Options     map[string]string
}

// BridgeIfaces lists the interfaces of bridge (its own local interface included) after a
// round trip to the server. exists is false when there is no such bridge.
func (c *Client) BridgeIfaces(ctx context.Context, bridge string) (ifaces []BridgeIface, exists bool, err error) {
	v, err := c.readView(ctx, true)
	if err != nil {
		return nil, false, err
	}
	b := v.bridges[bridge]
	if b == nil {
		return nil, false, nil
	}
	for _, pu := range b.Ports {
		p := v.ports[pu]
		if p == nil {
			continue
		}
		for _, iu := range p.Interfaces {
			if i := v.ifaces[iu]; i != nil {
				ifaces = append(ifaces, BridgeIface{Name: i.Name, Type: i.Type,
					ExternalIDs: maps.Clone(i.ExternalIDs), Options: maps.Clone(i.Options)})
			}
		}
	}
	slices.SortFunc(ifaces, func(a, b BridgeIface) int { return strings.Compare(a.Name, b.Name) })
	return ifaces, true, nil
}

// TrunkPatch is one end of a trunk patch pair.
type TrunkPatch struct {
	Bridge string
	Name   string
	Peer   string
	// ExternalIDs are merged into the Interface's (other keys are kept, as the
	// reference's db_set merges a map).
	ExternalIDs map[string]string
	// AccessTag, when set, makes the Port an access port of this tag.
	AccessTag *int
}

// ErrBridgeMissing is returned (wrapped) when a trunk row names a bridge that does not
// exist: the reference's TrunkBridgeNotFound.
var ErrBridgeMissing = errors.New("bridge does not exist")

// EnsureTrunkPatches creates or fixes patch ports in one transaction and waits for
// ovs-vswitchd. A port of the same name on another bridge is an error (names are
// global in OVS; it is not ours to move).
func (c *Client) EnsureTrunkPatches(ctx context.Context, ps ...TrunkPatch) error {
	if len(ps) == 0 {
		return nil
	}
	v, err := c.readView(ctx, true)
	if err != nil {
		return err
	}
	var ops []wire.Operation
	for i, x := range ps {
		if len(x.Name) > DeviceNameMaxLen || x.Name == "" {
			return fmt.Errorf("ovsdb: trunk patch %q: invalid name", x.Name)
		}
		if v.bridges[x.Bridge] == nil {
			return fmt.Errorf("ovsdb: trunk patch %s: bridge %s: %w", x.Name, x.Bridge, ErrBridgeMissing)
		}
		p := v.portByName[x.Name]
		if p == nil {
			ops = append(ops, newTrunkPatchOps(x, i)...)
			continue
		}
		if br := v.portBridge[p.UUID]; br != x.Bridge {
			return fmt.Errorf("ovsdb: trunk patch %s is on bridge %q, not %s", x.Name, br, x.Bridge)
		}
		if x.AccessTag != nil && (p.Tag == nil || *p.Tag != *x.AccessTag || p.VLANMode == nil || *p.VLANMode != "access") {
			ops = append(ops, updateOp("Port", byUUID(p.UUID), wire.Row{"tag": *x.AccessTag, "vlan_mode": "access"}))
		}
		ifc := v.iface(p)
		if ifc == nil {
			continue
		}
		if ifc.Type != "patch" {
			ops = append(ops, updateOp("Interface", byUUID(ifc.UUID), wire.Row{"type": "patch"}))
		}
		if m := mergeMutations("options", ifc.Options, map[string]string{"peer": x.Peer}); m != nil {
			ops = append(ops, mutateOp("Interface", byUUID(ifc.UUID), m...))
		}
		if m := mergeMutations("external_ids", ifc.ExternalIDs, x.ExternalIDs); m != nil {
			ops = append(ops, mutateOp("Interface", byUUID(ifc.UUID), m...))
		}
	}
	if len(ops) == 0 {
		return nil
	}
	return c.transact(ctx, fmt.Sprintf("ensure %d trunk patch ports", len(ps)), ops, true)
}

func newTrunkPatchOps(x TrunkPatch, seq int) []wire.Operation {
	ifRef, portRef := fmt.Sprintf("tiface%d", seq), fmt.Sprintf("tport%d", seq)
	irow := wire.Row{"name": x.Name, "type": "patch", "options": wire.Map{"peer": x.Peer}}
	if len(x.ExternalIDs) > 0 {
		irow["external_ids"] = wire.Map(x.ExternalIDs)
	}
	prow := wire.Row{"name": x.Name, "interfaces": namedRefs(ifRef)}
	if x.AccessTag != nil {
		prow["tag"] = *x.AccessTag
		prow["vlan_mode"] = "access"
	}
	return []wire.Operation{
		{Op: wire.OpInsert, Table: "Interface", UUIDName: ifRef, Row: irow},
		{Op: wire.OpInsert, Table: "Port", UUIDName: portRef, Row: prow},
		mutateOp("Bridge", byName(x.Bridge), wire.Mutation{Column: "ports", Mutator: wire.MutInsert, Value: namedRefs(portRef)}),
	}
}

// BridgePort names a port of a bridge.
type BridgePort struct {
	Bridge string
	Name   string
}

// deletePortOps removes the named ports from their bridges; a port absent, or on another
// bridge, is left alone (--if-exists, and not ours).
func deletePortOps(v *view, refs []BridgePort) []wire.Operation {
	byBridge := map[string][]string{}
	for _, r := range refs {
		if p := v.portByName[r.Name]; p != nil && v.portBridge[p.UUID] == r.Bridge {
			byBridge[r.Bridge] = append(byBridge[r.Bridge], p.UUID)
		}
	}
	var ops []wire.Operation
	for _, br := range slices.Sorted(maps.Keys(byBridge)) {
		ops = append(ops, mutateOp("Bridge", byName(br),
			wire.Mutation{Column: "ports", Mutator: wire.MutDelete, Value: uuidRefs(byBridge[br]...)}))
	}
	return ops
}

// DeleteBridgePorts deletes ports from their bridges in one transaction.
func (c *Client) DeleteBridgePorts(ctx context.Context, refs ...BridgePort) error {
	v, err := c.readView(ctx, true)
	if err != nil {
		return err
	}
	ops := deletePortOps(v, refs)
	if len(ops) == 0 {
		return nil
	}
	return c.transact(ctx, fmt.Sprintf("delete %d trunk ports", len(refs)), ops, false)
}

// MergeInterfaceExternalIDs sets keys of an Interface's external_ids, keeping the others.
func (c *Client) MergeInterfaceExternalIDs(ctx context.Context, iface string, set map[string]string) error {
	v, err := c.readView(ctx, true)
	if err != nil {
		return err
	}
	var ifc *BridgeIface
	var uuid string
	for _, i := range v.ifaces {
		if i.Name == iface {
			ifc, uuid = &BridgeIface{ExternalIDs: i.ExternalIDs}, i.UUID
			break
		}
	}
	if ifc == nil {
		return fmt.Errorf("ovsdb: interface %s: %w", iface, ErrNotFound)
	}
	m := mergeMutations("external_ids", ifc.ExternalIDs, set)
	if m == nil {
		return nil
	}
	return c.transact(ctx, "set trunk metadata on "+iface, []wire.Operation{mutateOp("Interface", byUUID(uuid), m...)}, false)
}

// DeleteBridge deletes a bridge (its ports go with it) and the given ports of other
// bridges in one transaction; a missing bridge only deletes the ports.
func (c *Client) DeleteBridge(ctx context.Context, bridge string, also ...BridgePort) error {
	v, err := c.readView(ctx, true)
	if err != nil {
		return err
	}
	ops := deletePortOps(v, also)
	if b := v.bridges[bridge]; b != nil {
		c.mu.Lock()
		root := c.rootUUID
		c.mu.Unlock()
		ops = append(ops, mutateOp("Open_vSwitch", byUUID(root),
			wire.Mutation{Column: "bridges", Mutator: wire.MutDelete, Value: uuidRefs(b.UUID)}))
	}
	if len(ops) == 0 {
		return nil
	}
	return c.transact(ctx, "delete bridge "+bridge, ops, true)
}

// BridgeSnapshot is a bridge and its interfaces at one point.
type BridgeSnapshot struct {
	Name   string
	UUID   string
	Ifaces []BridgeIface
}

// WatchBridgePrefix sends the bridges whose name starts with prefix, with their
// interfaces, each time the database changes them (first: what exists now, possibly
// nothing). Reads are of a complete cache only, so a bridge is never reported gone
// because of a refill. The channel closes when ctx ends.
func (c *Client) WatchBridgePrefix(ctx context.Context, prefix string) <-chan []BridgeSnapshot {
	out := make(chan []BridgeSnapshot, 4)
	wake, stop := c.wakeups()
	go func() {
		defer close(out)
		defer stop()
		var last []BridgeSnapshot
		first := true
		for {
			select {
			case <-ctx.Done():
				return
			case <-wake:
			}
			v, err := c.readView(ctx, false)
			if err != nil || !v.complete {
				continue
			}
			cur := snapshotPrefix(v, prefix)
			if !first && snapshotsEqual(last, cur) {
				continue
			}
			first, last = false, cur
			select {
			case out <- cur:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func snapshotPrefix(v *view, prefix string) []BridgeSnapshot {
	var out []BridgeSnapshot
	for _, name := range slices.Sorted(maps.Keys(v.bridges)) {
		if len(name) < len(prefix) || name[:len(prefix)] != prefix {
			continue
		}
		b := v.bridges[name]
		s := BridgeSnapshot{Name: name, UUID: b.UUID}
		for _, pu := range b.Ports {
			p := v.ports[pu]
			if p == nil {
				continue
			}
			for _, iu := range p.Interfaces {
				if i := v.ifaces[iu]; i != nil {
					s.Ifaces = append(s.Ifaces, BridgeIface{Name: i.Name, Type: i.Type,
						ExternalIDs: maps.Clone(i.ExternalIDs), Options: maps.Clone(i.Options)})
				}
			}
		}
		slices.SortFunc(s.Ifaces, func(a, b BridgeIface) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, s)
	}
	return out
}

func snapshotsEqual(a, b []BridgeSnapshot) bool {
	return slices.EqualFunc(a, b, func(x, y BridgeSnapshot) bool {
		return x.Name == y.Name && x.UUID == y.UUID && slices.EqualFunc(x.Ifaces, y.Ifaces, func(p, q BridgeIface) bool {
			return p.Name == q.Name && p.Type == q.Type && mapsEqual(p.ExternalIDs, q.ExternalIDs) && mapsEqual(p.Options, q.Options)
		})
	})
}
