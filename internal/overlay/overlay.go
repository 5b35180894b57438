// Package overlay is the pipeline's tunnel overlay as a feature of the
// agent (internal/feature): the tunnel ports on br-tun (one per remote IP
// and type, created and removed as the state needs them), tunnel_sync and
// the tunnel_update/tunnel_delete casts, and l2population's FDB by network
// with the refresh of a network's FDB and the wait for it before br-tun's
// stale flows are swept.
//
// It owns no flows of its own: it keeps the pipeline state's Tunnels and
// each Network's FDB (pipeline.State, shared with the agent's port
// lifecycle, which owns the ports, networks and local VLANs) and touches
// the pipeline's tun: and net: owners, whose flows pipeline.Source
// computes. What it decides are pure functions of internal/pipeline
// (ApplyRemote, ChangeRemote, WantedTunnels); what it does on the host goes
// through Switch (OVSDB) and Server (the tunnel_sync RPC).
//
// The agent builds it (New) and registers it right after the pipeline;
// the loop drives it only through the seam's interfaces: Attacher, Waiter
// (tunnel_sync pending holds the sweep and in-sync), Prefetcher
// (tunnel_sync while the batch reads port details), BridgeAdopter (the
// tunnel ports OVSDB has, at start and after an ovs-vswitchd restart),
// PortHandler (a new tunnelled network asks for its FDB), Syncer (the
// tunnel ports made what the state wants), EventHandler (l2pop and tunnel
// casts), Resyncer, Completer (the FDB awaited before br-tun is swept),
// Refresher (networks whose FDB the next update_device_list asks for) and
// FlowObserver (the sweep done: adopted tunnel ports nobody claims go).
package overlay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/metrics"
	"github.com/ovsagent/ovsagent/internal/pipeline"
)

// Name is the overlay's name among the features.
const Name = "overlay"

// Port is a tunnel interface on br-tun.
type Port struct {
	Name     string // <type>-<hash>
	Type     string // vxlan, gre, geneve
	RemoteIP string
	LocalIP  string
	OFPort   int32
}

// Endpoint is one entry of tunnel_sync's reply.
type Endpoint struct {
	IP   string
	Host string
}

// Switch is what the overlay needs from OVSDB (the agent's Switch).
type Switch interface {
	// EnsureTunnelPort creates the tunnel port to t.RemoteIP if missing
	// and returns it with its Name and OFPort filled in.
	EnsureTunnelPort(ctx context.Context, t Port) (Port, error)
	// DeleteTunnelPort removes a tunnel port from br-tun.
	DeleteTunnelPort(ctx context.Context, t Port) error
	// TunnelPorts lists the tunnel ports on br-tun (adopted at start).
	TunnelPorts(ctx context.Context) ([]Port, error)
}

// Server is what the overlay needs from neutron-server (the agent's Plugin).
type Server interface {
	TunnelSync(ctx context.Context, tunnelIP, tunnelType string) ([]Endpoint, error)
}

// Config is the overlay's part of the agent's options.
type Config struct {
	LocalIP      string   // tunnel endpoint; empty when tunnelling is off
	TunnelTypes  []string // vxlan, gre, geneve
	L2Population bool
	// FDBWait bounds how long the first sync waits for l2pop's FDB of the
	// tunnelled networks before br-tun's stale flows are swept.
	FDBWait time.Duration
}

// Events the overlay handles (Host.Notify, or the agent's inbox forwarding
// the server's casts).
type (
	// FDBAdd, FDBRemove: l2population add_fdb_entries / remove_fdb_entries.
	FDBAdd    struct{ Entries FDBEntries }
	FDBRemove struct{ Entries FDBEntries }
	// FDBUpdate is update_fdb_entries' chg_ip form: network → agent IP →
	// before/after [mac, ip] pairs (ARP responder entries only).
	FDBUpdate struct {
		ChgIP map[string]map[string]FDBChange
	}
	// TunnelUpdate, TunnelDelete: the q-agent-notifier-tunnel-* casts.
	TunnelUpdate struct{ IP, Type string }
	TunnelDelete struct{ IP, Type string }
	// FDBRefresh: the network's whole FDB is asked for again (l2pop casts
	// of it were lost).
	FDBRefresh struct{ NetworkID string }
	// TunnelResync: tunnel_sync of this type ("" every type) runs again
	// (tunnel casts were lost).
	TunnelResync struct{ Type string }
)

