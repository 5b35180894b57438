package openflow

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
)

// Switch is what the reconciler needs from a bridge connection (*Conn).
type Switch interface {
	Bundle(ctx context.Context, mods []FlowMod) error
	DumpFlows(ctx context.Context, table uint8, cookie, cookieMask uint64) ([]Flow, error)
}

// Reconciler keeps one bridge's flows equal to the desired flows, grouped by
// owner key ("base", "port:<id>", "net:<id>", ...). Each Apply sends one
// atomic bundle; a failed bundle leaves both the bridge and the cache as
// they were, so the caller can simply retry. When the switch rejects flows
// of some owners, the others are applied without them and Apply returns an
// OwnersRejectedError naming them (see isolate).
//
// Every flow is installed with the reconciler's cookie (its "round").
// Restart without a gap: Adopt reads what the bridge holds (an earlier
// round's flows keep forwarding); Apply installs owners as they are computed,
// replacing a still-wanted flow in place (ADD of the same
// table/priority/match re-cookies it), never deleting and re-adding it; once
// the agent is in sync, ApplyAndSweep also deletes, in the same bundle,
// the flows no owner desires that SetSweepable allows (stale rounds; other
// controllers' flows only where the caller says so).
//
// Memory: the reconciler is the one cache of a bridge's flows (56k flows on
// br-int at 1,000 ports). It keeps each owner's flows in their wire form
// (ownerFlows), a 16-byte key per flow, and one 16-byte slot per entry naming
// the desired flow and saying whether the bridge holds it; a Flow value is
// kept only for what the bridge holds otherwise (read by Adopt), in a map
// beside the slots that exists only while such flows do.
type Reconciler struct {
	sw Switch

	mu       sync.Mutex
	cookie   uint64
	owners   map[string]*ownerFlows // owner -> its desired flows
	slots    map[flowKey]slot       // entry -> who desires it, what the bridge holds
	adopted  map[flowKey]*Flow      // what the bridge holds for the slots marked adopted; nil when none
	reassert bool                   // slots were (re)read: re-send unchanged owners' flows that differ
	sweep    func(*Flow) bool       // which undesired flows a sweep may delete; nil: every one
	scratch  []byte                 // encoding buffer, reused (owners are stored exact-size)
}

// flowKey identifies an entry (table, priority, canonical match): the
// SHA-256 of Flow.Key(), truncated to 128 bits. 16 bytes instead of ~100
// of text per flow; a collision cannot be crafted (matches carry tenant
// addresses and ports) nor happen by chance (2^-100 at 10^7 flows).
type flowKey [16]byte

func keyOf(f *Flow) flowKey {
	sum := sha256.Sum256([]byte(f.Key()))
	return flowKey(sum[:16])
}

// slot is the state of one entry (16 bytes: there is one per flow, 56k at
// 1,000 ports; an adopted Flow pointer here would make it 24, so adopted
// flows live in a map beside the slots).
//
// With wanted, flow idx of of is desired: held says the bridge holds it,
// else, with adopted, the bridge holds r.adopted[key] instead (nothing
// installed when neither). Without wanted, nobody desires the entry: it is
// adopted, or, within a plan only, held says the bridge holds flow idx of
// of (an owner's former flow, about to be deleted). held and adopted are
// never both set.
type slot struct {
	of      *ownerFlows
	idx     int32
	wanted  bool
	held    bool
	adopted bool
}

// ownerName is the name of the owner desiring the entry, "" if none.
func (s slot) ownerName() string {
	if !s.wanted {
		return ""
	}
	return s.of.name
}

// desires: the entry's desired flow is flow i of of.
func (s slot) desires(of *ownerFlows, i int) bool {
	return s.wanted && s.of == of && int(s.idx) == i
}

// installed: the bridge holds something for this entry.
func (s slot) installed() bool { return s.held || s.adopted }

// have is the adopted flow the bridge holds for entry k of slot s, nil if
// the slot is not adopted.
func (r *Reconciler) have(k flowKey, s slot) *Flow {
	if !s.adopted {
		return nil
	}
	return r.adopted[k]
}

