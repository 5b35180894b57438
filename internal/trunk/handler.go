package trunk

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/ovsagent/ovsagent/internal/neutron"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
)

// RPC is the trunk RPC the handler uses (neutron.TrunkClient).
type RPC interface {
	GetTrunkDetails(ctx context.Context, parentPortID string) (*neutron.Trunk, error)
	UpdateSubportBindings(ctx context.Context, subports []neutron.SubPort) (map[string][]neutron.BoundSubport, error)
	UpdateTrunkStatus(ctx context.Context, trunkID, status string) error
}

// OVS is the OVSDB the handler reads and writes (ovsdb.Client).
type OVS interface {
	Switch
	BridgeIfaces(ctx context.Context, bridge string) ([]ovsdb.BridgeIface, bool, error)
}

var _ OVS = (*ovsdb.Client)(nil)

// Removed is a VM interface that left a trunk bridge, with its last external_ids.
type Removed struct {
	Bridge      string // its bridge_name metadata
	ExternalIDs map[string]string
}

// Changes compares two successive snapshots of the trunk bridges: the bridges that
// appeared (or were re-created: a new row), which the reference handles as an added
// trunk bridge, and the interfaces carrying trunk metadata that are gone (their bridge
// deleted, or they left it), which it handles as a trunk removal.
func Changes(prev, cur []ovsdb.BridgeSnapshot) (added []string, removed []Removed) {
	now := map[string]ovsdb.BridgeSnapshot{}
	for _, b := range cur {
		now[b.Name] = b
	}
	before := map[string]bool{}
	for _, b := range prev {
		before[b.Name+"/"+b.UUID] = true
		c, still := now[b.Name]
		stillIfaces := map[string]bool{}
		if still && c.UUID == b.UUID {
			for _, i := range c.Ifaces {
				stillIfaces[i.Name] = true
			}
		}
		for _, i := range b.Ifaces {
			br := i.ExternalIDs[KeyBridgeName]
			if br == "" || !IsTrunkBridge(br) || stillIfaces[i.Name] {
				continue
			}
			removed = append(removed, Removed{Bridge: br, ExternalIDs: maps.Clone(i.ExternalIDs)})
		}
	}
	for _, b := range cur {
		if !before[b.Name+"/"+b.UUID] && IsTrunkBridge(b.Name) {
			added = append(added, b.Name)
		}
	}
	return added, removed
}

func toIfaces(in []ovsdb.BridgeIface) []Iface {
	out := make([]Iface, len(in))
	for i, x := range in {
		out[i] = Iface{Name: x.Name, ExternalIDs: x.ExternalIDs, Options: x.Options}
	}
	return out
}

// Handler is the agent's trunk handler: the reference's OVSDBHandler and
// OVSTrunkSkeleton. Trunk bridges are handled when they appear (and, at start, the ones
// that exist: a rewire), VM interfaces when they leave, subport pushes for the trunks
// this host wires. Work for one trunk bridge is serialized (the reference's lock on the
// bridge name); different bridges proceed in parallel.
type Handler struct {
	IntBridge string
	RPC       RPC
	OVS       OVS
	Log       *slog.Logger
	// VMWait is how long a new trunk bridge may stay without a VM interface before it is
	// disposed of (the reference's 60 s); Poll how often it is looked at meanwhile.
	VMWait, Poll time.Duration
	// OnStatus, if set, sees each status reported (after the call, with its error).
	OnStatus func(trunkID, status string, err error)

	mu    sync.Mutex
	ctx   context.Context
	locks map[string]*sync.Mutex
	prev  []ovsdb.BridgeSnapshot
	wg    sync.WaitGroup
}

var _ neutron.TrunkHandler = (*Handler)(nil)

func (h *Handler) log() *slog.Logger {
	if h.Log == nil {
		return slog.Default()
	}
	return h.Log
}

func (h *Handler) lock(bridge string) func() {
	h.mu.Lock()
	if h.locks == nil {
		h.locks = map[string]*sync.Mutex{}
	}
	l := h.locks[bridge]
	if l == nil {
		l = &sync.Mutex{}
		h.locks[bridge] = l
	}
	h.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// spawn runs fn for bridge on its own goroutine under the bridge's lock; false when the
// handler is not running.
func (h *Handler) spawn(bridge string, fn func(ctx context.Context)) bool {
	h.mu.Lock()
	ctx := h.ctx
	if ctx == nil || ctx.Err() != nil {
		h.mu.Unlock()
		return false
	}
	h.wg.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.wg.Done()
		unlock := h.lock(bridge)
		defer unlock()
		fn(ctx)
	}()
	return true
}

