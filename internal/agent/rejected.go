package agent

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/openflow"
)

// rejection is an owner whose latest flows the switch rejected (one flow it
// cannot take: the rest of the bundle went in). The owner keeps what the
// bridge held for it and stays dirty; its flows are sent again after a
// back-off, or at once when they change (a corrected rule).
type rejection struct {
	retry                     // not sent again, unchanged, before at
	sums  map[string][16]byte // bridge → digest of the flows it rejected
}

// heldBack: the owner's flows for br are the ones the switch rejected last
// and their back-off has not run out. A removal is never held back.
func (a *Agent) heldBack(br, owner string, d ownerDigest, want []openflow.Flow, now time.Time) bool {
	r := a.rejected[owner]
	if r == nil || len(want) == 0 {
		return false
	}
	sum, ok := r.sums[br]
	return ok && sum == d.sum && r.at.After(now)
}

// ownersRejected records the owners the switch rejected on br (their
// digests in sums), counts and logs each, and sets its back-off.
func (a *Agent) ownersRejected(br string, rej *openflow.OwnersRejectedError, sums map[string]ownerDigest) {
	now := a.now()
	for _, owner := range slices.Sorted(maps.Keys(rej.Owners)) {
		r := a.rejected[owner]
		if r == nil {
			r = &rejection{sums: map[string][16]byte{}}
			a.rejected[owner] = r
			a.holdChanged(owner)
		}
		r.sums[br] = sums[owner].sum
		wait := r.fail(now, a.backoff)
		a.d.Metrics.IncOwnerRejected(br, ownerKind(owner))
		a.log.Error("agent: the switch rejected an owner's flows; the rest of the bundle is applied, the owner keeps its previous flows and is retried",
			"bridge", br, "owner", owner, "failures", r.failures, "retry_in", wait, "err", rej.Owners[owner])
	}
}

// ownerAccepted forgets a rejection of owner on br once the switch took
// its flows there (or they no longer differ from what it holds).
func (a *Agent) ownerAccepted(br, owner string) {
	r := a.rejected[owner]
	if r == nil {
		return
	}
	if _, ok := r.sums[br]; !ok {
		return
	}
	delete(r.sums, br)
	if len(r.sums) == 0 {
		delete(a.rejected, owner)
		a.holdChanged(owner)
		a.log.Info("agent: the switch accepted an owner's flows it had rejected", "bridge", br, "owner", owner, "failures", r.failures)
	}
}

// setRejectedGauge exports how many owners each bridge holds back now.
func (a *Agent) setRejectedGauge() {
	for _, br := range a.layout.Bridges() {
		n := 0
		for _, r := range a.rejected {
			if _, ok := r.sums[br]; ok {
				n++
			}
		}
		a.d.Metrics.SetOwnersRejected(br, n)
	}
}

// ownerKind is an owner key without its id ("fw:port", "net", "base"):
// a metric label of few values (ids may hold colons: "tun:fd00::1").
func ownerKind(owner string) string {
	kind, rest, _ := strings.Cut(owner, ":")
	if kind == "fw" {
		sub, _, _ := strings.Cut(rest, ":")
		return kind + ":" + sub
	}
	return kind
}

// holdChanged notes the port of owner (if it is a port's) for retagPorts.
func (a *Agent) holdChanged(owner string) {
	if id, ok := a.portOfOwner(owner); ok {
		a.retag[id] = true
	}
}

// portOfOwner is the port whose own flows owner holds, as the source of
// its kind says (feature.PortFlows: the pipeline's port wiring, the
// firewall's port flows).
func (a *Agent) portOfOwner(owner string) (string, bool) {
	if src, ok := a.features.SourceOf(owner); ok {
		if pf, ok := src.(feature.PortFlows); ok {
			return pf.OwnerPort(owner)
		}
	}
	return "", false
}

// flowsRejected: the switch rejects the latest flows of one of the port's
// owners. Such a port is not reported up: what the server would make
// ACTIVE is not what the bridge enforces.
func (a *Agent) flowsRejected(id string) bool {
	if len(a.rejected) == 0 {
		return false
	}
	for _, f := range a.features.All() {
		if pf, ok := f.(feature.PortFlows); ok && a.rejected[pf.PortOwner(id)] != nil {
			return true
		}
	}
	return false
}

// heldDead: the port's flows are rejected and the bridge holds none of the
// owner's earlier ones. Such a port is kept on the dead VLAN: without its
// firewall flows, traffic from another port on its local VLAN would reach
// it by NORMAL switching, unfiltered. A port on its earlier flows keeps
// them (and its VLAN).
func (a *Agent) heldDead(id string) bool {
	if len(a.rejected) == 0 {
		return false
	}
	applied := a.applied[a.layout.Integration]
	for _, f := range a.features.All() {
		pf, ok := f.(feature.PortFlows)
		if !ok {
			continue
		}
		owner := pf.PortOwner(id)
		if r := a.rejected[owner]; r != nil {
			if _, had := applied[owner]; !had {
				return true
			}
		}
	}
	return false
}

// isRejection: err says the switch rejected some owners and applied the rest.
func isRejection(err error) (*openflow.OwnersRejectedError, bool) {
	var rej *openflow.OwnersRejectedError
	ok := errors.As(err, &rej)
	return rej, ok
}

// dirtyWake is when a dirty owner can next be applied: now, unless every
// one of them is a rejected owner waiting for its back-off.
func (a *Agent) dirtyWake() time.Time {
	now := a.now()
	var next time.Time
	for o := range a.dirtyOwner {
		r := a.rejected[o]
		if r == nil || !r.at.After(now) {
			return now
		}
		if next.IsZero() || r.at.Before(next) {
			next = r.at
		}
	}
	return next
}

// retagPorts rewires the ports whose owners' rejection began or ended in
// this batch: onto the dead VLAN while heldDead, back onto their own once
// their flows are in (then reported up in the same batch).
func (a *Agent) retagPorts(ctx context.Context) {
	if len(a.retag) == 0 {
		return
	}
	for id := range a.retag {
		if p := a.ports[id]; p != nil && p.present && p.wired == wiredUp {
			p.dirty = true
		}
	}
	clear(a.retag)
	a.writePorts(ctx, a.decidePorts())
}