// FDBEntries is l2pop's fdb_entries argument (spec §3.3), already decoded:
// network id → segment and remote agent IP → [mac, ip] pairs. The pair
// ("00:00:00:00:00:00", "0.0.0.0") is the flooding entry.
type FDBEntries map[string]FDBNetwork

// FDBNetwork is one network of an fdb_entries argument.
type FDBNetwork struct {
	SegmentID   *int
	NetworkType string
	Ports       map[string][][2]string // agent IP → [mac, ip]
}

// FDBChange is one agent's before/after pairs.
type FDBChange struct{ Before, After [][2]string }

// retry is one tunnel type's pending tunnel_sync: failures in a row and
// when it may run again (Host.Backoff, the loop's one doubling).
type retry struct {
	failures int
	at       time.Time
}

// Overlay is the feature. Every method runs on the agent's loop.
type Overlay struct {
	cfg Config
	sw  Switch
	srv Server
	m   *metrics.Metrics
	ps  *pipeline.State
	h   feature.Host

	endpoints map[pipeline.TunnelKey]bool // tunnel_sync / tunnel_update endpoints (no l2pop): (ip, type)
	tunnels   map[pipeline.TunnelKey]Port // tunnel ports on br-tun, one per remote IP and type
	sync      map[string]*retry           // tunnel type → pending tunnel_sync
	peers     map[string]int              // tunnel type → endpoints but ours in tunnel_sync's reply

	fdb      map[string]map[netip.Addr]*pipeline.RemoteFDB // l2pop, by network id
	refresh  map[string]bool                               // tunnelled networks whose FDB must be (re)requested
	fdbAwait map[string]time.Time                          // … requested: wait for it until
	fdbSeen  map[string]time.Time                          // last add_fdb_entries per network
	asked    map[pipeline.NetKey]*pipeline.Network         // mappings whose first wired port asked for the FDB (a new mapping of the key asks again)
	swept    bool                                          // the stale flows of earlier runs are gone
}

var (
	_ feature.Attacher      = (*Overlay)(nil)
	_ feature.Waiter        = (*Overlay)(nil)
	_ feature.Prefetcher    = (*Overlay)(nil)
	_ feature.BridgeAdopter = (*Overlay)(nil)
	_ feature.PortHandler   = (*Overlay)(nil)
	_ feature.Syncer        = (*Overlay)(nil)
	_ feature.EventHandler  = (*Overlay)(nil)
	_ feature.Resyncer      = (*Overlay)(nil)
	_ feature.Completer     = (*Overlay)(nil)
	_ feature.Refresher     = (*Overlay)(nil)
	_ feature.FlowObserver  = (*Overlay)(nil)
)

// New builds the overlay over the pipeline state ps. sw and srv may be nil
// (a takeover plan, an offline explanation: nothing is created or asked).
// Every tunnel type's tunnel_sync is pending.
func New(cfg Config, sw Switch, srv Server, m *metrics.Metrics, ps *pipeline.State) *Overlay {
	o := &Overlay{
		cfg: cfg, sw: sw, srv: srv, m: m, ps: ps,
		endpoints: map[pipeline.TunnelKey]bool{},
		tunnels:   map[pipeline.TunnelKey]Port{},
		sync:      map[string]*retry{},
		peers:     map[string]int{},
		fdb:       map[string]map[netip.Addr]*pipeline.RemoteFDB{},
		refresh:   map[string]bool{},
		fdbAwait:  map[string]time.Time{},
		fdbSeen:   map[string]time.Time{},
		asked:     map[pipeline.NetKey]*pipeline.Network{},
	}
	o.resetSync()
	return o
}

