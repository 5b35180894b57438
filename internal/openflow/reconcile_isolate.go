package openflow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// OwnersRejectedError says the switch rejected the flows of some owners of
// an Apply. Every other change of that Apply took effect; each rejected
// owner keeps what the bridge held for it before (its previous flows, or
// none) and the reconciler still believes that of it, so a later Apply
// naming it tries again.
type OwnersRejectedError struct {
	Owners map[string]error // owner → the switch's error for its flows
}

func (e *OwnersRejectedError) Error() string {
	names := slices.Sorted(maps.Keys(e.Owners))
	if len(names) == 0 {
		return "openflow: no owner rejected"
	}
	return fmt.Sprintf("openflow: switch rejected the flows of %d owner(s) (first %s: %v); the others were applied",
		len(names), names[0], e.Owners[names[0]])
}

// isolate applies what the switch accepts of changes after p, the bundle
// of all of them, was rejected with be; called with r.mu held. One flow the
// switch refuses (an old security group rule it cannot match) must not
// hold every other port of the bridge back.
//
// The switch names the flow_mods it rejects: OVS checks each one as it is
// added to the bundle, so a bundle names every malformed flow_mod at once
// (a commit-time failure, one at a time). Their owners are left out and the
// rest is sent again: usually one more bundle. Only when an error names no
// flow_mod of a changed owner (a commit error without one) are the owners
// found by halves, a few bundles per rejected owner.
//
// Errors other than the switch's rejection (the connection failed) are
// returned as they are: what was committed before stays committed, and the
// caller's retry re-sends only what the bridge lacks.
func (r *Reconciler) isolate(ctx context.Context, changes map[string][]Flow, owners []string, sweep bool, p *plan, be *BundleError) error {
	rejected := map[string]error{}
	for {
		bad := culprits(p, be)
		if len(bad) == 0 {
			break
		}
		kept := owners[:0:0]
		for _, o := range owners {
			if e, ok := bad[o]; ok {
				rejected[o] = e
			} else {
				kept = append(kept, o)
			}
		}
		owners = kept
		p = r.plan(changes, owners, sweep)
		err := r.send(ctx, p)
		if err == nil {
			r.commit(p)
			return &OwnersRejectedError{Owners: rejected}
		}
		if !errors.As(err, &be) {
			return err
		}
	}
	if err := r.bisect(ctx, changes, owners, rejected); err != nil {
		return err
	}
	if sweep {
		p := r.plan(changes, nil, true)
		if err := r.send(ctx, p); err != nil {
			return err
		}
		r.commit(p)
	}
	if len(rejected) == 0 {
		return nil // every half went in: the first rejection did not recur
	}
	return &OwnersRejectedError{Owners: rejected}
}

// culprits names the owners of p's changes whose flow_mods be names, each
// with the switch's error for its first such flow_mod.
func culprits(p *plan, be *BundleError) map[string]error {
	bad := map[string]error{}
	for _, rm := range be.Rejected {
		if rm.Index < 0 || rm.Index >= len(p.mods) {
			continue
		}
		o := p.ownerOf(rm.Index)
		if _, changed := p.owners[o]; !changed {
			continue // a stray's deletion, an unchanged owner's re-send
		}
		if _, seen := bad[o]; !seen {
			m := &p.mods[rm.Index]
			bad[o] = &BundleError{Index: rm.Index, Cmd: m.Command, Flow: m.Flow.String(), Err: rm.Err, Rejected: []RejectedMod{rm}}
		}
	}
	return bad
}

// bisect applies owners' changes by halves, adding to rejected each owner
// whose change the switch rejects alone. With no owner left, a rejected
// bundle (the re-sends of unchanged owners) is no owner's fault: its error
// is returned.
func (r *Reconciler) bisect(ctx context.Context, changes map[string][]Flow, owners []string, rejected map[string]error) error {
	p := r.plan(changes, owners, false)
	err := r.send(ctx, p)
	if err == nil {
		r.commit(p)
		return nil
	}
	var be *BundleError
	if !errors.As(err, &be) || len(owners) == 0 {
		return err
	}
	if len(owners) == 1 {
		rejected[owners[0]] = err
		return nil
	}
	h := len(owners) / 2
	if err := r.bisect(ctx, changes, owners[:h], rejected); err != nil {
		return err
	}
	return r.bisect(ctx, changes, owners[h:], rejected)
}

// send sends p's bundle; nothing when it is empty (every owner left out).
func (r *Reconciler) send(ctx context.Context, p *plan) error {
	if len(p.mods) == 0 {
		return nil
	}
	return r.sw.Bundle(ctx, p.mods)
}
