package ovsdb

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/ovsagent/ovsagent/internal/ovsdb/vswitchd"
	"github.com/ovsagent/ovsagent/internal/ovsdb/wire"
)

// Raw operations: the writes here are simple and hot (1,000 ports per
// transaction), so they are built directly; the monitor cache supplies the
// current state for diffing.

func byName(name string) []wire.Condition {
	return []wire.Condition{{Column: "name", Function: wire.Equal, Value: name}}
}

func byUUID(uuid string) []wire.Condition {
	return []wire.Condition{{Column: "_uuid", Function: wire.Equal, Value: wire.UUID(uuid)}}
}

func strSet(s []string) wire.Set {
	g := make(wire.Set, len(s))
	for i, v := range s {
		g[i] = v
	}
	return g
}

// namedRefs refers to rows inserted earlier in the same transaction by
// their uuid-name.
func namedRefs(names ...string) wire.Set {
	g := make(wire.Set, len(names))
	for i, n := range names {
		g[i] = wire.NamedUUID(n)
	}
	return g
}

// uuidRefs refers to existing rows by UUID.
func uuidRefs(uuids ...string) wire.Set {
	g := make(wire.Set, len(uuids))
	for i, u := range uuids {
		g[i] = wire.UUID(u)
	}
	return g
}

// mergeMutations returns the mutations that make column hold every pair of want
// (other keys are left alone), or nil when cur already does. OVSDB's map insert
// ignores keys that exist, so changed keys are deleted first.
func mergeMutations(column string, cur, want map[string]string) []wire.Mutation {
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
	return []wire.Mutation{
		{Column: column, Mutator: wire.MutDelete, Value: strSet(changed)},
		{Column: column, Mutator: wire.MutInsert, Value: wire.Map(ins)},
	}
}

func mutateOp(table string, where []wire.Condition, muts ...wire.Mutation) wire.Operation {
	return wire.Operation{Op: wire.OpMutate, Table: table, Where: where, Mutations: muts}
}

func updateOp(table string, where []wire.Condition, row wire.Row) wire.Operation {
	return wire.Operation{Op: wire.OpUpdate, Table: table, Where: where, Row: row}
}

// newPortOps inserts a Port with one Interface of the same name and attaches it
// to bridge. seq keeps named UUIDs unique inside one transaction.
func newPortOps(bridge, name, ifType string, options map[string]string, portOther map[string]string, seq int) []wire.Operation {
	ifRef := fmt.Sprintf("iface%d", seq)
	portRef := fmt.Sprintf("port%d", seq)
	irow := wire.Row{"name": name}
	if ifType != "" {
		irow["type"] = ifType
	}
	if len(options) > 0 {
		irow["options"] = wire.Map(options)
	}
	prow := wire.Row{"name": name, "interfaces": namedRefs(ifRef)}
	if len(portOther) > 0 {
		prow["other_config"] = wire.Map(portOther)
	}
	return []wire.Operation{
		{Op: wire.OpInsert, Table: "Interface", UUIDName: ifRef, Row: irow},
		{Op: wire.OpInsert, Table: "Port", UUIDName: portRef, Row: prow},
		mutateOp("Bridge", byName(bridge),
			wire.Mutation{Column: "ports", Mutator: wire.MutInsert, Value: namedRefs(portRef)}),
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
// The cache changes one whole update (or, after a reconnect, one whole
// database) at a time under the client's lock, and rows are immutable, so a
// view is a consistent snapshot; it is read-only and maps handed to callers
// are cloned. complete says every row referenced from the root down is
// cached (false only before the first fill or if a row failed to decode).
func (c *Client) readView(ctx context.Context, sync bool) (*view, error) {
	if sync {
		ctx, cancel := c.ctx(ctx)
		defer cancel()
		c.mu.Lock()
		sess := c.sess
		c.mu.Unlock()
		if sess == nil {
			return nil, fmt.Errorf("ovsdb: echo: %w", errNotConnected)
		}
		if err := sess.Call(ctx, "echo", []any{}, nil); err != nil {
			return nil, fmt.Errorf("ovsdb: echo: %w", err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	db := &c.db
	// The UUID-keyed tables are copied: the next update changes the
	// cache's maps (never its rows).
	v := &view{
		bridges:     make(map[string]*vswitchd.Bridge, len(db.bridges)),
		ports:       maps.Clone(db.ports),
		ifaces:      maps.Clone(db.ifaces),
		portByName:  make(map[string]*vswitchd.Port, len(db.ports)),
		portBridge:  make(map[string]string, len(db.ports)),
		controllers: maps.Clone(db.ctls),
		complete:    true,
	}
	v.root = db.root[c.rootUUID]
	for _, b := range db.bridges {
		v.bridges[b.Name] = b
		for _, p := range b.Ports {
			v.portBridge[p] = b.Name
		}
	}
	for _, p := range v.ports {
		v.portByName[p.Name] = p
	}
	if v.root == nil {
		v.complete = false
	} else {
		for _, u := range v.root.Bridges {
			if db.bridges[u] == nil {
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

func mapsEqual(a, b map[string]string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return maps.Equal(a, b)
}
