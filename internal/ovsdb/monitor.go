package ovsdb

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// PortEventType says what happened to a VM port.
type PortEventType int

const (
	// PortAdded: a VM port is ready (iface-id, attached-mac and a valid ofport).
	PortAdded PortEventType = iota + 1
	// PortUpdated: something the agent sees changed (ofport, tag, other_config,
	// external_ids such as attached-mac or iface-status).
	PortUpdated
	// PortRemoved: the port left the bridge, lost its keys, or its ofport became
	// invalid (-1).
	PortRemoved
)

func (t PortEventType) String() string {
	switch t {
	case PortAdded:
		return "added"
	case PortUpdated:
		return "updated"
	case PortRemoved:
		return "removed"
	}
	return fmt.Sprintf("PortEventType(%d)", int(t))
}

// VMPort is a VM interface on the watched bridge, as nova/os-vif plug them.
type VMPort struct {
	Name        string // Port and Interface name (tapXXXXXXXX-XX)
	IfaceID     string // external_ids:iface-id, the Neutron port id
	AttachedMAC string // external_ids:attached-mac
	IfaceStatus string // external_ids:iface-status
	VMUUID      string // external_ids:vm-uuid (or vm-id)
	Ofport      int
	Tag         int               // Port tag or NoTag
	OtherConfig map[string]string // Port other_config
	ExternalIDs map[string]string // Interface external_ids, all keys
	// IfaceOtherConfig is the Interface's other_config (tx-steering hint).
	IfaceOtherConfig map[string]string
	// IfaceUUID identifies the Interface row: a port deleted and plugged again
	// under the same name (ofport reused) has a new one.
	IfaceUUID string
}

func (p VMPort) clone() VMPort {
	p.OtherConfig = cloneMap(p.OtherConfig)
	p.ExternalIDs = cloneMap(p.ExternalIDs)
	p.IfaceOtherConfig = cloneMap(p.IfaceOtherConfig)
	return p
}

func (p VMPort) equal(q VMPort) bool {
	return p.Name == q.Name && p.IfaceUUID == q.IfaceUUID && p.IfaceID == q.IfaceID && p.AttachedMAC == q.AttachedMAC &&
		p.IfaceStatus == q.IfaceStatus && p.VMUUID == q.VMUUID && p.Ofport == q.Ofport &&
		p.Tag == q.Tag && mapsEqual(p.OtherConfig, q.OtherConfig) && mapsEqual(p.ExternalIDs, q.ExternalIDs) &&
		mapsEqual(p.IfaceOtherConfig, q.IfaceOtherConfig)
}

// PortEvent is one change. For PortUpdated, Old is the previous state; for
// PortRemoved, Port is the last state seen. A port that was deleted and
// plugged again between two scans (new Interface row, same name) comes as
// PortRemoved then PortAdded in one batch, like the reference's "re_added"
// (report it down, then up, so nova gets a fresh vif-plugged event).
type PortEvent struct {
	Type PortEventType
	Port VMPort
	Old  VMPort
}

// PortMonitor emits the VM ports of one bridge as deltas. It compares the
// cached database against what it last emitted, so the cache's refill with every
// row after a reconnect produces no events for unchanged ports, and ports that
// vanished while the connection was down are reported removed.
type PortMonitor struct {
	c      *Client
	bridge string
	events chan []PortEvent
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	synced     chan struct{} // closed once the first scan's batch is delivered
	syncedOnce sync.Once

	mu      sync.Mutex
	emitted map[string]VMPort
	scans   int
}

// WatchPorts starts a monitor of bridge's VM ports. The first batch on Events
// holds a PortAdded for each VM port present now. It stops when ctx ends or
// Stop is called; Events is then closed.
func (c *Client) WatchPorts(ctx context.Context, bridge string) *PortMonitor {
	ctx, cancel := context.WithCancel(ctx)
	m := &PortMonitor{
		c:       c,
		bridge:  bridge,
		events:  make(chan []PortEvent, 64),
		wake:    make(chan struct{}, 1),
		cancel:  cancel,
		done:    make(chan struct{}),
		synced:  make(chan struct{}),
		emitted: map[string]VMPort{},
	}
	id := c.addWatcher(m.poke)
	m.poke()
	go func() {
		defer close(m.done)
		defer close(m.events)
		defer c.removeWatcher(id)
		m.run(ctx)
	}()
	return m
}

// Events delivers batches of changes, in order. A slow consumer delays the
// monitor, it never loses changes: the next batch is computed from the
// database when the consumer is ready.
func (m *PortMonitor) Events() <-chan []PortEvent { return m.events }

// Synced is closed once the VM ports present at start have been delivered on
// Events (immediately after the first scan when there were none).
func (m *PortMonitor) Synced() <-chan struct{} { return m.synced }

