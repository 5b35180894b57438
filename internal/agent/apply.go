package agent

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/pipeline"
)

// applyFlows recomputes the dirty owners and applies what changed, one
// bundle per bridge. The stale flows of earlier rounds go in the same
// bundle once the dataplane is complete. waited is the time the bundles
// took until the switch confirmed them (the dataplane stage).
func (a *Agent) applyFlows(ctx context.Context) (ok bool, waited time.Duration) {
	sweeps := map[string]bool{}
	if !a.swept {
		for _, br := range a.layout.Bridges() {
			if a.sweepReady(br) {
				sweeps[br] = true
			}
		}
	}
	if len(a.dirtyOwner) == 0 && len(sweeps) == 0 {
		return true, 0
	}
	if a.flowRetry.waiting(a.now()) {
		return false, 0
	}
	for _, owner := range slices.Sorted(maps.Keys(a.dirtyOwner)) {
		a.touch(owner) // and the owners that depend on its object
	}
	now := a.now()
	changes := map[string]map[string][]openflow.Flow{}
	digests := map[string]map[string]ownerDigest{} // what a.applied becomes once a bundle succeeds
	held := map[string]bool{}                      // owners whose rejected flows wait for their back-off
	// Every dirty owner goes to the feature owning its kind (seam.go).
	flows, errs := a.computeFlows(slices.Sorted(maps.Keys(a.dirtyOwner)))
	for owner := range a.dirtyOwner {
		if err := errs[owner]; err != nil {
			a.log.Error("agent: flow owner", "owner", owner, "err", err)
			delete(a.dirtyOwner, owner)
			continue
		}
		bf := flows[owner]
		for br := range a.applied {
			want := bf[br]
			d, same := unchanged(a.applied[br], owner, want)
			if same {
				a.ownerAccepted(br, owner) // back to what the bridge holds
				continue
			}
			if a.heldBack(br, owner, d, want, now) {
				held[owner] = true
				continue
			}
			if changes[br] == nil {
				changes[br] = map[string][]openflow.Flow{}
				digests[br] = map[string]ownerDigest{}
			}
			// Given as built: the reconciler keeps its own encoded copy,
			// so the builders' append slack is garbage after the batch.
			changes[br][owner] = want
			digests[br][owner] = d
		}
	}
	failed := false
	for _, br := range a.layout.Bridges() {
		set := changes[br]
		sweep := sweeps[br]
		if len(set) == 0 && !sweep {
			continue
		}
		start := a.now()
		ch := FlowChange{Set: set, Sweep: sweep}
		if sweep {
			ch.SweepTables = referenceTables(a.layout, br, a.opt.Pipeline.Distributed)
		}
		err := a.d.Flows.Apply(ctx, br, ch)
		took := a.now().Sub(start)
		waited += took
		rej, partial := isRejection(err)
		if err != nil && !partial {
			a.log.Warn("agent: flow bundle failed; retrying", "bridge", br, "owners", len(set), "err", err)
			failed = true
			continue
		}
		a.d.Metrics.ObserveBundle(br, took)
		if partial {
			// The others went in: only these wait (fail closed: each keeps
			// what the bridge held for it; see heldDead for their ports).
			a.ownersRejected(br, rej, digests[br])
			for owner := range rej.Owners {
				held[owner] = true
				delete(set, owner)
			}
		}
		if sweep {
			a.sweptBr[br] = true
		}
		for owner, fs := range set {
			if len(fs) == 0 {
				delete(a.applied[br], owner)
			} else {
				a.applied[br][owner] = digests[br][owner]
			}
			a.ownerAccepted(br, owner)
		}
		a.d.Metrics.SetFlows(br, tableCounts(a.applied[br]))
		a.flowsApplied(br, set)
	}
	a.setRejectedGauge()
	if failed {
		a.flowRetry.fail(a.now(), a.backoff)
		return false, waited
	}
	a.flowRetry.succeeded()
	if len(held) == 0 {
		clear(a.dirtyOwner)
	}
	for owner := range a.dirtyOwner {
		if !held[owner] {
			delete(a.dirtyOwner, owner) // held ones stay dirty: retried after their back-off
		}
	}
	if !a.swept && len(sweeps) > 0 {
		all := true
		for _, br := range a.layout.Bridges() {
			all = all && a.sweptBr[br]
		}
		if all {
			a.afterSweep()
		}
	}
	return true, waited
}

