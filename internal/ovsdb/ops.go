package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/ovsagent/ovsagent/internal/ovsdb/vswitchd"
)

// Raw operations: the writes here are simple and hot (1,000 ports per
// transaction), so they are built directly rather than through libovsdb's
// reflective API; the monitor cache supplies current state for diffing.

func byName(name string) []ovsdb.Condition {
	return []ovsdb.Condition{ovsdb.NewCondition("name", ovsdb.ConditionEqual, name)}
}

func byUUID(uuid string) []ovsdb.Condition {
	return []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, ovsdb.UUID{GoUUID: uuid})}
}

func strMap(m map[string]string) ovsdb.OvsMap {
	g := make(map[any]any, len(m))
	for k, v := range m {
		g[k] = v
	}
	return ovsdb.OvsMap{GoMap: g}
}

func strSet(s []string) ovsdb.OvsSet {
	g := make([]any, len(s))
	for i, v := range s {
		g[i] = v
	}
	return ovsdb.OvsSet{GoSet: g}
}

func uuidSet(uuids ...string) ovsdb.OvsSet {
	g := make([]any, len(uuids))
	for i, u := range uuids {
		g[i] = ovsdb.UUID{GoUUID: u}
	}
	return ovsdb.OvsSet{GoSet: g}
}

func emptySet() ovsdb.OvsSet { return ovsdb.OvsSet{GoSet: []any{}} }

// mergeMutations returns the mutations that make column hold every pair of want
// (other keys are left alone), or nil when cur already does. OVSDB's map insert
// ignores keys that exist, so changed keys are deleted first.
func mergeMutations(column string, cur, want map[string]string) []ovsdb.Mutation {
	var changed []string
	for k, v := range want {
		if old, ok := cur[k]; !ok || old != v {
			changed = append(changed, k)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	slices.Sort(changed)
	ins := make(map[string]string, len(changed))
	for _, k := range changed {
		ins[k] = want[k]
	}
	return []ovsdb.Mutation{
		{Column: column, Mutator: ovsdb.MutateOperationDelete, Value: strSet(changed)},
		{Column: column, Mutator: ovsdb.MutateOperationInsert, Value: strMap(ins)},
	}
}

func mutateOp(table string, where []ovsdb.Condition, muts ...ovsdb.Mutation) ovsdb.Operation {
	return ovsdb.Operation{Op: ovsdb.OperationMutate, Table: table, Where: where, Mutations: muts}
}

func updateOp(table string, where []ovsdb.Condition, row ovsdb.Row) ovsdb.Operation {
	return ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: table, Where: where, Row: row}
}

// newPortOps inserts a Port with one Interface of the same name and attaches it
// to bridge. seq keeps named UUIDs unique inside one transaction.
func newPortOps(bridge, name, ifType string, options map[string]string, portOther map[string]string, seq int) []ovsdb.Operation {
	ifRef := fmt.Sprintf("iface%d", seq)
	portRef := fmt.Sprintf("port%d", seq)
	irow := ovsdb.Row{"name": name}
	if ifType != "" {
		irow["type"] = ifType
	}
	if len(options) > 0 {
		irow["options"] = strMap(options)
	}
	prow := ovsdb.Row{"name": name, "interfaces": uuidSet(ifRef)}
	if len(portOther) > 0 {
		prow["other_config"] = strMap(portOther)
	}
	return []ovsdb.Operation{
		{Op: ovsdb.OperationInsert, Table: "Interface", UUIDName: ifRef, Row: irow},
		{Op: ovsdb.OperationInsert, Table: "Port", UUIDName: portRef, Row: prow},
		mutateOp("Bridge", byName(bridge),
			ovsdb.Mutation{Column: "ports", Mutator: ovsdb.MutateOperationInsert, Value: uuidSet(portRef)}),
	}
}

// view is a read of the cached Bridge, Port and Interface tables, indexed.
type view struct {
	bridges     map[string]*vswitchd.Bridge    // by name
	ports       map[string]*vswitchd.Port      // by uuid
	ifaces      map[string]*vswitchd.Interface // by uuid
	portByName  map[string]*vswitchd.Port
	portBridge  map[string]string // port uuid -> bridge name
	controllers map[string]*vswitchd.Controller
}

// readView reads the cache. With sync it first makes a round trip to the
// server: updates are applied in the order they arrive, so changes other
// clients committed before it (an operator's ovs-vsctl, nova) are then in the
// cache and the diff that follows does not miss them.
func (c *Client) readView(ctx context.Context, sync bool) (*view, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	if sync {
		if err := c.ovs.Echo(ctx); err != nil {
			return nil, fmt.Errorf("ovsdb: echo: %w", err)
		}
	}
	var brs []*vswitchd.Bridge
	var ports []*vswitchd.Port
	var ifaces []*vswitchd.Interface
	var ctls []*vswitchd.Controller
	if err := c.ovs.List(ctx, &brs); err != nil {
		return nil, fmt.Errorf("ovsdb: list bridges: %w", err)
	}
	if err := c.ovs.List(ctx, &ports); err != nil {
		return nil, fmt.Errorf("ovsdb: list ports: %w", err)
	}
	if err := c.ovs.List(ctx, &ifaces); err != nil {
		return nil, fmt.Errorf("ovsdb: list interfaces: %w", err)
	}
	if err := c.ovs.List(ctx, &ctls); err != nil {
		return nil, fmt.Errorf("ovsdb: list controllers: %w", err)
	}
	v := &view{
		bridges:     make(map[string]*vswitchd.Bridge, len(brs)),
		ports:       make(map[string]*vswitchd.Port, len(ports)),
		ifaces:      make(map[string]*vswitchd.Interface, len(ifaces)),
		portByName:  make(map[string]*vswitchd.Port, len(ports)),
		portBridge:  make(map[string]string, len(ports)),
		controllers: make(map[string]*vswitchd.Controller, len(ctls)),
	}
	for _, b := range brs {
		v.bridges[b.Name] = b
		for _, p := range b.Ports {
			v.portBridge[p] = b.Name
		}
	}
	for _, p := range ports {
		v.ports[p.UUID] = p
		v.portByName[p.Name] = p
	}
	for _, i := range ifaces {
		v.ifaces[i.UUID] = i
	}
	for _, ct := range ctls {
		v.controllers[ct.UUID] = ct
	}
	return v, nil
}

// iface returns the first Interface of p (agent ports have exactly one).
func (v *view) iface(p *vswitchd.Port) *vswitchd.Interface {
	for _, u := range p.Interfaces {
		if i := v.ifaces[u]; i != nil {
			return i
		}
	}
	return nil
}

func isNotFound(err error) bool { return errors.Is(err, client.ErrNotFound) }

func mapsEqual(a, b map[string]string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return maps.Equal(a, b)
}