// Stop ends the monitor and waits for it.
func (m *PortMonitor) Stop() {
	m.cancel()
	<-m.done
}

// Scans counts database scans (each wake-up after one or more row events).
func (m *PortMonitor) Scans() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.scans
}

func (m *PortMonitor) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *PortMonitor) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		}
		batch, err := m.scan(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// The cache read failed (disconnected past the timeout); the next
			// row event, at the latest the replay after reconnect, retries.
			m.c.log.Warn("port monitor scan failed", "bridge", m.bridge, "err", err)
			continue
		}
		if len(batch) > 0 {
			select {
			case m.events <- batch:
			case <-ctx.Done():
				return
			}
		}
		m.syncedOnce.Do(func() { close(m.synced) })
	}
}

// scan diffs the database's VM ports against the emitted ones and records the
// result as emitted.
func (m *PortMonitor) scan(ctx context.Context) ([]PortEvent, error) {
	cur, complete, err := m.c.vmPorts(ctx, m.bridge, false)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.scans++
	var batch []PortEvent
	for _, name := range slices.Sorted(maps.Keys(cur)) {
		p := cur[name]
		old, ok := m.emitted[name]
		switch {
		case !ok:
			batch = append(batch, PortEvent{Type: PortAdded, Port: p.clone()})
		case old.IfaceUUID != p.IfaceUUID:
			batch = append(batch, PortEvent{Type: PortRemoved, Port: old.clone()}, PortEvent{Type: PortAdded, Port: p.clone()})
		case !old.equal(p):
			batch = append(batch, PortEvent{Type: PortUpdated, Port: p.clone(), Old: old.clone()})
		default:
			continue
		}
		m.emitted[name] = p
	}
	// A read of a cache with holes (a row that did not decode, or no content
	// yet) can miss rows that still exist; removals wait for a complete read.
	if complete {
		for _, name := range slices.Sorted(maps.Keys(m.emitted)) {
			if _, ok := cur[name]; !ok {
				batch = append(batch, PortEvent{Type: PortRemoved, Port: m.emitted[name].clone()})
				delete(m.emitted, name)
			}
		}
	}
	return batch, nil
}

// VMPorts reads bridge's VM ports (valid ofport) now, sorted by name,
// without a monitor.
func (c *Client) VMPorts(ctx context.Context, bridge string) ([]VMPort, error) {
	cur, _, err := c.vmPorts(ctx, bridge, true)
	if err != nil {
		return nil, err
	}
	out := make([]VMPort, 0, len(cur))
	for _, name := range slices.Sorted(maps.Keys(cur)) {
		out = append(out, cur[name].clone())
	}
	return out, nil
}

// Snapshot reads the bridge's VM ports now, for a full resync. It does not
// change what the monitor has emitted: events already queued or still to come
// are deltas against the previous batches, so a consumer applying a snapshot
// must treat later events idempotently (an Added for a known port is an update).
func (m *PortMonitor) Snapshot(ctx context.Context) ([]VMPort, error) {
	return m.c.VMPorts(ctx, m.bridge)
}

// vmPorts reads the VM ports of bridge (valid ofport only). complete is false
// when the bridge references rows the cache does not hold.
func (c *Client) vmPorts(ctx context.Context, bridge string, sync bool) (map[string]VMPort, bool, error) {
	v, err := c.readView(ctx, sync)
	if err != nil {
		return nil, false, err
	}
	b := v.bridges[bridge]
	if b == nil {
		return map[string]VMPort{}, v.complete, nil
	}
	out := make(map[string]VMPort, len(b.Ports))
	for _, u := range b.Ports {
		p := v.ports[u]
		if p == nil {
			continue
		}
		ifc := v.iface(p)
		if ifc == nil {
			continue
		}
		ids := ifc.ExternalIDs
		if ids["iface-id"] == "" || ids["attached-mac"] == "" {
			continue
		}
		ofport := deref(ifc.Ofport)
		if ofport <= 0 {
			continue
		}
		vm := VMPort{
			Name:        p.Name,
			IfaceID:     ids["iface-id"],
			AttachedMAC: ids["attached-mac"],
			IfaceStatus: ids["iface-status"],
			VMUUID:      ids["vm-uuid"],
			Ofport:      ofport,
			Tag:         NoTag,
			// The cache's maps, read-only: cloned only when handed out.
			OtherConfig:      p.OtherConfig,
			ExternalIDs:      ids,
			IfaceOtherConfig: ifc.OtherConfig,
			IfaceUUID:        ifc.UUID,
		}
		if vm.VMUUID == "" {
			vm.VMUUID = ids["vm-id"]
		}
		if p.Tag != nil {
			vm.Tag = *p.Tag
		}
		out[p.Name] = vm
	}
	return out, v.complete, nil
}