func (o *Overlay) Name() string { return Name }

// Attach implements feature.Attacher.
func (o *Overlay) Attach(h feature.Host) { o.h = h }

func (o *Overlay) resetSync() {
	for _, t := range o.cfg.TunnelTypes {
		o.sync[t] = &retry{}
	}
}

func (o *Overlay) ownIP(ip netip.Addr) bool {
	own, err := netip.ParseAddr(o.cfg.LocalIP)
	return err == nil && own == ip
}

func (o *Overlay) tunnelTypeOK(typ string) bool {
	return slices.Contains(o.cfg.TunnelTypes, typ)
}

// touchTunnel marks the tunnel's owner and the networks of its type (their
// flood flows list the tunnel ports).
func (o *Overlay) touchTunnel(ip netip.Addr, typ string) {
	o.h.Touch(pipeline.OwnerTunnel(ip))
	for k, n := range o.ps.Networks {
		if string(n.Type) == typ {
			o.h.Touch(pipeline.OwnerNetwork(k))
		}
	}
}

// --- tunnel_sync (Waiter, Prefetcher) ---

// Waiting implements feature.Waiter: a tunnel_sync is still pending, so the
// tunnel endpoints are not known yet.
func (o *Overlay) Waiting() bool { return len(o.sync) > 0 }

// RetryAt implements feature.Waiter: the earliest pending tunnel_sync.
func (o *Overlay) RetryAt() time.Time {
	var next time.Time
	for _, r := range o.sync {
		if !r.at.IsZero() && (next.IsZero() || r.at.Before(next)) {
			next = r.at
		}
	}
	return next
}

// Prefetch implements feature.Prefetcher: it sends the tunnel_sync calls
// that are due; finish applies their replies on the loop. The calls are
// out while the batch pulls the ports' details (both wait on the server,
// which overlaps them), which shortens the first sync by the call's round
// trip.
func (o *Overlay) Prefetch(ctx context.Context) (finish func()) {
	if o.cfg.LocalIP == "" || o.srv == nil {
		return func() {}
	}
	type reply struct {
		typ  string
		eps  []Endpoint
		err  error
		took time.Duration
	}
	now := o.h.Now()
	var due []string
	for _, typ := range slices.Sorted(maps.Keys(o.sync)) {
		if !o.sync[typ].at.After(now) {
			due = append(due, typ)
		}
	}
	if len(due) == 0 {
		return func() {}
	}
	replies := make([]reply, len(due))
	var wg sync.WaitGroup
	for i, typ := range due {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			eps, err := o.srv.TunnelSync(ctx, o.cfg.LocalIP, typ)
			replies[i] = reply{typ, eps, err, time.Since(start)}
		}()
	}
	return func() {
		wg.Wait()
		for _, rp := range replies {
			o.h.ObserveRPC("tunnel_sync", rp.took, rp.err)
			o.applyTunnelSync(now, rp.typ, rp.eps, rp.err)
		}
	}
}

// applyTunnelSync records one tunnel_sync reply (or schedules a retry).
func (o *Overlay) applyTunnelSync(now time.Time, typ string, eps []Endpoint, err error) {
	r := o.sync[typ]
	if r == nil {
		return
	}
	if err != nil {
		r.failures++
		wait := o.h.Backoff(r.failures)
		r.at = now.Add(wait)
		o.h.Log().Warn("agent: tunnel_sync failed; retrying", "type", typ, "err", err, "in", wait)
		return
	}
	delete(o.sync, typ)
	peers := 0
	for _, ep := range eps {
		if ip, err := netip.ParseAddr(ep.IP); err == nil && !o.ownIP(ip) {
			peers++
		}
	}
	o.peers[typ] = peers
	if o.cfg.L2Population {
		return // l2pop creates tunnels on demand
	}
	for _, ep := range eps {
		o.tunnelUpdate(TunnelUpdate{IP: ep.IP, Type: typ})
	}
}

