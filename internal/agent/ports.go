package agent

import (
	"time"

	"github.com/ovsagent/ovsagent/internal/overlay"
	"github.com/ovsagent/ovsagent/internal/pipeline"
)

// wiring is what the agent last made of a port.
type wiring uint8

const (
	wiredNone      wiring = iota // not wired yet
	wiredUp                      // bound, on its local VLAN
	wiredAdminDown               // admin down: dead VLAN
	wiredDead                    // unbound, foreign, failed: dead VLAN
)

func (w wiring) String() string {
	switch w {
	case wiredUp:
		return "up"
	case wiredAdminDown:
		return "admin-down"
	case wiredDead:
		return "dead"
	}
	return "none"
}

// report is what the server must be told about a port.
type report uint8

const (
	reportNone report = iota
	reportUp
	reportDown
)

// portRec is everything the agent knows about one Neutron port on br-int.
type portRec struct {
	id      string
	vif     VIF
	present bool // on br-int now
	dev     *Device

	needDetails bool
	dirty       bool
	recheck     bool // details came from a full resync: re-check the server's status
	// clock times the port's wiring from its first event not yet answered
	// by a report (latency and stage metrics).
	clock stageClock
	// reAdded: unplugged and plugged again; reported down before up.
	reAdded bool

	net      pipeline.NetKey
	hasNet   bool
	wired    wiring
	tagOK    bool // the Port's tag and other_config are what the wiring needs
	adopted  bool // found wired from an earlier run (tag + net_uuid match)
	upOnSrv  bool // the server has it ACTIVE (our reply or, when adopted, the cache)
	want     report
	gen      uint64 // bumped when want changes; a reply applies only to the wish it answered
	inflight bool   // in an update_device_list call now
	retry    retry  // details and report back-off
	// refusals counts the details calls in a row whose answer for this
	// port was no use (refuseDetails); a call the answer did not come for
	// (ErrDetailsUnavailable) is none.
	refusals int
}

// detailsGiveUp is how many refusals in a row make a port stop holding
// back the sweep of the previous run's flows. The reference sweeps after
// its first loop, failed ports or not; a few tries more absorb a passing
// failure (with the default back-off, under a second).
const detailsGiveUp = 3

// givenUp: the server keeps refusing the port's details. They are still
// asked for (with back-off), but the port is wired with what is known
// (dead when nothing is: refuseDetails) and no longer keeps stale flows,
// allow rules among them, in place.
func (p *portRec) givenUp() bool { return p.needDetails && p.refusals >= detailsGiveUp }

func (p *portRec) setWant(r report) {
	if p.want != r {
		p.want = r
		p.gen++
	}
}

// pending reports whether the port still has work (it keeps the agent out of sync).
func (p *portRec) pending() bool {
	return p.needDetails || p.dirty || p.want != reportNone
}

func (a *Agent) port(id string) *portRec {
	p := a.ports[id]
	if p == nil {
		p = &portRec{id: id}
		a.ports[id] = p
	}
	return p
}

func (a *Agent) onPortEvent(ev PortEvent) {
	a.log.Debug("agent: port event", "kind", ev.Kind, "port", ev.VIF.PortID, "ofport", ev.VIF.OFPort, "snapshot", len(ev.Snapshot))
	seen := ev.Seen
	if seen.IsZero() {
		seen = a.now()
	}
	switch ev.Kind {
	case PortUpserted:
		a.upsertVIF(ev.VIF, seen)
	case PortRemoved:
		if p := a.ports[ev.VIF.PortID]; p != nil && p.present {
			p.present = false
			p.dirty = true
			p.retry.at = time.Time{}
		}
	case PortSnapshot:
		inSnap := map[string]bool{}
		for _, v := range ev.Snapshot {
			inSnap[v.PortID] = true
			a.upsertVIF(v, seen)
		}
		for id, p := range a.ports {
			if p.present && !inSnap[id] {
				p.present = false
				p.dirty = true
			}
		}
		if !a.started {
			a.adopt(ev.Snapshot)
			a.started = true
		}
	}
}

func (a *Agent) upsertVIF(v VIF, seen time.Time) {
	if v.PortID == "" {
		return
	}
	p := a.port(v.PortID)
	old := p.vif
	wasPresent := p.present
	p.vif = v
	p.present = true
	if !wasPresent || old.UUID != v.UUID || old.OFPort != v.OFPort || old.MAC != v.MAC || old.Name != v.Name {
		if wasPresent && old.UUID != "" && v.UUID != "" && old.UUID != v.UUID {
			p.reAdded = true
			p.upOnSrv = false
		}
		if !wasPresent && p.wired != wiredNone {
			// Removed and back within one batch window (or across batches
			// before the removal was reported): treat as a fresh plug.
			p.reAdded = true
			p.upOnSrv = false
		}
		p.needDetails = true
		p.dirty = true
		p.retry.at = time.Time{}
		p.clock.start(seen)
	}
	if v.Ready() {
		p.clock.mark(&p.clock.ofport, seen)
	}
	if old.Tag != v.Tag && p.wired != wiredNone {
		// Someone changed the tag under us: rewrite it.
		p.tagOK = false
		p.dirty = true
	}
}

// onEvent applies one server-side event to the state.
func (a *Agent) onEvent(ev Event) {
	switch e := ev.(type) {
	case PortChanged:
		if p := a.ports[e.PortID]; p != nil && p.present {
			p.needDetails = true
			p.dirty = true
			p.retry.at = time.Time{}
		}
	case PortDeleted:
		if p := a.ports[e.PortID]; p != nil && p.present {
			p.needDetails = true
			p.dirty = true
			p.retry.at = time.Time{}
		}
	case BindingDeactivated:
		if a.deactivated == nil {
			a.deactivated = map[string]bool{}
		}
		a.deactivated[e.PortID] = true
	case NetworkChanged:
		for _, p := range a.ports {
			if p.present && p.dev != nil && p.dev.NetworkID == e.NetworkID {
				p.needDetails = true
				p.dirty = true
			}
		}
	case SecurityGroupChanged:
		a.securityGroupsChanged(e.GroupIDs)
	// The l2pop and tunnel casts are the overlay's (feature.EventHandler).
	case FDBAdd:
		a.overlayEvent(overlay.FDBAdd(e))
	case FDBRemove:
		a.overlayEvent(overlay.FDBRemove(e))
	case FDBUpdate:
		a.overlayEvent(overlay.FDBUpdate(e))
	case TunnelUpdate:
		a.overlayEvent(overlay.TunnelUpdate(e))
	case TunnelDelete:
		a.overlayEvent(overlay.TunnelDelete(e))
	case ResourceChanged:
		a.onResourceChanged(e.Resource)
	case featureEvent:
		a.onFeatureEvent(e)
	case Resync:
		if a.resync == "" {
			a.resync = e.Reason
		}
		a.needCacheResync(e.Reason)
	case fdbRefresh:
		a.overlayEvent(overlay.FDBRefresh(e))
	case tunnelResync:
		a.overlayEvent(overlay.TunnelResync(e))
	}
}

// overlayEvent hands a cast to the overlay, on the loop.
func (a *Agent) overlayEvent(data any) {
	a.onFeatureEvent(featureEvent{name: overlay.Name, data: data})
}