// dataplaneComplete: every port that can be wired is wired, tunnels are
// synced and the FDB of every tunnelled network has arrived (or waited
// for long enough): nothing installed by an earlier run is needed any more.
func (a *Agent) dataplaneComplete() bool {
	return a.wiringComplete() && a.featuresComplete()
}

// wiringComplete: everything but what the features still await (l2pop's
// FDB: feature.Completer) is known and computed.
func (a *Agent) wiringComplete() bool {
	if !a.wiringSettled() {
		return false
	}
	for _, p := range a.ports {
		if p.present && p.vif.Ready() && p.needDetails {
			return false
		}
	}
	return true
}

// wiringSettled is wiringComplete but for the ports whose details the
// server keeps refusing (givenUp): they are wired with what is known. The
// sweep waits for this, so one such port cannot keep the previous run's
// flows in place.
func (a *Agent) wiringSettled() bool {
	if !a.started || !a.bridgesOK || a.ovsRestarted || a.featuresWaiting() { // tunnel_sync among them
		return false
	}
	for _, p := range a.ports {
		if p.present && p.vif.Ready() && (p.needDetails && !p.givenUp() || p.dirty || !p.tagOK && p.wired != wiredNone) {
			return false
		}
	}
	return true
}

// sweepReady says whether the flows of an earlier round (or of the
// reference agent) on br may be deleted now. Only br-tun's flows toward
// other hosts depend on l2pop's FDB, and only where br-tun has tunnel
// ports: without any, no installed flow can reach a peer. So br-int and
// the physical bridges (and br-tun on a host without peers) are swept in
// the same bundle as our first flows: a takeover is one atomic bundle per
// bridge, ours in and every foreign flow out.
func (a *Agent) sweepReady(br string) bool {
	if a.sweptBr[br] || !a.wiringSettled() {
		return false
	}
	return !a.featuresHoldSweep(br) // br-tun with tunnel ports, until the FDB came
}

// referenceTables are br's tables the reference clears of every foreign
// cookie at its first iteration (INT_BR_ALL_TABLES, TUN_BR_ALL_TABLES,
// PHY_BR_ALL_TABLES): the start-up sweep deletes no more and no less, but
// for br-int's ARP_DVR_MAC_TO_DST_MAC tables (3, 4) with DVR
// (distributed): INT_BR_ALL_TABLES leaves them out, so the reference's
// stale table-3 flows after a router interface removal (docs/dvr.md,
// defect 1) would outlive a takeover with its cookie; with DVR on, those
// tables are ovs-agent's DVR feature's, which rebuilds what the server
// describes there.
func referenceTables(l BridgeLayout, br string, distributed bool) []uint8 {
	var ts []pipeline.Table
	switch {
	case br == l.Integration:
		ts = pipeline.IntTables
		if distributed {
			ts = append(slices.Clip(ts), pipeline.IntARPDVRMACToDstMAC, pipeline.IntARPDVRMACToDstMACPhys)
		}
	case br == l.Tunnel:
		ts = pipeline.TunTables
	default:
		ts = pipeline.PhysTables
	}
	out := make([]uint8, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func (a *Agent) afterSweep() {
	a.swept = true
	a.maps.DisposeHints()
	a.sweptFeatures() // the overlay: adopted tunnel ports nobody uses go now
	a.log.Info("agent: in sync with the dataplane; stale flows removed")
}