// --- tunnel ports (BridgeAdopter, Syncer, FlowObserver) ---

// AdoptBridges implements feature.BridgeAdopter: the tunnel ports OVSDB
// has go into the state, so their flows are re-installed and they are not
// re-created. After an ovs-vswitchd restart every tunnel_sync runs again.
func (o *Overlay) AdoptBridges(ctx context.Context, restarted bool) {
	o.adoptTunnels(ctx)
	if restarted {
		o.resetSync()
	}
}

func (o *Overlay) adoptTunnels(ctx context.Context) {
	if o.h.Layout().Tunnel == "" || o.sw == nil {
		return
	}
	tps, err := o.sw.TunnelPorts(ctx)
	if err != nil {
		o.h.Log().Warn("agent: listing tunnel ports failed", "err", err)
		return
	}
	o.AdoptPorts(tps)
}

// AdoptPorts takes these tunnel ports into the state (a takeover plan's
// listed ports; the adoption at start).
func (o *Overlay) AdoptPorts(tps []Port) {
	for _, tp := range tps {
		ip, err := netip.ParseAddr(tp.RemoteIP)
		if err != nil || tp.OFPort <= 0 {
			continue
		}
		t := &pipeline.Tunnel{RemoteIP: ip, Type: pipeline.NetworkType(tp.Type), Ofport: uint32(tp.OFPort)}
		o.tunnels[t.Key()] = tp
		o.ps.Tunnels[t.Key()] = t
		o.touchTunnel(ip, tp.Type)
	}
}

// wanted is the tunnel ports the state needs: with l2pop the remote agents
// of the local networks' FDB, without it every known endpoint.
func (o *Overlay) wanted() map[pipeline.TunnelKey]bool {
	if o.cfg.L2Population {
		return pipeline.WantedTunnels(o.ps, o.fdb)
	}
	return o.endpoints
}

// Sync implements feature.Syncer: it forgets the FDB of networks that left
// the host and makes the tunnel ports on br-tun those the state needs.
// Adopted ports nobody claims stay until the first sweep. A port not
// created is an error: retried with the loop's back-off.
func (o *Overlay) Sync(ctx context.Context) error {
	o.prune()
	if o.h.Layout().Tunnel == "" || o.sw == nil {
		return nil
	}
	want := o.wanted()
	var errs []error
	for _, key := range slices.SortedFunc(maps.Keys(want), compareTunnelKeys) {
		ip, typ := key.IP, string(key.Type)
		if _, ok := o.tunnels[key]; ok {
			continue
		}
		tp, err := o.sw.EnsureTunnelPort(ctx, Port{Type: typ, RemoteIP: ip.String(), LocalIP: o.cfg.LocalIP})
		if err == nil && tp.OFPort <= 0 {
			err = fmt.Errorf("no ofport (%d)", tp.OFPort)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("tunnel port %s to %s: %w", typ, ip, err))
			continue
		}
		o.tunnels[key] = tp
		o.ps.Tunnels[key] = &pipeline.Tunnel{RemoteIP: ip, Type: key.Type, Ofport: uint32(tp.OFPort)}
		o.touchTunnel(ip, typ)
	}
	if o.swept {
		for _, key := range slices.SortedFunc(maps.Keys(o.tunnels), compareTunnelKeys) {
			if want[key] {
				continue
			}
			tp := o.tunnels[key]
			if err := o.sw.DeleteTunnelPort(ctx, tp); err != nil {
				o.h.Log().Warn("agent: deleting tunnel port failed", "port", tp.Name, "err", err)
				continue
			}
			delete(o.tunnels, key)
			delete(o.ps.Tunnels, key)
			o.touchTunnel(key.IP, tp.Type)
		}
	}
	return errors.Join(errs...)
}

// FlowsApplied implements feature.FlowObserver (nothing to do).
func (o *Overlay) FlowsApplied(string, []string) {}

