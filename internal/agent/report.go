package agent

import (
	"context"
	"maps"
	"slices"
	"time"
)

// reportDevices sends one update_device_list for every port whose state
// the server must learn (plus a devices_down first for re-plugged ports).
// The call runs on its own goroutine so that wiring goes on while the
// server works; its result comes back to the loop (onReportResult). A port
// is in at most one call at a time, which keeps its ups and downs in order.
func (a *Agent) reportDevices(ctx context.Context) {
	if a.inflight >= a.reportLimit {
		return // a result will bring the loop back
	}
	r := newReportResult()
	now := a.now()
	for _, id := range slices.Sorted(maps.Keys(a.ports)) {
		p := a.ports[id]
		if p.inflight || p.retry.at.After(now) {
			continue
		}
		switch p.want {
		case reportUp:
			if p.wired == wiredUp && p.tagOK && !a.flowsRejected(id) {
				r.up = append(r.up, id)
				r.upNets[p.dev.NetworkID] = true
				if p.reAdded {
					r.readded = append(r.readded, id)
				}
			}
		case reportDown:
			r.down = append(r.down, id)
		}
	}
	a.addRefresh(r, false)
	a.sendReport(ctx, r)
}

// refreshEarly asks l2pop for the FDB of tunnelled networks that wait for
// it, before the batch's flows are applied, carried by a port the server
// already has ACTIVE and that was already wired (adopted at a restart or a
// takeover): reporting such a port up again changes nothing on the server,
// and the call's round trip (the server's slowest step) then overlaps the OVSDB
// writes and the bundle instead of following them, which is what the
// first sync waits for. Ports the server does not have ACTIVE are reported
// only after their flows are in (reportDevices).
func (a *Agent) refreshEarly(ctx context.Context) {
	if a.inflight >= a.reportLimit || len(a.refreshNetworks()) == 0 {
		return
	}
	r := newReportResult()
	a.addRefresh(r, true)
	a.sendReport(ctx, r)
}

func newReportResult() *reportResult {
	return &reportResult{gens: map[string]uint64{}, upNets: map[string]bool{}, refreshNets: map[string]bool{}}
}

// addRefresh asks for the FDB of every network waiting for it: l2pop sends
// a network's full FDB when a port of it goes up with refresh_tunnels; one
// already-ACTIVE port per network is enough (no status change on the
// server, no storm). A network whose refresh is out already is not asked
// again. With activeOnly, the carrier must be a port the server already has
// ACTIVE and that needs no report of its own.
func (a *Agent) addRefresh(r *reportResult, activeOnly bool) {
	for _, id := range a.refreshNetworks() {
		if a.refreshOut[id] {
			continue
		}
		if !r.upNets[id] {
			for _, pid := range slices.Sorted(maps.Keys(a.ports)) {
				p := a.ports[pid]
				if activeOnly && !(p.upOnSrv && p.want == reportNone) {
					continue
				}
				if !p.inflight && p.wired == wiredUp && p.tagOK && p.dev != nil && p.dev.NetworkID == id && !a.flowsRejected(pid) {
					r.up = append(r.up, pid)
					r.upNets[id] = true
					break
				}
			}
		}
		if r.upNets[id] {
			r.refreshNets[id] = true
			r.refresh = true
		}
	}
}

// sendReport sends r (nothing when it is empty) on its own goroutine.
func (a *Agent) sendReport(ctx context.Context, r *reportResult) {
	if len(r.up) == 0 && len(r.down) == 0 {
		return
	}
	r.sent = a.now()
	for _, id := range append(r.up, r.down...) {
		p := a.ports[id]
		p.inflight = true
		r.gens[id] = p.gen
		if p.want == reportUp {
			a.observeSent(p, r.sent)
		}
	}
	for id := range r.refreshNets {
		a.refreshOut[id] = true
	}
	a.inflight++
	a.d.Metrics.IncUpdateDeviceList()
	a.log.Debug("agent: update_device_list", "up", r.up, "down", r.down, "refresh_tunnels", r.refresh, "in_flight", a.inflight)
	base := a.callBase
	if base == nil {
		base = ctx
	}
	callCtx, cancel := context.WithCancel(base)
	a.reportsOut[r] = cancel
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if len(r.readded) > 0 {
			start := time.Now()
			_, err := a.d.Plugin.UpdateDeviceList(callCtx, nil, r.readded, false)
			a.observeRPC("update_device_list", time.Since(start), err)
			if err != nil {
				r.err = err
				r.replied = a.now()
				a.deliver(ctx, r)
				return
			}
		}
		start := time.Now()
		r.res, r.err = a.d.Plugin.UpdateDeviceList(callCtx, r.up, r.down, r.refresh)
		a.observeRPC("update_device_list", time.Since(start), r.err)
		r.replied = a.now()
		a.deliver(ctx, r)
	}()
}

// deliver hands a result to the loop; the channel has room for every call
// in flight, and a stopping agent does not wait for it.
func (a *Agent) deliver(ctx context.Context, r *reportResult) {
	select {
	case a.results <- r:
	case <-ctx.Done():
	}
}