// table is the table of what the bridge holds for entry k (installed only).
func (r *Reconciler) table(k flowKey, s slot) uint8 {
	if s.held {
		return s.of.table(int(s.idx))
	}
	return r.adopted[k].Table
}

// sameContent: the bridge's entry needs no change (cookie, flags,
// timeouts and actions equal).
func sameContent(have, want *Flow) bool {
	return sameHeader(have, want) && FormatActions(have.Actions) == FormatActions(want.Actions)
}

// sameHeader: what an OpenFlow 1.3 modify cannot change is equal.
func sameHeader(have, want *Flow) bool {
	return have.Cookie == want.Cookie && have.Flags == want.Flags &&
		have.IdleTimeout == want.IdleTimeout && have.HardTimeout == want.HardTimeout
}

// NewReconciler returns a reconciler for one bridge installing flows with cookie.
func NewReconciler(sw Switch, cookie uint64) *Reconciler {
	return &Reconciler{sw: sw, cookie: cookie, owners: map[string]*ownerFlows{}, slots: map[flowKey]slot{}}
}

// Cookie is the cookie this reconciler installs flows with.
func (r *Reconciler) Cookie() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cookie
}

// SetCookie changes the cookie later Applies install flows with. After
// Adopt, setting it to the cookie the bridge's flows already carry (our own
// previous run's) makes every unchanged flow count as installed: a restart
// re-sends only what changed instead of re-cookieing the whole bridge.
func (r *Reconciler) SetCookie(cookie uint64) {
	r.mu.Lock()
	r.cookie = cookie
	r.mu.Unlock()
}

// SetSweepable decides which flows the bridge holds and no owner desires
// ApplyAndSweep (and Resync) may delete: another controller's flows share
// our bridges and are not ours to delete. nil: every such flow.
func (r *Reconciler) SetSweepable(may func(*Flow) bool) {
	r.mu.Lock()
	r.sweep = may
	r.mu.Unlock()
}