// Swept implements feature.FlowObserver: the first sync is over. The FDB
// no longer holds anything back, and the adopted tunnel ports nobody
// claims go with the next batch (their owners are touched so it runs).
func (o *Overlay) Swept() {
	o.swept = true
	clear(o.fdbAwait)
	want := o.wanted()
	for key := range o.tunnels {
		if !want[key] {
			o.h.Touch(pipeline.OwnerTunnel(key.IP))
		}
	}
}

// --- the server's casts (EventHandler) ---

// HandleEvent implements feature.EventHandler.
func (o *Overlay) HandleEvent(data any) {
	switch e := data.(type) {
	case FDBAdd:
		o.fdbApply(e.Entries, true)
	case FDBRemove:
		o.fdbApply(e.Entries, false)
	case FDBUpdate:
		o.fdbChgIP(e)
	case TunnelUpdate:
		o.tunnelUpdate(e)
	case TunnelDelete:
		o.tunnelDelete(e)
	case FDBRefresh:
		// As a full resync does for every network: the next report of one
		// of its ports asks the server for the network's FDB.
		for k, n := range o.ps.Networks {
			if k.NetworkID == e.NetworkID && n.Type.IsTunnel() && o.cfg.L2Population {
				o.refresh[k.NetworkID] = true
			}
		}
	case TunnelResync:
		for typ := range o.sync {
			if e.Type == "" || e.Type == typ {
				o.sync[typ] = &retry{}
			}
		}
	}
}

// tunnelUpdate handles tunnel_update (and tunnel_sync's reply): without
// l2pop every endpoint gets a tunnel port.
func (o *Overlay) tunnelUpdate(e TunnelUpdate) {
	ip, err := netip.ParseAddr(e.IP)
	if err != nil {
		o.m.IncMalformed("q-agent-notifier-tunnel-update", "bad-ip")
		return
	}
	if o.cfg.L2Population || !o.tunnelTypeOK(e.Type) || o.ownIP(ip) {
		return
	}
	o.endpoints[pipeline.TunnelKey{IP: ip, Type: pipeline.NetworkType(e.Type)}] = true
}

func (o *Overlay) tunnelDelete(e TunnelDelete) {
	ip, err := netip.ParseAddr(e.IP)
	if err != nil {
		o.m.IncMalformed("q-agent-notifier-tunnel-delete", "bad-ip")
		return
	}
	if e.Type == "" { // an old server names no type: every type to that IP
		for k := range o.endpoints {
			if k.IP == ip {
				delete(o.endpoints, k)
			}
		}
		return
	}
	delete(o.endpoints, pipeline.TunnelKey{IP: ip, Type: pipeline.NetworkType(e.Type)})
}

// localNet finds the local mapping of an l2pop network entry (keyed by
// network id and segment, like the reference).
func (o *Overlay) localNet(netID string, seg *int) (pipeline.NetKey, bool) {
	for k := range o.ps.Networks {
		if k.NetworkID != netID {
			continue
		}
		if seg == nil || !k.HasSeg || int(k.SegID) == *seg {
			return k, true
		}
	}
	return pipeline.NetKey{}, false
}

// fdbApply applies add_fdb_entries / remove_fdb_entries.
func (o *Overlay) fdbApply(entries FDBEntries, add bool) {
	o.prune()
	for netID, fn := range entries {
		key, ok := o.localNet(netID, fn.SegmentID)
		if !ok {
			o.h.Log().Debug("agent: l2pop entry for a network without local port; ignored", "network", netID)
			continue
		}
		m := o.netFDB(key)
		for ipStr, pairs := range fn.Ports {
			ip, err := netip.ParseAddr(ipStr)
			if err != nil {
				o.h.Log().Warn("agent: l2pop entry with a bad agent IP; dropped", "network", netID, "ip", ipStr)
				o.m.IncMalformed("q-agent-notifier-l2population-update", "bad-agent-ip")
				continue
			}
			if o.ownIP(ip) {
				continue
			}
			for bad := pipeline.ApplyRemote(m, ip, pairs, add); bad > 0; bad-- {
				o.m.IncMalformed("q-agent-notifier-l2population-update", "bad-fdb-entry")
			}
		}
		o.h.Touch(pipeline.OwnerNetwork(key))
		if add {
			delete(o.fdbAwait, netID)
			o.fdbSeen[netID] = o.h.Now()
		}
	}
}