// Run handles the snapshots of the trunk bridges (ovsdb.Client.WatchBridgePrefix with
// BridgePrefix) until ctx ends or the channel closes, then waits for the work in hand.
func (h *Handler) Run(ctx context.Context, snaps <-chan []ovsdb.BridgeSnapshot) {
	h.mu.Lock()
	h.ctx = ctx
	h.mu.Unlock()
	defer h.wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case cur, ok := <-snaps:
			if !ok {
				return
			}
			added, removed := Changes(h.prev, cur)
			h.prev = cur
			for _, r := range removed {
				h.spawn(r.Bridge, func(ctx context.Context) { h.remove(ctx, r) })
			}
			for _, b := range added {
				h.spawn(b, func(ctx context.Context) { h.add(ctx, b) })
			}
		}
	}
}

func (h *Handler) report(ctx context.Context, trunkID, status string) {
	if status == "" {
		return
	}
	err := h.RPC.UpdateTrunkStatus(ctx, trunkID, status)
	if err != nil {
		h.log().Error("trunk: update_trunk_status failed", "trunk", trunkID, "status", status, "err", err)
	} else {
		h.log().Info("trunk status reported", "trunk", trunkID, "status", status)
	}
	if h.OnStatus != nil {
		h.OnStatus(trunkID, status, err)
	}
}

// waitVM waits for a VM interface on bridge; false when the bridge went away or none
// came within VMWait.
func (h *Handler) waitVM(ctx context.Context, bridge string) ([]Iface, Iface, bool) {
	wait, poll := h.VMWait, h.Poll
	if wait <= 0 {
		wait = 60 * time.Second
	}
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	deadline := time.Now().Add(wait)
	for {
		got, exists, err := h.OVS.BridgeIfaces(ctx, bridge)
		if err == nil && !exists {
			return nil, Iface{}, false
		}
		if err == nil {
			ifaces := toIfaces(got)
			if vm, ok := ParentIface(bridge, ifaces); ok {
				return ifaces, vm, true
			}
			if time.Now().After(deadline) {
				return ifaces, Iface{}, false
			}
		}
		select {
		case <-ctx.Done():
			return nil, Iface{}, false
		case <-time.After(poll):
		}
	}
}

// add is handle_trunk_add: wait for the VM, dispose of a bridge without one, otherwise
// patch the parent, bind the subports, wire them and report the status.
func (h *Handler) add(ctx context.Context, bridge string) {
	l := h.log().With("bridge", bridge)
	ifaces, vm, ok := h.waitVM(ctx, bridge)
	if !ok {
		if ctx.Err() != nil {
			return
		}
		if ifaces == nil {
			l.Debug("trunk bridge gone before it was handled")
			return
		}
		l.Warn("no VM interface on the trunk bridge: deleting it and its patch ports", "waited", h.VMWait)
		if _, err := Apply(ctx, h.OVS, Dispose(h.IntBridge, bridge, ifaces)); err != nil {
			l.Error("trunk: dispose failed", "err", err)
		}
		return
	}
	parentID := vm.ExternalIDs[KeyIfaceID]
	if parentID == "" {
		l.Error("trunk: the VM interface has no iface-id", "iface", vm.Name)
		return
	}
	tr, err := h.RPC.GetTrunkDetails(ctx, parentID)
	if err != nil {
		l.Error("trunk: get_trunk_details failed", "port", parentID, "err", err)
		return
	}
	if tr == nil {
		l.Error("trunk: the port has no trunk", "port", parentID)
		return
	}
	if BridgeName(tr.ID) != bridge {
		l.Error("trunk: the port's trunk has another bridge", "port", parentID, "trunk", tr.ID)
		return
	}
	l = l.With("trunk", tr.ID)
	// The parent first, as the reference: a failure there is ERROR and nothing else.
	first, _ := Wire(WireInput{IntBridge: h.IntBridge, Trunk: neutron.Trunk{ID: tr.ID, PortID: tr.PortID}, Ifaces: ifaces})
	if o, err := Apply(ctx, h.OVS, Plan{Parent: first.Parent}); err != nil {
		l.Error("trunk: parent patch ports failed", "err", err)
		h.report(ctx, tr.ID, Status(Plan{Parent: first.Parent}, o))
		return
	}
	bound, err := h.bind(ctx, tr.ID, tr.SubPorts)
	if err != nil {
		l.Error("trunk: update_subport_bindings failed", "err", err)
		return
	}
	p, _ := Wire(WireInput{IntBridge: h.IntBridge, Trunk: *tr, Ifaces: ifaces, Bound: bound})
	o, err := Apply(ctx, h.OVS, p)
	if err != nil {
		l.Warn("trunk: wired with errors", "err", err)
	}
	h.report(ctx, tr.ID, Status(p, o))
}

