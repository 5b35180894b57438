package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"
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
	root        *vswitchd.OpenvSwitch
	// complete: every row referenced from the root down is cached.
	complete bool
}

// readView reads the cache. With sync it first makes a round trip to the
// server: updates are applied in the order they arrive, so changes other
// clients committed before it (an operator's ovs-vsctl, nova) are then in the
// cache and the diff that follows does not miss them.
//
// Rows are read shallow (libovsdb replaces cached models on update and never
// mutates them), so the view is read-only and maps handed to callers are
// cloned. Shallow reads bypass libovsdb's lock, so a read can overlap the
// purge-and-refill of a reconnect; such a read is caught by the reference
// chain Open_vSwitch -> Bridge -> Port -> Interface having holes, or by the
// tables being replaced meanwhile, and is retried. A view that still has
// holes after the retries (a row referenced but not cached) says so in complete.
func (c *Client) readView(ctx context.Context, sync bool) (*view, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	if sync {
		if err := c.ovs.Echo(ctx); err != nil {
			return nil, fmt.Errorf("ovsdb: echo: %w", err)
		}
	}
	var v *view
	for attempt := 0; ; attempt++ {
		// Blocks while a reconnect (and its cache refill) is in progress.
		_ = c.ovs.Connected()
		v = c.readShallow()
		if v == nil {
			return nil, fmt.Errorf("ovsdb: %w", client.ErrNotConnected)
		}
		if v.complete || attempt == 5 {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return v, nil
		case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
		}
	}
}

func (c *Client) readShallow() *view {
	tc := c.ovs.Cache()
	if tc == nil { // closed
		return nil
	}
	tables := []string{"Open_vSwitch", "Bridge", "Port", "Interface", "Controller"}
	before := make([]*cache.RowCache, len(tables))
	for i, t := range tables {
		before[i] = tc.Table(t)
	}
	rows := make([]map[string]model.Model, len(tables))
	for i, rc := range before {
		if rc != nil {
			rows[i] = rc.RowsShallow()
		}
	}
	v := &view{
		bridges:     make(map[string]*vswitchd.Bridge, len(rows[1])),
		ports:       make(map[string]*vswitchd.Port, len(rows[2])),
		ifaces:      make(map[string]*vswitchd.Interface, len(rows[3])),
		portByName:  make(map[string]*vswitchd.Port, len(rows[2])),
		portBridge:  make(map[string]string, len(rows[2])),
		controllers: make(map[string]*vswitchd.Controller, len(rows[4])),
		complete:    true,
	}
	for _, m := range rows[0] {
		v.root, _ = m.(*vswitchd.OpenvSwitch)
	}
	brByUUID := map[string]bool{}
	for _, m := range rows[1] {
		b := m.(*vswitchd.Bridge)
		v.bridges[b.Name] = b
		brByUUID[b.UUID] = true
		for _, p := range b.Ports {
			v.portBridge[p] = b.Name
		}
	}
	for _, m := range rows[2] {
		p := m.(*vswitchd.Port)
		v.ports[p.UUID] = p
		v.portByName[p.Name] = p
	}
	for _, m := range rows[3] {
		i := m.(*vswitchd.Interface)
		v.ifaces[i.UUID] = i
	}
	for _, m := range rows[4] {
		ct := m.(*vswitchd.Controller)
		v.controllers[ct.UUID] = ct
	}
	if v.root == nil {
		v.complete = false
	} else {
		for _, u := range v.root.Bridges {
			if !brByUUID[u] {
				v.complete = false
			}
		}
	}
	for pu := range v.portBridge {
		p := v.ports[pu]
		if p == nil {
			v.complete = false
			continue
		}
		for _, iu := range p.Interfaces {
			if v.ifaces[iu] == nil {
				v.complete = false
			}
		}
	}
	for i, t := range tables {
		if tc.Table(t) != before[i] {
			v.complete = false
		}
	}
	return v
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