// Adopt reads every flow the bridge holds (ours, an earlier round's, a
// foreign agent's) as the installed state. Nothing is deleted until
// ApplyAndSweep; desired flows (if any) that the bridge lacks or holds
// differently are re-sent by the next Apply.
func (r *Reconciler) Adopt(ctx context.Context) error {
	flows, err := r.sw.DumpFlows(ctx, TableAll, 0, 0)
	if err != nil {
		return fmt.Errorf("openflow: adopt: %w", err)
	}
	keys := make([]flowKey, len(flows))
	for i := range flows {
		keys[i] = keyOf(&flows[i])
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetInstalled()
	if len(flows) > 0 {
		r.adopted = make(map[flowKey]*Flow, len(flows))
	}
	for i := range flows {
		s := r.slots[keys[i]]
		s.adopted, s.held = true, false
		r.slots[keys[i]] = s
		r.adopted[keys[i]] = &flows[i]
	}
	return nil
}

// Resync re-reads the bridge and re-sends whatever differs from the desired
// state (after an ovs-vswitchd restart or a reconnect), deleting strays.
func (r *Reconciler) Resync(ctx context.Context) error {
	if err := r.Adopt(ctx); err != nil {
		return err
	}
	return r.ApplyAndSweep(ctx, nil)
}

// Reset forgets what is installed (ovs-vswitchd restarted with empty
// tables); the next Apply re-installs every desired flow, changed or not.
func (r *Reconciler) Reset() {
	r.mu.Lock()
	r.forgetInstalled()
	r.mu.Unlock()
}

// forgetInstalled forgets what the bridge holds (dropping slots nobody
// desires) and asks the next apply to re-assert every owner.
func (r *Reconciler) forgetInstalled() {
	for k, s := range r.slots {
		if !s.wanted {
			delete(r.slots, k)
			continue
		}
		s.adopted, s.held = false, false
		r.slots[k] = s
	}
	r.adopted = nil
	r.reassert = true
}

// Apply replaces the desired flows of each owner in changes and makes the
// bridge match, in one bundle, without touching flows nobody desires. An
// *OwnersRejectedError says the switch rejected the named owners' flows and
// everything else was applied.
//
// The reconciler keeps the flows in its own (wire) form: the caller's
// slices are neither kept nor modified.
func (r *Reconciler) Apply(ctx context.Context, changes map[string][]Flow) error {
	return r.apply(ctx, changes, false)
}

// ApplyAndSweep is Apply plus, in the same bundle, the deletion of every
// flow of the bridge that no owner desires and SetSweepable allows: an
// earlier round's leftovers, foreign flows (after Adopt). Call it when the
// desired state is complete.
func (r *Reconciler) ApplyAndSweep(ctx context.Context, changes map[string][]Flow) error {
	return r.apply(ctx, changes, true)
}

// plan is one apply's work: the new owner flows (and the flows as given,
// with the reconciler's cookie, to send without decoding), the new state of
// every slot it touches (a zero slot is removed) and the bundle. Nothing of
// it reaches the reconciler unless the bundle succeeds.
type plan struct {
	owners map[string]*ownerFlows
	given  map[*ownerFlows][]Flow
	next   map[flowKey]slot
	mods   []FlowMod
	// spans names the owner of each run of mods (a mod's owner is the
	// one of the last span starting at or before it; "" for strays): one
	// entry per owner, not per mod, read only when the switch rejects a
	// mod.
	spans []modSpan
}

type modSpan struct {
	start int
	owner string
}

// add appends a mod made for owner.
func (p *plan) add(owner string, m FlowMod) {
	if n := len(p.spans); n == 0 || p.spans[n-1].owner != owner {
		p.spans = append(p.spans, modSpan{start: len(p.mods), owner: owner})
	}
	p.mods = append(p.mods, m)
}

// ownerOf is the owner mod i was made for.
func (p *plan) ownerOf(i int) string {
	j := sort.Search(len(p.spans), func(j int) bool { return p.spans[j].start > i })
	if j == 0 {
		return ""
	}
	return p.spans[j-1].owner
}

// apply replaces the desired flows of each owner in changes (an empty or nil
// list removes the owner) and makes the bridge match in one bundle. Owners
// not in changes are untouched. Flow cookies are overwritten with the
// reconciler's cookie. When the switch rejects flows of some owners, the
// others are applied without them (isolate).
func (r *Reconciler) apply(ctx context.Context, changes map[string][]Flow, sweep bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()

	owners := slices.Sorted(maps.Keys(changes))
	p := r.plan(changes, owners, sweep)
	err := r.sw.Bundle(ctx, p.mods)
	if err == nil {
		r.commit(p)
		return nil
	}
	var be *BundleError
	if len(owners) == 0 || !errors.As(err, &be) {
		return err // the connection failed, or no owner's change is to blame
	}
	return r.isolate(ctx, changes, owners, sweep, p, be)
}

// plan computes the bundle that applies changes for owners (a subset of
// its keys, sorted).
func (r *Reconciler) plan(changes map[string][]Flow, owners []string, sweep bool) *plan {
	p := &plan{owners: make(map[string]*ownerFlows, len(owners)), given: make(map[*ownerFlows][]Flow, len(owners)), next: map[flowKey]slot{}}
	for _, o := range owners {
		fs := r.withCookie(changes[o])
		of := r.newOwnerFlows(o, fs)
		p.owners[o], p.given[of] = of, fs
	}
	r.planDesires(p, owners)
	dels := r.planRemovals(p, owners)
	if r.reassert {
		r.planReassert(p)
	}
	if sweep {
		dels = append(dels, r.strays(p)...)
	}
	for _, k := range dels {
		r.planDelete(p, k)
	}
	return p
}

// withCookie returns fs with the reconciler's cookie on every flow: fs
// itself when they carry it already, else a copy (the caller's slice is
// left as it was).
func (r *Reconciler) withCookie(fs []Flow) []Flow {
	for i := range fs {
		if fs[i].Cookie != r.cookie {
			fs = append([]Flow(nil), fs...)
			for j := range fs {
				fs[j].Cookie = r.cookie
			}
			break
		}
	}
	return fs
}

// slotOf is a slot as this plan leaves it so far.
func (r *Reconciler) slotOf(p *plan, k flowKey) slot {
	if s, ok := p.next[k]; ok {
		return s
	}
	return r.slots[k]
}

// planDesires makes every flow of the changed owners desired and brings
// the bridge's entry to it. When two owners desire one entry, the last in
// owner order keeps it (as OpenFlow can hold only one).
func (r *Reconciler) planDesires(p *plan, owners []string) {
	for _, o := range owners {
		of := p.owners[o]
		for i, k := range of.keys {
			p.next[k] = slot{of: of, idx: int32(i), wanted: true}
		}
	}
	for _, o := range owners {
		of := p.owners[o]
		fs := p.given[of]
		for i, k := range of.keys {
			if p.next[k].desires(of, i) {
				// what the bridge holds is still r.slots' (p.next's
				// entries so far only name the winners)
				p.next[k] = r.install(p, k, r.slots[k], of, i, &fs[i])
			}
		}
	}
}

// install adds to the bundle what brings the bridge's entry k from what old
// says it holds to want (flow i of of), and returns the entry's slot with
// the bridge holding it.
func (r *Reconciler) install(p *plan, k flowKey, old slot, of *ownerFlows, i int, want *Flow) slot {
	if have, same := r.held(k, old, of, i); !same {
		switch {
		case have == nil:
			p.add(of.name, FlowMod{Command: CmdAdd, Flow: *want})
		case sameContent(have, want):
		case sameHeader(have, want):
			// only the actions differ: modify in place, keeping counters
			p.add(of.name, FlowMod{Command: CmdModifyStrict, Flow: *want})
		default:
			// ADD replaces the entry atomically; OpenFlow 1.3 modify cannot change a cookie
			p.add(of.name, FlowMod{Command: CmdAdd, Flow: *want})
		}
	}
	return slot{of: of, idx: int32(i), wanted: true, held: true}
}

// held returns what the bridge holds for entry k of slot s (nil:
// nothing), or same when it is byte for byte flow i of of: decided on the
// records, without decoding or rendering (at a restart, 56k adopted flows
// are compared with ours).
func (r *Reconciler) held(k flowKey, s slot, of *ownerFlows, i int) (have *Flow, same bool) {
	if !s.held {
		have = r.have(k, s)
		return have, have != nil && r.encodesAs(have, of, i)
	}
	if sameRecord(s.of, int(s.idx), of, i) {
		return nil, true
	}
	f := s.of.flow(int(s.idx))
	return &f, false
}

// planRemovals lists the entries the changed owners had and nobody desires
// any more (an entry another owner desires stays).
func (r *Reconciler) planRemovals(p *plan, owners []string) []flowKey {
	var dels []flowKey
	for _, o := range owners {
		old := r.owners[o]
		if old == nil {
			continue
		}
		for _, k := range old.keys {
			if _, touched := p.next[k]; touched {
				continue // desired again (or already listed)
			}
			if s := r.slots[k]; s.wanted && s.of == old {
				s.wanted = false
				p.next[k] = s
				dels = append(dels, k)
			}
		}
	}
	return dels
}

// planReassert re-sends the unchanged owners' flows the bridge does not
// hold as desired (after Adopt or Reset).
func (r *Reconciler) planReassert(p *plan) {
	for _, o := range slices.Sorted(maps.Keys(r.owners)) {
		if _, changed := p.owners[o]; changed {
			continue
		}
		of := r.owners[o]
		for i, k := range of.keys {
			if _, touched := p.next[k]; touched {
				continue
			}
			if s := r.slots[k]; s.desires(of, i) && !s.held {
				want := of.flow(i)
				p.next[k] = r.install(p, k, s, of, i, &want)
			}
		}
	}
}

// strays lists, in a stable order, the entries the bridge holds that no
// owner desires once this plan is done, that no other step deletes and
// that the sweep may delete. Those it may not stay adopted: still held,
// never re-sent.
func (r *Reconciler) strays(p *plan) []flowKey {
	var ks []flowKey
	for k, s := range r.slots {
		if _, touched := p.next[k]; !touched && !s.wanted && s.adopted && (r.sweep == nil || r.sweep(r.adopted[k])) {
			ks = append(ks, k)
		}
	}
	sort.Slice(ks, func(i, j int) bool { return bytes.Compare(ks[i][:], ks[j][:]) < 0 })
	return ks
}

// planDelete deletes the entry from the bridge (if it holds it) and drops
// the slot.
func (r *Reconciler) planDelete(p *plan, k flowKey) {
	s := r.slotOf(p, k)
	have, owner := r.have(k, s), ""
	if s.held {
		f := s.of.flow(int(s.idx))
		have, owner = &f, s.of.name
	}
	if have != nil {
		p.add(owner, FlowMod{Command: CmdDeleteStrict,
			Flow: Flow{Table: have.Table, Priority: have.Priority, Match: have.Match, rawMatch: have.rawMatch}})
	}
	p.next[k] = slot{}
}

// commit makes a plan whose bundle succeeded the reconciler's state.
func (r *Reconciler) commit(p *plan) {
	for k, s := range p.next {
		if s == (slot{}) {
			delete(r.slots, k)
		} else {
			r.slots[k] = s
		}
		if !s.adopted {
			delete(r.adopted, k) // replaced or deleted
		}
	}
	if len(r.adopted) == 0 {
		// A map does not shrink: the one Adopt made for 56k flows would
		// stay allocated, empty, once every adopted flow is replaced.
		r.adopted = nil
	}
	for o, of := range p.owners {
		if of.len() == 0 {
			delete(r.owners, o)
		} else {
			r.owners[o] = of
		}
	}
	r.reassert = false
}

// InstalledFlow is a flow the bridge holds as far as the reconciler knows,
// with the owner that desires it ("" for a flow adopted and not yet swept).
type InstalledFlow struct {
	Owner string
	Flow  Flow
}

// Installed returns the installed flows ordered by table and priority
// (highest first); flows of one table and priority come in a fixed order
// of their keys' hashes, not of their match text: no consumer needs the
// text order and rendering 56k keys tripled the cost of this call, made
// twice at every start (own cookie, firewall conjunction ids).
func (r *Reconciler) Installed() []InstalledFlow {
	type keyed struct {
		key flowKey
		f   InstalledFlow
	}
	r.mu.Lock()
	ks := make([]keyed, 0, len(r.slots))
	for k, s := range r.slots {
		switch {
		case s.held:
			ks = append(ks, keyed{key: k, f: InstalledFlow{Owner: s.ownerName(), Flow: s.of.flow(int(s.idx))}})
		case s.adopted:
			ks = append(ks, keyed{key: k, f: InstalledFlow{Owner: s.ownerName(), Flow: *r.adopted[k]}})
		}
	}
	r.mu.Unlock()
	sort.Slice(ks, func(i, j int) bool {
		a, b := &ks[i].f.Flow, &ks[j].f.Flow
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		return bytes.Compare(ks[i].key[:], ks[j].key[:]) < 0
	})
	out := make([]InstalledFlow, len(ks))
	for i := range ks {
		out[i] = ks[i].f
	}
	return out
}

// Desired returns the desired flows of one owner (one per entry), ordered
// by Flow.Key.
func (r *Reconciler) Desired(owner string) []Flow {
	r.mu.Lock()
	var fs []Flow
	if of := r.owners[owner]; of != nil {
		for i, k := range of.keys {
			if r.slots[k].desires(of, i) {
				fs = append(fs, of.flow(i))
			}
		}
	}
	r.mu.Unlock()
	// one owner's flows: few enough to render keys in the comparator
	sort.Slice(fs, func(i, j int) bool { return fs[i].Key() < fs[j].Key() })
	return fs
}

// Counts returns the number of installed flows per table (for metrics).
func (r *Reconciler) Counts() map[uint8]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := map[uint8]int{}
	for k, s := range r.slots {
		if s.installed() {
			c[r.table(k, s)]++
		}
	}
	return c
}

// InstalledIn returns the installed flows of the tables keep accepts,
// unsorted: a cheap look at a few tables of a bridge with tens of thousands
// of flows (the start's check for state ovs-agent cannot rebuild).
func (r *Reconciler) InstalledIn(keep func(table uint8) bool) []Flow {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Flow
	for k, s := range r.slots {
		if !s.installed() || !keep(r.table(k, s)) {
			continue
		}
		switch {
		case s.held:
			out = append(out, s.of.flow(int(s.idx)))
		case s.adopted:
			out = append(out, *r.adopted[k])
		}
	}
	return out
}