// fdbChgIP applies update_fdb_entries' chg_ip (ARP responder entries).
func (o *Overlay) fdbChgIP(u FDBUpdate) {
	o.prune()
	for netID, agents := range u.ChgIP {
		m := o.fdb[netID]
		if m == nil {
			continue
		}
		for ipStr, chg := range agents {
			ip, err := netip.ParseAddr(ipStr)
			if err != nil || o.ownIP(ip) {
				continue
			}
			pipeline.ChangeRemote(m, ip, chg.Before, chg.After)
		}
		for k := range o.ps.Networks {
			if k.NetworkID == netID {
				o.h.Touch(pipeline.OwnerNetwork(k))
			}
		}
	}
}

// --- networks (PortHandler, Resyncer) ---

// netFDB is the FDB of the network of key (one map per network id, shared
// by its segments' mappings), given to its mapping in the state.
func (o *Overlay) netFDB(key pipeline.NetKey) map[netip.Addr]*pipeline.RemoteFDB {
	m := o.fdb[key.NetworkID]
	if m == nil {
		m = map[netip.Addr]*pipeline.RemoteFDB{}
		o.fdb[key.NetworkID] = m
	}
	if n := o.ps.Networks[key]; n != nil {
		n.FDB = m
	}
	return m
}

// PortWired implements feature.PortHandler: the first port wired up on a
// mapping gets the network's FDB; with l2pop a tunnelled one is asked for
// it (refresh_tunnels with that port's report), even when some entries came
// already: another host's first-port cast that arrived between the mapping
// and this port's wiring is part of the FDB only, and the server's own
// first-port FDB is no certainty (seen: a DVR host never learnt the peer of
// a network whose VM was up before the router interface, TestDVR's GRE
// step, 2026-12-05). One full FDB per network's arrival, as l2pop's own
// first-port rule gives.
func (o *Overlay) PortWired(p feature.Port) {
	if p.Wiring != feature.WiredUp {
		return
	}
	key := netKey(p)
	n := o.ps.Networks[key]
	if n == nil || o.asked[key] == n {
		return
	}
	if n.FDB == nil && !o.otherMapping(key) {
		o.forget(key.NetworkID) // what was left of an earlier stay is stale
	}
	o.asked[key] = n
	o.netFDB(key)
	if n.Type.IsTunnel() && o.cfg.L2Population {
		o.refresh[key.NetworkID] = true
	}
}

// PortRemoved implements feature.PortHandler (the network's release is
// seen in prune).
func (o *Overlay) PortRemoved(string) {}

// otherMapping: another mapping (segment) of key's network is on the host.
func (o *Overlay) otherMapping(key pipeline.NetKey) bool {
	for k := range o.ps.Networks {
		if k != key && k.NetworkID == key.NetworkID {
			return true
		}
	}
	return false
}

// forget drops what the overlay knows of a network.
func (o *Overlay) forget(id string) {
	delete(o.fdb, id)
	delete(o.refresh, id)
	delete(o.fdbAwait, id)
	delete(o.fdbSeen, id)
	for k := range o.asked {
		if k.NetworkID == id {
			delete(o.asked, k)
		}
	}
}

// netKey is the mapping key of a wired port (as the agent keys it).
func netKey(p feature.Port) pipeline.NetKey {
	if s := p.SegmentationID; s != nil && *s >= 0 && *s <= math.MaxUint32 {
		return pipeline.Seg(p.NetworkID, uint32(*s))
	}
	return pipeline.NoSeg(p.NetworkID)
}

