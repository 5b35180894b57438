package neutron

// The cache's pulls from the server: Fill and Ensure (a query answered once,
// then kept current by pushes), and Resync (every cached object read again
// after pushes may have been lost). cache.go holds the state they update.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Fill asks the server for every resource of rtype matching filter (bulk_pull) and
// records them; agentRestarted is carried into the resulting events.
func (c *Cache) Fill(ctx context.Context, rtype string, filter Filter, agentRestarted bool) error {
	c.mu.RLock()
	p := c.puller
	_, known := c.byType[rtype]
	c.mu.RUnlock()
	if !known {
		return fmt.Errorf("cache: resource type %q not cached", rtype)
	}
	if p == nil {
		return fmt.Errorf("cache: no puller for %s", rtype)
	}
	if ids, ok := filter["id"]; ok && len(filter) == 1 {
		return inChunks(ids, func(chunk []string) error {
			return c.fillOnce(ctx, p, rtype, Filter{"id": chunk}, agentRestarted)
		})
	}
	return c.fillOnce(ctx, p, rtype, filter, agentRestarted)
}

// PullParallel bounds the bulk_pulls of one Fill or Resync in flight at once.
const PullParallel = 3

// inChunks calls pull for ids in equal chunks of at most ResyncChunk: a bulk_pull of
// thousands of ports would exceed the message size limit (a bound port is ~4 KB on the
// wire). The chunks go out together, up to PullParallel at a time: the server's RPC
// worker interleaves them (its database work overlaps its Python work). Every chunk is
// pulled; the errors are joined.
func inChunks(ids []string, pull func(chunk []string) error) error {
	if len(ids) <= ResyncChunk {
		return pull(ids)
	}
	n := (len(ids) + ResyncChunk - 1) / ResyncChunk
	size := (len(ids) + n - 1) / n
	errs := make([]error, n)
	sem := make(chan struct{}, PullParallel)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		chunk := ids[i*size : min((i+1)*size, len(ids))]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = pull(chunk)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func describe(f Filter) string {
	if len(f) == 1 {
		for k, v := range f {
			if len(v) > 3 {
				return fmt.Sprintf("%s: %d values", k, len(v))
			}
		}
	}
	return fmt.Sprint(map[string][]string(f))
}

// fillOnce is one bulk_pull of Fill. A reply with objects that could not be decoded
// (a *BadObjectsError) still records the others; the error is returned, and the queries
// those objects answer stay unanswered, so that Ensure asks for them again.
func (c *Cache) fillOnce(ctx context.Context, p Puller, rtype string, filter Filter, agentRestarted bool) error {
	rs, versions, err := bulkPull(ctx, p, rtype, filter)
	bad, failed := SplitPullError(err)
	if failed {
		return fmt.Errorf("cache: fill %s (%s): %w", rtype, describe(filter), err)
	}
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	var evs []Event
	c.mu.Lock()
	for i, r := range rs {
		if r.ResourceType() != rtype {
			continue
		}
		evs = c.updateAtLocked(r, versions[i], agentRestarted, evs)
	}
	if ans, ok := answered(filter, rs, bad); ok {
		for _, k := range c.queryKeys(rtype, ans) {
			c.satisfied[k] = struct{}{}
		}
	}
	c.mu.Unlock()
	c.deliver(evs)
	if err != nil {
		return fmt.Errorf("cache: fill %s (%s): %w", rtype, describe(filter), err)
	}
	return nil
}

// answered is the part of filter a reply answered, given the objects of it that could
// not be decoded: all of it without any; of an id filter, the ids but the bad ones (only
// those returned when a bad object's id could not be read); of another filter, nothing
// (ok false).
func answered(filter Filter, rs []Resource, bad []BadObject) (ans Filter, ok bool) {
	if len(bad) == 0 {
		return filter, true
	}
	ids, byID := filter["id"]
	if !byID || len(filter) != 1 {
		return nil, false
	}
	skip := map[string]bool{}
	for _, b := range bad {
		if b.ID == "" {
			ids = nil
			for _, r := range rs {
				ids = append(ids, r.ResourceID())
			}
			break
		}
		skip[b.ID] = true
	}
	var out []string
	for _, id := range ids {
		if !skip[id] {
			out = append(out, id)
		}
	}
	return Filter{"id": out}, true
}

// Ensure is Fill restricted to the part of filter the server was not asked before (pushes
// keep answered queries current). With filter {"id": ids} it pulls only ids neither
// cached, deleted nor already asked for, in one bulk_pull.
func (c *Cache) Ensure(ctx context.Context, rtype string, filter Filter, agentRestarted bool) error {
	c.mu.RLock()
	var missing Filter
	if ids, ok := filter["id"]; ok && len(filter) == 1 {
		var need []string
		for _, id := range ids {
			if _, cached := c.byType[rtype][id]; cached || c.isDeleted(rtype, id) {
				continue
			}
			if _, asked := c.satisfied[c.queryKeys(rtype, Filter{"id": {id}})[0]]; asked {
				continue
			}
			need = append(need, id)
		}
		if len(need) > 0 {
			missing = Filter{"id": need}
		}
	} else {
		for _, k := range c.queryKeys(rtype, filter) {
			if _, asked := c.satisfied[k]; !asked {
				missing = filter
				break
			}
		}
	}
	c.mu.RUnlock()
	if missing == nil {
		return nil
	}
	return c.Fill(ctx, rtype, missing, agentRestarted)
}

// ResyncChunk bounds the ids per bulk_pull of Fill and Resync.
const ResyncChunk = 500

// Resync re-reads every cached resource from the server, as after a broker outage in
// which pushes may have been lost: changed ones produce update events, ones the server no
// longer has produce delete events, and earlier answered queries are forgotten so Ensure
// asks again. The ids are pulled in chunks (inChunks); a chunk whose pull failed (an
// outage: SplitPullError) changes nothing, and a chunk whose reply had objects that could
// not be decoded (a *BadObjectsError) is applied without them, as fillOnce does, so that
// one object costs itself alone, not its chunk's. Those objects are dropped from the
// cache without a delete (applyResync says why). Types and chunks fail independently; the
// errors are joined (SplitPullError sorts them: the undecodable objects by id, and
// whether any pull failed).
func (c *Cache) Resync(ctx context.Context, agentRestarted bool) error {
	return c.ResyncTypes(ctx, CachedTypes, agentRestarted)
}

// ResyncTypes is Resync for the cached resources of types only, one after the other in
// that order; only those types' answered queries are forgotten. A caller may stop at a
// type whose pull failed (an outage: the next types would wait out their timeouts too)
// by calling it one type at a time.
func (c *Cache) ResyncTypes(ctx context.Context, types []string, agentRestarted bool) error {
	types = slices.Clone(types)
	c.mu.Lock()
	for k := range c.satisfied {
		for _, t := range types {
			if k == t || strings.HasPrefix(k, t+"\x00") {
				delete(c.satisfied, k)
				break
			}
		}
	}
	ids := map[string][]string{}
	before := map[string]map[string]Resource{}
	for _, t := range types {
		before[t] = make(map[string]Resource, len(c.byType[t]))
		for id, r := range c.byType[t] {
			ids[t] = append(ids[t], id)
			before[t][id] = r
		}
		sort.Strings(ids[t])
	}
	c.mu.Unlock()
	return c.resync(ctx, types, ids, before, agentRestarted)
}

// ResyncIDs is Resync for the given ids of rtype only (those not cached are skipped),
// e.g. the ones a query just pulled again did not return; no answered query is
// forgotten.
func (c *Cache) ResyncIDs(ctx context.Context, rtype string, ids []string, agentRestarted bool) error {
	c.mu.Lock()
	before := map[string]Resource{}
	var sel []string
	for _, id := range ids {
		if r, ok := c.byType[rtype][id]; ok && before[id] == nil {
			before[id] = r
			sel = append(sel, id)
		}
	}
	c.mu.Unlock()
	sort.Strings(sel)
	return c.resync(ctx, []string{rtype}, map[string][]string{rtype: sel}, map[string]map[string]Resource{rtype: before}, agentRestarted)
}

// resync pulls ids[t] for each of types and applies each chunk's reply (applyResync),
// before[t] being the copies cached when it started.
func (c *Cache) resync(ctx context.Context, types []string, ids map[string][]string, before map[string]map[string]Resource, agentRestarted bool) error {
	c.mu.RLock()
	p := c.puller
	c.mu.RUnlock()
	if p == nil {
		return fmt.Errorf("cache: resync: no puller")
	}
	var errs []error
	for _, t := range types {
		if len(ids[t]) == 0 {
			continue
		}
		err := inChunks(ids[t], func(chunk []string) error {
			rs, versions, err := bulkPull(ctx, p, t, Filter{"id": chunk})
			bad, failed := SplitPullError(err)
			if failed {
				return err
			}
			c.applyResync(t, chunk, rs, versions, bad, before[t], agentRestarted)
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("cache: resync %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}

// applyResync applies the reply to one chunk of Resync: rs (the objects decoded) and bad
// (the objects returned that could not be decoded), for the ids asked, cached as before
// (by id) when Resync started.
//
// An asked id neither returned nor bad is gone from the server: deleted. A bad one still
// exists there, so it is not deleted (that would also reject its later updates), but its
// cached copy is forgotten (Forget): as everywhere in the package, a refreshed object that
// does not decode is not used from its older copy — the server's current one is the one
// the agent cannot read, and the old copy would be wired as if current (the agent's
// Devices forgets a port whose refresh did not decode for the same reason). Ensure pulls
// it again, and it stays failed until it decodes. Forgetting sends no event: the error
// Resync returns names the object. A copy that a push replaced after Resync started is
// newer than the pull and kept. A bad object whose id could not be read may be any asked id not
// returned: none of those is deleted or forgotten, as the reply does not say which.
// The queries of the bad ids (of all ids not returned, for a bad one without id) stay
// unanswered, as in fillOnce, so that Ensure asks again.
func (c *Cache) applyResync(rtype string, asked []string, rs []Resource, versions []string, bad []BadObject, before map[string]Resource, agentRestarted bool) {
	c.deliverMu.Lock()
	defer c.deliverMu.Unlock()
	var evs []Event
	c.mu.Lock()
	got := make(map[string]bool, len(rs))
	for i, r := range rs {
		if r.ResourceType() != rtype {
			continue
		}
		got[r.ResourceID()] = true
		evs = c.updateAtLocked(r, versions[i], agentRestarted, evs)
	}
	undecodable := map[string]bool{}
	anyID := false // a bad object without id: any id not returned may be it
	for _, b := range bad {
		if b.ID == "" {
			anyID = true
			continue
		}
		undecodable[b.ID] = true
	}
	for _, id := range asked {
		if got[id] {
			continue
		}
		cur, still := c.byType[rtype][id]
		switch {
		case !still:
		case undecodable[id]:
			if cur == before[id] {
				c.forgetLocked(rtype, id)
			}
		case !anyID:
			evs = c.deleteLocked(rtype, id, evs)
		}
	}
	if ans, ok := answered(Filter{"id": asked}, rs, bad); ok {
		for _, k := range c.queryKeys(rtype, ans) {
			c.satisfied[k] = struct{}{}
		}
	}
	c.mu.Unlock()
	c.deliver(evs)
}
