package neutron

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EventKind says whether a cache event is an update (create or change) or a delete.
type EventKind uint8

// Event kinds.
const (
	Updated EventKind = iota + 1
	Deleted
)

func (k EventKind) String() string {
	switch k {
	case Updated:
		return "updated"
	case Deleted:
		return "deleted"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is a relevant change to a cached resource, the agent's replacement for the
// reference's AFTER_UPDATE / AFTER_DELETE registry callbacks. Old is nil for a resource
// first seen; New is nil for a delete (Old is then the last cached value, nil if the
// resource was never cached). Values are shared with the cache and must not be modified.
type Event struct {
	Type string
	Kind EventKind
	ID   string
	Old  Resource
	New  Resource
	// Changed lists the JSON field names that differ (all set fields for a new
	// resource), revision_number and updated_at excluded. Empty for deletes.
	Changed []string
	// AgentRestarted marks updates that came from a fill the caller flagged as the
	// agent's initial sync (the reference's agent_restarted on port_update).
	AgentRestarted bool
}

// HasChanged reports whether field (a JSON name) is in e.Changed.
func (e Event) HasChanged(fields ...string) bool {
	for _, c := range e.Changed {
		for _, f := range fields {
			if c == f {
				return true
			}
		}
	}
	return false
}

// Filter is a bulk_pull filter: field → accepted values (OR within a field, AND across).
type Filter map[string][]string

// Puller fetches resources from the server (bulk_pull).
type Puller interface {
	BulkPull(ctx context.Context, rtype string, filter Filter) ([]Resource, error)
}

// VersionedPuller is a Puller that tells the OVO version each object was pulled at
// (versions[i] is that of rs[i]); Fill and Resync use it when the Puller has it, and
// record the version as ApplyPushAt records a push's.
type VersionedPuller interface {
	BulkPullVersions(ctx context.Context, rtype string, filter Filter) (rs []Resource, versions []string, err error)
}

// bulkPull pulls with p, with the objects' versions when p tells them ("" each
// otherwise).
func bulkPull(ctx context.Context, p Puller, rtype string, filter Filter) ([]Resource, []string, error) {
	if vp, ok := p.(VersionedPuller); ok {
		rs, versions, err := vp.BulkPullVersions(ctx, rtype, filter)
		if len(versions) != len(rs) {
			versions = make([]string, len(rs))
		}
		return rs, versions, err
	}
	rs, err := p.BulkPull(ctx, rtype, filter)
	return rs, make([]string, len(rs)), err
}

// CacheOptions configure a Cache.
type CacheOptions struct {
	// OnEvent receives every relevant change, in order, outside the cache lock. It may
	// read the cache but must not write to it (Update/Delete/Fill), and should be quick:
	// it runs on the goroutine that delivered the push. EventQueue is a ready sink.
	OnEvent func(Event)
	// Puller serves Fill and Ensure. May be set later with SetPuller.
	Puller Puller
	// DeletedTTL is how long a deleted id is remembered to reject late updates for it
	// (default 1h; the reference keeps them forever, which grows without bound).
	DeletedTTL time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

type deletedID struct {
	id string
	at time.Time
}

// Cache is the agent's copy of the server's Port, Network, Subnet, SecurityGroup,
// SecurityGroupRule and AddressGroup objects, fed by push and bulk_pull: the reference
// RemoteResourceCache. Updates with a lower revision_number than the cached one are
// ignored, as is anything for an id already deleted. Safe for concurrent use.
type Cache struct {
	deliverMu sync.Mutex // serialises mutation+delivery so events keep push order

	mu     sync.RWMutex
	byType map[string]map[string]Resource
	// pushedAt is the OVO version of the push or pull a cached object came from (absent:
	// an update of unknown version); see ApplyPushAt
	pushedAt  map[string]map[string]string
	deleted   map[string]map[string]time.Time
	deletedQ  map[string][]deletedID
	satisfied map[string]struct{}
	puller    Puller

	onEvent func(Event)
	ttl     time.Duration
	now     func() time.Time
}

// NewCache returns an empty cache.
func NewCache(o CacheOptions) *Cache {
	c := &Cache{
		byType:    map[string]map[string]Resource{},
		pushedAt:  map[string]map[string]string{},
		deleted:   map[string]map[string]time.Time{},
		deletedQ:  map[string][]deletedID{},
		satisfied: map[string]struct{}{},
		puller:    o.Puller,
		onEvent:   o.OnEvent,
		ttl:       o.DeletedTTL,
		now:       o.Now,
	}
	if c.ttl <= 0 {
		c.ttl = time.Hour
	}
	if c.now == nil {
		c.now = time.Now
	}
	for _, t := range CachedTypes {
		c.byType[t] = map[string]Resource{}
		c.deleted[t] = map[string]time.Time{}
	}
	return c
}

// SetPuller sets the bulk_pull client used by Fill and Ensure.
func (c *Cache) SetPuller(p Puller) {
	c.mu.Lock()
	c.puller = p
	c.mu.Unlock()
}

func (c *Cache) deliver(evs []Event) {
	if c.onEvent == nil {
		return
	}
	for _, e := range evs {
		c.onEvent(e)
	}
}

// ApplyPush records a decoded push message.
func (c *Cache) ApplyPush(p *Push) { c.ApplyPushAt(p, "") }

// ApplyPushAt applies a push that came on the topic of OVO version (dotted, "" unknown).
// An object of the same revision as the cached one but pushed at an older version than
// the cached copy was pushed at is ignored: the server pushes each change once per
// version it has consumers for, in no set order, and the older copy lacks the newer
// version's fields (seen: a Port 1.7 push after the 1.11 one of the same revision
// cleared a port's hints). Objects that Fill and Resync pull record the version they
// were pulled at the same way (VersionedPuller).
func (c *Cache) ApplyPushAt(p *Push, version string) {
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	var evs []Event
	c.mu.Lock()
	for _, r := range p.Resources {
		if p.EventType == EventDeleted {
			evs = c.deleteLocked(r.ResourceType(), r.ResourceID(), evs)
		} else {
			evs = c.updateAtLocked(r, version, false, evs)
		}
	}
	c.mu.Unlock()
	c.deliver(evs)
}

// Update records a created or changed resource.
func (c *Cache) Update(r Resource, agentRestarted bool) {
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	c.mu.Lock()
	evs := c.updateLocked(r, agentRestarted, nil)
	c.mu.Unlock()
	c.deliver(evs)
}

// Delete records a deletion; later updates for the id are ignored.
func (c *Cache) Delete(rtype, id string) {
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	c.mu.Lock()
	evs := c.deleteLocked(rtype, id, nil)
	c.mu.Unlock()
	c.deliver(evs)
}

func (c *Cache) isDeleted(rtype, id string) bool {
	at, ok := c.deleted[rtype][id]
	return ok && c.now().Sub(at) < c.ttl
}

// updateAtLocked is updateLocked for a push or a pull at version (see ApplyPushAt).
func (c *Cache) updateAtLocked(r Resource, version string, agentRestarted bool, evs []Event) []Event {
	rtype, id := r.ResourceType(), r.ResourceID()
	if old := c.byType[rtype][id]; old != nil && version != "" && old.Revision() == r.Revision() &&
		olderVersion(version, c.pushedAt[rtype][id]) {
		return evs
	}
	evs = c.updateLocked(r, agentRestarted, evs)
	if version != "" && c.byType[rtype][id] == r {
		if c.pushedAt[rtype] == nil {
			c.pushedAt[rtype] = map[string]string{}
		}
		c.pushedAt[rtype][id] = version
	}
	return evs
}

// olderVersion reports whether dotted OVO version a is older than b; an unknown ("") or
// unparsable b is older than nothing.
func olderVersion(a, b string) bool {
	am, an, ok1 := splitVersion(a)
	bm, bn, ok2 := splitVersion(b)
	if !ok1 || !ok2 {
		return false
	}
	return am < bm || am == bm && an < bn
}

func splitVersion(v string) (major, minor int, ok bool) {
	x, y, found := strings.Cut(v, ".")
	if !found {
		return 0, 0, false
	}
	a, err1 := strconv.Atoi(x)
	b, err2 := strconv.Atoi(y)
	return a, b, err1 == nil && err2 == nil
}

func (c *Cache) updateLocked(r Resource, agentRestarted bool, evs []Event) []Event {
	rtype, id := r.ResourceType(), r.ResourceID()
	m, ok := c.byType[rtype]
	if !ok || id == "" || c.isDeleted(rtype, id) {
		return evs
	}
	old := m[id]
	if old != nil && old.Revision() > r.Revision() {
		return evs // stale: tolerate equal revisions, as the reference does
	}
	m[id] = r
	delete(c.pushedAt[rtype], id) // a push or pull records its version after this (updateAtLocked)
	changed := changedFields(old, r)
	if len(changed) > 0 {
		evs = append(evs, Event{Type: rtype, Kind: Updated, ID: id, Old: old, New: r, Changed: changed, AgentRestarted: agentRestarted})
	}
	// The server does not push the rules of a new group separately: record the
	// embedded rules so rule lookups and rule events see them.
	if sg, ok := r.(*SecurityGroup); ok {
		for i := range sg.Rules {
			rule := sg.Rules[i]
			evs = c.updateLocked(&rule, agentRestarted, evs)
		}
	}
	return evs
}

func (c *Cache) deleteLocked(rtype, id string, evs []Event) []Event {
	m, ok := c.byType[rtype]
	if !ok || id == "" || c.isDeleted(rtype, id) {
		return evs
	}
	now := c.now()
	c.deleted[rtype][id] = now
	c.deletedQ[rtype] = append(c.deletedQ[rtype], deletedID{id, now})
	c.pruneDeletedLocked(rtype, now)
	old := m[id]
	delete(m, id)
	delete(c.pushedAt[rtype], id)
	for _, k := range c.queryKeys(rtype, Filter{"id": {id}}) {
		delete(c.satisfied, k)
	}
	evs = append(evs, Event{Type: rtype, Kind: Deleted, ID: id, Old: old})
	// A group deleted as a whole takes its rules, and rules pointing at it, with it.
	if rtype == TypeSecurityGroup && old != nil {
		var ids []string
		for rid, r := range c.byType[TypeSecurityGroupRule] {
			rule := r.(*SecurityGroupRule)
			if rule.SecurityGroupID == id || rule.RemoteGroupID == id {
				ids = append(ids, rid)
			}
		}
		sort.Strings(ids)
		for _, rid := range ids {
			evs = c.deleteLocked(TypeSecurityGroupRule, rid, evs)
		}
	}
	return evs
}

func (c *Cache) pruneDeletedLocked(rtype string, now time.Time) {
	q := c.deletedQ[rtype]
	n := 0
	for n < len(q) && now.Sub(q[n].at) >= c.ttl {
		if at, ok := c.deleted[rtype][q[n].id]; ok && at.Equal(q[n].at) {
			delete(c.deleted[rtype], q[n].id)
		}
		n++
	}
	if n > 0 {
		c.deletedQ[rtype] = append(q[:0:0], q[n:]...)
	}
}

// changedFields compares two values of the same OVO type field by field (by JSON name),
// ignoring revision_number and updated_at like the reference cache.
func changedFields(old, cur Resource) []string {
	nv := reflect.ValueOf(cur).Elem()
	t := nv.Type()
	var ov reflect.Value
	if old != nil && reflect.TypeOf(old) == reflect.TypeOf(cur) {
		ov = reflect.ValueOf(old).Elem()
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || name == "revision_number" || name == "updated_at" {
			continue
		}
		if ov.IsValid() {
			if reflect.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()) {
				continue
			}
		} else if nv.Field(i).IsZero() {
			continue
		}
		out = append(out, name)
	}
	return out
}

// queryKeys splits a filter into single-value query keys, so that asking for {id:[a,b]}
// then {id:[a]} does not ask the server twice.
func (c *Cache) queryKeys(rtype string, f Filter) []string {
	fields := make([]string, 0, len(f))
	for k := range f {
		fields = append(fields, k)
	}
	sort.Strings(fields)
	keys := []string{rtype}
	for _, k := range fields {
		var next []string
		for _, prefix := range keys {
			for _, v := range f[k] {
				next = append(next, prefix+"\x00"+k+"="+v)
			}
		}
		keys = next
	}
	return keys
}

// Unsatisfy forgets which queries the server answered, keeping the resources:
// Ensure asks again. Answered queries are kept current by the server's pushes;
// after a broker reconnection some may have been missed (a fanout queue on a
// dead cluster node, a push sent while no queue was bound), so a rule changed
// then would never reach the firewall.
func (c *Cache) Unsatisfy() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.satisfied = map[string]struct{}{}
}

// Forget drops a resource without recording a delete (the reference's
// record_resource_remove): it may be fetched again.
func (c *Cache) Forget(rtype, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(rtype, id)
}

func (c *Cache) forgetLocked(rtype, id string) {
	delete(c.byType[rtype], id)
	delete(c.pushedAt[rtype], id)
	for _, k := range c.queryKeys(rtype, Filter{"id": {id}}) {
		delete(c.satisfied, k)
	}
}

// Get returns the cached resource or nil.
func (c *Cache) Get(rtype, id string) Resource {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.byType[rtype][id]
}

// Port returns the cached port or nil.
func (c *Cache) Port(id string) *Port { p, _ := c.Get(TypePort, id).(*Port); return p }

// Network returns the cached network or nil.
func (c *Cache) Network(id string) *Network {
	n, _ := c.Get(TypeNetwork, id).(*Network)
	return n
}

// Subnet returns the cached subnet or nil.
func (c *Cache) Subnet(id string) *Subnet { s, _ := c.Get(TypeSubnet, id).(*Subnet); return s }

// SecurityGroup returns the cached security group or nil.
func (c *Cache) SecurityGroup(id string) *SecurityGroup {
	g, _ := c.Get(TypeSecurityGroup, id).(*SecurityGroup)
	return g
}

// SecurityGroupRule returns the cached rule or nil.
func (c *Cache) SecurityGroupRule(id string) *SecurityGroupRule {
	r, _ := c.Get(TypeSecurityGroupRule, id).(*SecurityGroupRule)
	return r
}

// AddressGroup returns the cached address group or nil.
func (c *Cache) AddressGroup(id string) *AddressGroup {
	g, _ := c.Get(TypeAddressGroup, id).(*AddressGroup)
	return g
}

// IsDeleted reports whether id was deleted (within the remembered window).
func (c *Cache) IsDeleted(rtype, id string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.isDeleted(rtype, id)
}

// Ports returns the cached ports match accepts (all with nil), in id order.
func (c *Cache) Ports(match func(*Port) bool) []*Port {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*Port, 0)
	for _, r := range c.byType[TypePort] {
		p := r.(*Port)
		if match == nil || match(p) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// RulesOf returns the cached rules of security group sgID, in id order.
func (c *Cache) RulesOf(sgID string) []*SecurityGroupRule {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []*SecurityGroupRule
	for _, r := range c.byType[TypeSecurityGroupRule] {
		rule := r.(*SecurityGroupRule)
		if rule.SecurityGroupID == sgID {
			out = append(out, rule)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// IDs returns the ids of the cached resources of rtype, sorted.
func (c *Cache) IDs(rtype string) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]string, 0, len(c.byType[rtype]))
	for id := range c.byType[rtype] {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Len returns how many resources of rtype are cached.
func (c *Cache) Len(rtype string) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.byType[rtype])
}

// EventQueue is an unbounded, ordered event sink for CacheOptions.OnEvent that the agent
// loop drains: Push never blocks the RPC consumer, C signals pending events.
type EventQueue struct {
	mu  sync.Mutex
	evs []Event
	c   chan struct{}
}

// NewEventQueue returns an empty queue.
func NewEventQueue() *EventQueue { return &EventQueue{c: make(chan struct{}, 1)} }

// Push appends an event (use as CacheOptions.OnEvent).
func (q *EventQueue) Push(e Event) {
	q.mu.Lock()
	q.evs = append(q.evs, e)
	q.mu.Unlock()
	select {
	case q.c <- struct{}{}:
	default:
	}
}

// C is signalled (coalesced) when events are pending.
func (q *EventQueue) C() <-chan struct{} { return q.c }

// Drain returns and removes all pending events.
func (q *EventQueue) Drain() []Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	evs := q.evs
	q.evs = nil
	return evs
}