// prune forgets the FDB and the waits of the networks that have no
// mapping on this host any more.
func (o *Overlay) prune() {
	if len(o.fdb) == 0 && len(o.refresh) == 0 && len(o.fdbAwait) == 0 && len(o.fdbSeen) == 0 && len(o.asked) == 0 {
		return
	}
	for k, n := range o.asked {
		if o.ps.Networks[k] != n {
			delete(o.asked, k) // that mapping left: its next arrival asks again
		}
	}
	live := make(map[string]bool, len(o.ps.Networks))
	for k := range o.ps.Networks {
		live[k.NetworkID] = true
	}
	var gone []string
	for _, ids := range [][]string{slices.Sorted(maps.Keys(o.fdb)), slices.Sorted(maps.Keys(o.refresh)), slices.Sorted(maps.Keys(o.fdbAwait)), slices.Sorted(maps.Keys(o.fdbSeen))} {
		for _, id := range ids {
			if !live[id] {
				gone = append(gone, id)
			}
		}
	}
	for _, id := range gone {
		o.forget(id)
	}
}

// Resync implements feature.Resyncer: with l2pop every tunnelled network's
// FDB is asked for again.
func (o *Overlay) Resync(string) {
	for k, n := range o.ps.Networks {
		if n.Type.IsTunnel() && o.cfg.L2Population {
			o.refresh[k.NetworkID] = true
		}
	}
}

// --- the FDB awaited (Refresher, Completer) ---

// RefreshNetworks implements feature.Refresher: the networks whose FDB the
// next update_device_list asks for (sorted).
func (o *Overlay) RefreshNetworks() []string {
	o.prune()
	return slices.Sorted(maps.Keys(o.refresh))
}

// RefreshReplied implements feature.Refresher: the server answered a call
// that asked for these networks' FDB. Only flows that output to a tunnel
// port need the FDB back before the sweep; with no tunnel port there is
// none, and l2pop sends nothing when the network has no other host. The
// FDB may also have come before the reply (the server casts it while it
// handles the call).
func (o *Overlay) RefreshReplied(nets []string, sent, replied time.Time) {
	for _, id := range nets {
		if !o.refresh[id] {
			continue
		}
		delete(o.refresh, id)
		got, ok := o.fdbSeen[id]
		if !o.swept && len(o.tunnels) > 0 && !(ok && !got.Before(sent)) {
			o.fdbAwait[id] = replied.Add(o.cfg.FDBWait)
		}
	}
}

// Complete implements feature.Completer: the FDB of every tunnelled
// network was asked for and has arrived or been waited for.
func (o *Overlay) Complete() bool {
	if o.noPeers() {
		return true // no other host: l2pop has no FDB to send
	}
	o.prune()
	if len(o.refresh) > 0 {
		return false
	}
	now := o.h.Now()
	for _, dl := range o.fdbAwait {
		if now.Before(dl) {
			return false
		}
	}
	return true
}

// CompleteBy implements feature.Completer: the earliest FDB wait's end.
func (o *Overlay) CompleteBy() time.Time {
	var next time.Time
	for _, d := range o.fdbAwait {
		if next.IsZero() || d.Before(next) {
			next = d
		}
	}
	return next
}

// HoldSweep implements feature.Completer: br-tun's flows toward other
// hosts depend on l2pop's FDB, but only where br-tun has tunnel ports:
// without any, no installed flow can reach a peer.
func (o *Overlay) HoldSweep(bridge string) bool {
	return bridge == o.h.Layout().Tunnel && len(o.tunnels) > 0 && !o.Complete()
}

// noPeers: tunnel_sync named no endpoint but ours for every tunnel type
// and br-tun has no tunnel port, so no FDB entry can come.
func (o *Overlay) noPeers() bool {
	if len(o.tunnels) > 0 || len(o.peers) < len(o.cfg.TunnelTypes) {
		return false
	}
	for _, n := range o.peers {
		if n > 0 {
			return false
		}
	}
	return true
}

// compareTunnelKeys orders tunnel keys by remote IP, then type.
func compareTunnelKeys(a, b pipeline.TunnelKey) int {
	if c := a.IP.Compare(b.IP); c != 0 {
		return c
	}
	return cmp.Compare(a.Type, b.Type)
}