// bind is update_subport_bindings for one trunk's subports: the MACs of those bound.
func (h *Handler) bind(ctx context.Context, trunkID string, subports []neutron.SubPort) (map[string]string, error) {
	res, err := h.RPC.UpdateSubportBindings(ctx, subports)
	if err != nil {
		return nil, err
	}
	bound := map[string]string{}
	for _, p := range res[trunkID] {
		bound[p.ID] = p.MACAddress
	}
	return bound, nil
}

// remove is handle_trunk_remove: no status is reported.
func (h *Handler) remove(ctx context.Context, r Removed) {
	exists := false
	if _, ok, err := h.OVS.BridgeIfaces(ctx, r.Bridge); err == nil {
		exists = ok
	}
	p, ok := Remove(h.IntBridge, r.ExternalIDs, exists)
	if !ok {
		h.log().Warn("trunk: a VM interface left a trunk bridge without usable metadata", "bridge", r.Bridge, "external_ids", r.ExternalIDs)
		return
	}
	if _, err := Apply(ctx, h.OVS, p); err != nil {
		h.log().Error("trunk: removing the trunk's ports failed", "bridge", r.Bridge, "err", err)
	}
}

// TrunkPushed implements neutron.TrunkHandler: the reference's OVS driver learns trunks
// from OVSDB, not from these pushes.
func (h *Handler) TrunkPushed(context.Context, *neutron.TrunkPush) error { return nil }

// ErrNotRunning is returned for pushes that arrive before Run or after it ended.
var ErrNotRunning = errors.New("trunk: handler not running")

// SubPortsPushed implements neutron.TrunkHandler (handle_subports): subports added to
// or removed from a trunk this host wires (its bridge exists) are wired or unwired, and
// the status reported. The work runs on its own goroutine.
func (h *Handler) SubPortsPushed(_ context.Context, p *neutron.SubPortPush) error {
	trunkID := p.SubPorts[0].TrunkID
	bridge := BridgeName(trunkID)
	subs := p.SubPorts
	if !h.spawn(bridge, func(ctx context.Context) { h.subports(ctx, trunkID, bridge, p.EventType, subs) }) {
		return ErrNotRunning
	}
	return nil
}

func (h *Handler) subports(ctx context.Context, trunkID, bridge, event string, subs []neutron.SubPort) {
	l := h.log().With("trunk", trunkID, "event", event)
	got, exists, err := h.OVS.BridgeIfaces(ctx, bridge)
	if err != nil {
		l.Error("trunk: reading the trunk bridge failed", "err", err)
		return
	}
	if !exists {
		return // not a trunk of this host
	}
	var parent *Iface
	if vm, ok := ParentIface(bridge, toIfaces(got)); ok {
		parent = &vm
	}
	var p Plan
	switch event {
	case neutron.TrunkEventCreated:
		bound, err := h.bind(ctx, trunkID, subs)
		if err != nil {
			l.Error("trunk: update_subport_bindings failed", "err", err)
			return
		}
		p = AddSubports(h.IntBridge, trunkID, parent, subs, bound)
	case neutron.TrunkEventDeleted:
		ids := make([]string, len(subs))
		for i, s := range subs {
			ids[i] = s.PortID
		}
		p = RemoveSubports(h.IntBridge, trunkID, true, parent, ids)
	default:
		l.Error("trunk: unknown or unimplemented subport event")
		return
	}
	o, err := Apply(ctx, h.OVS, p)
	if err != nil {
		l.Warn("trunk: subports handled with errors", "err", err)
	}
	h.report(ctx, trunkID, Status(p, o))
}