// reportResult is one update_device_list round trip.
type reportResult struct {
	up, down, readded []string
	gens              map[string]uint64 // port → want generation sent
	upNets            map[string]bool
	refreshNets       map[string]bool // networks whose FDB this call asks for
	refresh           bool
	res               DeviceListResult
	err               error
	sent, replied     time.Time
}

// onReportResult applies a reply on the loop. A port whose wish changed
// while the call was out keeps its new wish.
func (a *Agent) onReportResult(r *reportResult) {
	a.inflight--
	if cancel := a.reportsOut[r]; cancel != nil {
		cancel()
	}
	delete(a.reportsOut, r)
	abandoned := a.abandoned[r]
	delete(a.abandoned, r)
	for id := range r.refreshNets {
		delete(a.refreshOut, id)
	}
	for id := range r.gens {
		if p := a.ports[id]; p != nil {
			p.inflight = false
		}
	}
	if abandoned && r.err != nil {
		// Not a failure: the ports are reported again at once.
		a.log.Info("agent: update_device_list abandoned for the resync; reporting again", "ports", len(r.up)+len(r.down))
		return
	}
	a.adaptReportLimit(r)
	if r.err != nil {
		a.reportFailed(append(r.up, r.down...), r.err)
		return
	}
	for _, id := range r.readded {
		if p := a.ports[id]; p != nil {
			p.reAdded = false
		}
	}
	if len(r.refreshNets) > 0 {
		a.refreshReplied(slices.Sorted(maps.Keys(r.refreshNets)), r.sent, r.replied)
	}
	ok := map[string]bool{}
	for _, id := range r.res.Up {
		ok[id] = true
		p := a.ports[id]
		if p == nil || p.gen != r.gens[id] || p.want != reportUp {
			continue
		}
		p.upOnSrv = true
		p.want = reportNone
		p.retry.succeeded()
		a.observeReplied(p, r.replied)
	}
	for _, id := range r.res.Down {
		ok[id] = true
		p := a.ports[id]
		if p == nil || p.gen != r.gens[id] || p.want != reportDown {
			continue
		}
		p.want = reportNone
		p.retry.succeeded()
		if !p.present {
			delete(a.ports, id)
		}
	}
	var failed []string
	for _, id := range append(r.up, r.down...) {
		if p := a.ports[id]; p != nil && !ok[id] && p.want != reportNone && p.gen == r.gens[id] {
			failed = append(failed, id)
		}
	}
	if len(failed) > 0 {
		a.reportFailed(failed, nil)
	}
}

// adaptReportLimit narrows the calls allowed out to one after a failure
// (a timeout means the server is behind: a second call only queues there,
// and the failed one's retry repeats work it may still be doing) and widens
// it again by one per success.
func (a *Agent) adaptReportLimit(r *reportResult) {
	if r.err != nil {
		if a.reportLimit > 1 {
			a.log.Info("agent: update_device_list failed; one call at a time until one succeeds",
				"took", r.replied.Sub(r.sent).Round(time.Millisecond), "err", errString(r.err))
		}
		a.reportLimit = 1
		return
	}
	if a.reportLimit < a.opt.MaxInflightReports {
		a.reportLimit++
	}
}

// abandonReports cancels the update_device_list calls out now. After
// neutron-server came back ("revived"), a call sent to the old one is
// either lost or waiting out oslo's back-off (a doubled timeout, then up to
// a minute's sleep) while its ports stay in flight and out of the resync;
// cancelled, they are reported again with the resync's next batch.
func (a *Agent) abandonReports() {
	for r, cancel := range a.reportsOut {
		if !a.abandoned[r] {
			a.abandoned[r] = true
			cancel()
		}
	}
}

func (a *Agent) reportFailed(ids []string, err error) {
	now := a.now()
	for _, id := range ids {
		if p := a.ports[id]; p != nil {
			p.retry.fail(now, a.backoff)
		}
	}
	a.log.Warn("agent: update_device_list failed; retrying", "ports", len(ids), "err", errString(err))
}

// updateSync computes whether the agent is in sync and publishes it.
func (a *Agent) updateSync() {
	// A feature whose Sync failed has not put its state in place yet.
	// Cached server objects still to be re-read may be stale (lost pushes).
	in := a.swept && a.dataplaneComplete() && len(a.dirtyOwner) == 0 && len(a.featRetry) == 0 && a.cacheResync == ""
	wired := 0
	devices := 0
	for _, p := range a.ports {
		if p.present {
			devices++
		}
		if p.want != reportNone {
			in = false
		}
		if p.wired == wiredUp && p.upOnSrv && p.present {
			wired++
		}
	}
	a.devices.Store(int64(devices))
	a.d.Metrics.SetPortsWired(wired)
	if in != a.inSync {
		a.log.Info("agent: sync state", "in_sync", in)
	}
	a.inSync = in
	a.syncFlag.Store(in)
	a.d.Metrics.SetInSync(in)
}
