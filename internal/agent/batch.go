package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/ovsagent/ovsagent/internal/firewall"
	"github.com/ovsagent/ovsagent/internal/pipeline"
	"github.com/ovsagent/ovsagent/internal/porthints"
)

// batch applies everything the drained events asked for, in the order the
// reference wires a port: details, local VLAN, OVSDB tag, flows (one bundle
// per bridge), then one update_device_list.
func (a *Agent) batch(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	now := a.now()
	if !a.bridgesOK {
		if a.bridgeRetry.waiting(now) {
			return
		}
		a.setupBridges(ctx)
		if !a.bridgesOK {
			return
		}
		a.adoptBridges(ctx, false)
	}
	if a.checkCanary {
		a.checkCanary = false
		a.canary(ctx)
	}
	if a.ovsRestarted {
		if !a.handleOVSRestart(ctx) {
			return
		}
	}
	a.rereadFlows(ctx)
	if !a.started {
		return // the monitor's snapshot has not arrived yet
	}
	a.unplugDeactivated(ctx)
	if a.resync != "" {
		// Bridges may have been changed behind our back (OVSDB restart).
		a.setupBridges(ctx)
		if !a.bridgesOK {
			return
		}
		a.startResync(a.resync)
		a.resync = ""
	}
	a.resyncCache(ctx)
	// On the agent's clock: the OVSDB write and the bundles are the
	// dataplane stage of the ports this batch wires.
	t0 := a.now()
	finishPrefetch := a.prefetch(ctx) // tunnel_sync
	a.fetchDetails(ctx)
	finishPrefetch()
	t1 := a.now()
	settings := a.decidePorts()
	a.releaseIdleNetworks()
	a.refreshEarly(ctx)
	t2 := a.now()
	a.writePorts(ctx, settings)
	a.syncFeatures(ctx)
	t3 := a.now()
	owners := len(a.dirtyOwner)
	flowsOK, bundleWait := a.applyFlows(ctx)
	a.retagPorts(ctx)
	t4 := a.now()
	if flowsOK {
		a.markWired(t4, t3.Sub(t2)+bundleWait)
		a.reportDevices(ctx)
	}
	if a.checkBridges && flowsOK {
		a.checkBridges = false
		a.setupBridges(ctx)
		if !a.bridgesOK {
			a.checkBridges = true
		}
	}
	a.updateSync()
	if a.log.Enabled(ctx, slog.LevelDebug) {
		a.log.Debug("agent: batch", "details", t1.Sub(t0), "wire", t2.Sub(t1), "ovsdb", t3.Sub(t2), "port_writes", len(settings),
			"flows", t4.Sub(t3), "owners", owners, "report", a.now().Sub(t4), "in_sync", a.inSync)
	}
}

// canary checks br-int's table 23 flow: gone means ovs-vswitchd restarted.
func (a *Agent) canary(ctx context.Context) {
	if a.d.Flows == nil || !a.swept && len(a.installedOwners()) == 0 {
		return
	}
	ok, err := a.d.Flows.CanaryPresent(ctx, a.layout.Integration)
	if err != nil {
		a.log.Warn("agent: canary check failed; ovs-vswitchd may be down", "err", err)
		a.checkCanary = true
		a.flowRetry.fail(a.now(), a.backoff)
		return
	}
	if !ok {
		a.log.Warn("agent: canary flow missing: ovs-vswitchd restarted; restoring bridges and flows")
		a.ovsRestarted = true
	}
}

func (a *Agent) installedOwners() []string {
	var out []string
	for _, m := range a.applied {
		for o := range m {
			out = append(out, o)
		}
	}
	return out
}

// handleOVSRestart re-installs every flow; the bridges are checked after.
//
// ovs-vswitchd restarted, ovsdb-server did not: the bridges, ports and
// their ofports are still in the database, and vswitchd re-creates them from
// it, reusing the ofports. It answers OpenFlow on a bridge long before it has
// applied the whole configuration (cur_cfg): at 1,000 ports several seconds
// before, seconds in which the bridges pass nothing. So the flows go first,
// computed for the layout known, and SetupBridges — which waits for vswitchd
// to catch up — runs after them (checkBridges); a layout it finds changed
// recomputes everything. A lost database is the OVSDB resync's case.
func (a *Agent) handleOVSRestart(ctx context.Context) bool {
	if a.layout.Integration == "" {
		a.setupBridges(ctx)
		if !a.bridgesOK {
			return false
		}
	} else {
		a.checkBridges = true
	}
	a.ovsRestarted = false
	a.d.Metrics.IncResync("ovs-restart")
	for _, br := range a.layout.Bridges() {
		a.d.Flows.Reset(br)
	}
	a.dirtyAll()
	for br := range a.applied {
		a.applied[br] = map[string]ownerDigest{}
	}
	a.adoptBridges(ctx, true) // tunnel ports, and tunnel_sync again
	if a.d.OnOVSRestart != nil && len(a.opt.TunnelTypes) > 0 {
		a.d.OnOVSRestart()
	}
	if len(a.opt.TunnelTypes) > 0 {
		a.reportStart.Store(true)
		select {
		case a.reportNow <- struct{}{}:
		default:
		}
	}
	return true
}

// rereadFlows re-reads the flows of the bridges whose OpenFlow connection
// came back and re-sends whatever differs from the desired state; once the
// bridge was swept, flows no owner desires go as well. A failure is retried
// with the next batch.
func (a *Agent) rereadFlows(ctx context.Context) {
	for _, br := range slices.Sorted(maps.Keys(a.reread)) {
		if err := a.d.Flows.Reread(ctx, br, a.sweptBr[br]); err != nil {
			a.log.Warn("agent: re-reading flows after a reconnect failed; retrying", "bridge", br, "err", err)
			continue
		}
		delete(a.reread, br)
	}
}

func (a *Agent) startResync(reason string) {
	a.log.Info("agent: full resync", "reason", reason)
	a.d.Metrics.IncResync(reason)
	if reason == ResyncRevived {
		a.abandonReports()
	}
	for _, p := range a.ports {
		if p.present {
			p.needDetails = true
			p.dirty = true
			p.retry.at = time.Time{}
		}
	}
	a.fresh = true
	a.cacheCurrent = false
	a.resyncFeatures(reason) // the overlay asks for every tunnelled network's FDB
}

// needCacheResync records that the cached server objects must be re-read
// after a full resync of this reason (pushesMayBeLost). Not for "revived"
// before the agent's first sync ended (the server's answer to its first
// report after a long absence): the cache was filled by this start, its
// consumers listening, and pulling all of it again would double the time
// a restart takes.
func (a *Agent) needCacheResync(reason string) {
	if !pushesMayBeLost(reason) {
		return
	}
	if reason == ResyncRevived && !a.swept {
		a.log.Info("agent: revived during the start: the cache this start filled is not re-read")
		return
	}
	if a.cacheResync == "" {
		a.cacheResync = reason
	}
	a.cacheRetry.at = time.Time{} // news: no back-off of an earlier failure to wait out
}

// resyncCache re-reads the cached server objects when a full resync asked
// for it (needCacheResync), before the details fetch: the changes arrive as
// the cache's events (NotifyFromCache), as if pushed, and the fetch reads
// the ports from the cache just re-read instead of pulling them again. A
// failed pull (an outage) is retried with the back-off; objects that could
// not be decoded are counted and logged, dropped from the cache by it (their
// ports then fail their own details), and not retried: the rest was applied.
func (a *Agent) resyncCache(ctx context.Context) {
	if a.cacheResync == "" || a.cacheRetry.waiting(a.now()) {
		return
	}
	start := time.Now()
	undecodable, err := a.d.Cache.ResyncCache(ctx)
	took := time.Since(start)
	if len(undecodable) > 0 {
		for range undecodable {
			a.d.Metrics.IncMalformed("cache-resync", "undecodable")
		}
		a.log.Error("agent: re-reading the cache: objects the server returned could not be decoded; dropped from the cache, the others applied",
			"reason", a.cacheResync, "objects", len(undecodable), "first", undecodable[0])
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		wait := a.cacheRetry.fail(a.now(), a.backoff)
		a.log.Warn("agent: re-reading the cached server objects failed (pushes may have been lost); retrying",
			"reason", a.cacheResync, "failures", a.cacheRetry.failures, "retry_in", wait, "took", took, "err", err)
		return
	}
	a.log.Info("agent: cached server objects re-read", "reason", a.cacheResync, "took", took)
	a.cacheRetry = retry{}
	a.cacheResync = ""
	a.cacheCurrent = true
}

func (a *Agent) fetchDetails(ctx context.Context) {
	now := a.now()
	var ids []string
	for id, p := range a.ports {
		if p.present && p.needDetails && p.vif.Ready() && !p.retry.at.After(now) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	sort.Strings(ids)
	start := time.Now()
	devs, failed, err := a.d.Cache.Devices(ctx, ids, a.fresh && !a.cacheCurrent)
	took := time.Since(start)
	got := a.now()
	if err != nil {
		failed = make(map[string]error, len(ids))
		for _, id := range ids {
			failed[id] = fmt.Errorf("%w: %w", ErrDetailsUnavailable, err)
		}
	}
	outage, nfailed := a.detailsFailed(ids, failed, now)
	if err == nil {
		err = outage
	}
	a.observeRPC("get_device_details", took, err)
	if nfailed == len(ids) {
		return // nothing learnt: a fresh fetch stays fresh
	}
	fresh := a.fresh
	a.fresh = false
	a.cacheCurrent = false
	for _, id := range ids {
		if failed[id] != nil {
			continue
		}
		p := a.ports[id]
		d, ok := devs[id]
		if !ok {
			d = Device{PortID: id}
		}
		p.dev = &d
		p.clock.mark(&p.clock.details, got)
		p.recheck = fresh
		p.needDetails = false
		p.refusals = 0
		p.dirty = true
	}
}

// detailsFailed puts the ports of ids that failed in the details call in
// back-off; it returns the first outage's error and how many failed. A
// port the server's answer did not come for (ErrDetailsUnavailable: a pull
// failed or timed out, while the server may well answer other calls) is no
// refusal: its dataplane is left as it is and it keeps holding back the
// sweep, as the reference retries its failed devices next loop without
// touching them. Any other reason is the server's answer, one the port
// cannot be wired with: a refusal (refuseDetails). An object the server
// sent that could not be decoded counts as one too: the server answered,
// and an answer the agent cannot read will not read better on a retry; the
// sweep must not wait for it forever (the other ports of its reply are
// wired: neutron.BadObjectsError).
func (a *Agent) detailsFailed(ids []string, failed map[string]error, now time.Time) (outage error, n int) {
	var unavailable, refused int
	var refusal error
	for _, id := range ids {
		reason := failed[id]
		if reason == nil {
			continue
		}
		p := a.ports[id]
		p.retry.fail(now, a.backoff)
		if errors.Is(reason, ErrDetailsUnavailable) {
			unavailable++
			if outage == nil {
				outage = reason
			}
			continue
		}
		if errors.Is(reason, ErrDetailsUndecodable) {
			a.d.Metrics.IncMalformed("port-details", "undecodable")
		}
		refused++
		if refusal == nil {
			refusal = reason
		}
		a.refuseDetails(p)
	}
	if unavailable > 0 {
		a.log.Warn("agent: device details unavailable, the server's answer did not come (an outage, not a refusal); dataplane left as it is, stale flows kept, retrying",
			"ports", unavailable, "err", outage)
	}
	if refused > 0 {
		a.log.Warn("agent: the server answered without usable device details; retrying",
			"ports", refused, "err", refusal)
	}
	return outage, unavailable + refused
}

// refuseDetails counts a refusal of p's details. When the port gives up
// without details from this run, all it has are the previous run's flows,
// which the sweep is about to delete and which may allow what the security
// groups no longer do: it is wired dead (dead VLAN, drop) until its details
// come, fail closed. A port with details from this run keeps its wiring.
func (a *Agent) refuseDetails(p *portRec) {
	p.refusals++
	if p.refusals != detailsGiveUp {
		return
	}
	a.log.Warn("agent: the server keeps refusing a port's details; it no longer holds back the stale flow sweep, still retrying",
		"port", p.id, "refusals", p.refusals, "dead", p.dev == nil)
	if p.dev == nil {
		p.dev = &Device{PortID: p.id} // unbound: wired dead
		p.dirty = true
	}
}

// decidePorts wires every dirty port in the state and returns the OVSDB
// writes needed.
func (a *Agent) decidePorts() []PortSetting {
	now := a.now()
	var settings []PortSetting
	for _, id := range slices.Sorted(maps.Keys(a.ports)) {
		p := a.ports[id]
		if !p.dirty {
			continue
		}
		if !p.present {
			a.removePort(p)
			continue
		}
		if !p.vif.Ready() {
			// The ofport update event will dirty it again.
			p.dirty = false
			continue
		}
		if p.dev == nil || (p.needDetails || p.retry.at.After(now)) && !p.givenUp() {
			continue
		}
		if s, ok := a.wirePort(p); ok {
			settings = append(settings, s)
		}
	}
	return settings
}

func netKeyOf(d *Device) pipeline.NetKey {
	if d.SegmentationID != nil && *d.SegmentationID >= 0 && *d.SegmentationID <= math.MaxUint32 {
		return pipeline.Seg(d.NetworkID, uint32(*d.SegmentationID))
	}
	return pipeline.NoSeg(d.NetworkID)
}

// badSegment says why the port's segmentation id cannot be wired ("" when
// it can): truncated into a VLAN id or VNI it would join another network.
func badSegment(d *Device) string {
	typ := pipeline.NetworkType(d.NetworkType)
	if d.SegmentationID == nil || typ == pipeline.TypeFlat || typ == pipeline.TypeLocal {
		return ""
	}
	seg := *d.SegmentationID
	if seg < 0 || seg > math.MaxUint32 || !typ.ValidSegment(uint32(seg)) {
		return fmt.Sprintf("segmentation id %d out of range for %s", seg, d.NetworkType)
	}
	return ""
}

// wirePort computes the port's wiring; it returns the Port row write when
// the tag or other_config must change.
func (a *Agent) wirePort(p *portRec) (PortSetting, bool) {
	d := p.dev
	p.dirty = false
	defer func() { p.recheck = false }()
	w := wiredUp
	switch {
	case !d.Bound:
		w = wiredDead
	case !d.AdminStateUp:
		w = wiredAdminDown
	}
	var key pipeline.NetKey
	vlan := uint16(DeadVLAN)
	if w == wiredUp {
		if why := badSegment(d); why != "" {
			if p.wired != wiredDead {
				a.d.Metrics.IncMalformed("port-details", "segmentation-id")
				a.log.Warn("agent: port left dead", "port", p.id, "network", d.NetworkID, "err", why)
			}
			w = wiredDead
		}
	}
	if w == wiredUp {
		key = netKeyOf(d)
		v, err := a.maps.Allocate(key)
		if err != nil {
			a.log.Error("agent: no local VLAN for network; port left dead", "port", p.id, "network", d.NetworkID, "err", err)
			w = wiredDead
		} else {
			vlan = v
		}
	}
	newWiring := p.wired != w || (w == wiredUp && (!p.hasNet || p.net != key))
	if p.hasNet && (w != wiredUp || p.net != key) {
		a.leaveNet(p)
	}
	if w == wiredUp && !p.hasNet {
		a.joinNet(p, key, d, vlan)
	}

	oc := map[string]string{}
	if w == wiredUp {
		oc = bindingOtherConfig(d, vlan)
	}
	adopted := p.vif.Tag == int(vlan) && ocHas(p.vif.OtherConfig, oc)
	tag := vlan
	if w == wiredUp && a.heldDead(p.id) {
		tag = DeadVLAN // fail closed until its flows are in (heldDead)
	}
	var iface map[string]string // nil: not written (the reference applies hints on bind only)
	if w == wiredUp {
		iface = a.portHints(p, d)
	}
	p.tagOK = p.vif.Tag == int(tag) && ocHas(p.vif.OtherConfig, oc) && (iface == nil || maps.Equal(p.vif.IfaceOtherConfig, iface))

	// Pipeline state (the features' is theirs: portWired below).
	a.touch(pipeline.OwnerPort(p.id))
	a.ps.Ports[p.id] = pipelinePort(p, d, key, w)
	a.touch(pipeline.OwnerPort(p.id))

	// What the server must hear.
	switch w {
	case wiredUp:
		if newWiring {
			p.upOnSrv = adopted && d.Status == "ACTIVE" && !p.reAdded
			p.adopted = adopted
		} else if p.recheck && d.Status != "ACTIVE" {
			// Full resync: the server lost what we told it.
			p.upOnSrv = false
		}
		switch {
		case tag == DeadVLAN && p.upOnSrv:
			// Held on the dead VLAN (heldDead): the server must not keep
			// it ACTIVE; reported up again once its flows are in.
			p.setWant(reportDown)
			p.upOnSrv = false
		case tag == DeadVLAN && p.want == reportDown:
			// the down is on its way
		case !p.upOnSrv:
			p.setWant(reportUp)
		default:
			p.setWant(reportNone)
			p.clock.reset()
		}
	case wiredAdminDown:
		if newWiring || p.want == reportUp {
			p.setWant(reportDown)
		}
		p.upOnSrv = false
	case wiredDead:
		if p.want == reportUp {
			p.setWant(reportNone)
		}
		p.upOnSrv = false
		p.clock.reset()
	}
	p.wired = w
	a.portWired(p)
	if p.tagOK {
		return PortSetting{}, false
	}
	return PortSetting{Name: p.vif.Name, Tag: tag, OtherConfig: oc, IfaceOtherConfig: iface}, true
}

// portHints is the Interface other_config a bound port's hints ask for
// (porthints), with the reference's WARNING, logged on each bind as it does.
func (a *Agent) portHints(p *portRec, d *Device) map[string]string {
	dec := porthints.InterfaceOtherConfig(d.Hints)
	if dec.Sanitized {
		a.log.Warn("agent: got unexpected port hints other_config, using sanitized version",
			"port", p.id, "hints", d.Hints, "sanitized", dec.OtherConfig)
	}
	return dec.OtherConfig
}

func bindingOtherConfig(d *Device, vlan uint16) map[string]string {
	phys := d.PhysicalNetwork
	if phys == "" {
		phys = "None"
	}
	oc := map[string]string{
		"net_uuid":         d.NetworkID,
		"network_type":     d.NetworkType,
		"physical_network": phys,
		"tag":              strconv.Itoa(int(vlan)),
	}
	if d.SegmentationID != nil {
		oc["segmentation_id"] = strconv.Itoa(*d.SegmentationID)
	}
	return oc
}

func ocHas(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func pipelinePort(p *portRec, d *Device, key pipeline.NetKey, w wiring) *pipeline.Port {
	mac, _ := net.ParseMAC(p.vif.MAC)
	if d.MAC != "" {
		if m, err := net.ParseMAC(d.MAC); err == nil {
			mac = m
		}
	}
	pp := &pipeline.Port{
		ID: p.id, Name: p.vif.Name, Ofport: uint32(p.vif.OFPort), MAC: mac, Net: key,
		AdminUp: w != wiredAdminDown && d.AdminStateUp, Dead: w == wiredDead,
		DeviceOwner: d.DeviceOwner, PortSecurity: d.PortSecurity,
	}
	for _, ip := range d.FixedIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			pp.FixedIPs = append(pp.FixedIPs, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	for _, ap := range d.AllowedPairs {
		pfx, ok := parsePrefix(ap.IP)
		if !ok {
			continue
		}
		var m net.HardwareAddr
		if ap.MAC != "" {
			m, _ = net.ParseMAC(ap.MAC)
		}
		pp.AllowedAddressPairs = append(pp.AllowedAddressPairs, pipeline.AddressPair{MAC: m, IP: pfx})
	}
	return pp
}

// parsePrefix reads an address or prefix from the server as the firewall
// model wants it (firewall.ParsePrefix).
func parsePrefix(s string) (netip.Prefix, bool) { return firewall.ParsePrefix(s) }

// joinNet puts the port on its mapping; a new mapping's flows are computed
// (its FDB is the overlay's: PortWired, once the port's wiring is decided).
func (a *Agent) joinNet(p *portRec, key pipeline.NetKey, d *Device, vlan uint16) {
	p.net, p.hasNet = key, true
	if a.maps.Join(p.id, key, pipeline.NetworkType(d.NetworkType), d.PhysicalNetwork, vlan) {
		a.touch(pipeline.OwnerNetwork(key))
	}
}

func (a *Agent) leaveNet(p *portRec) {
	a.maps.Leave(p.id, p.net)
	p.hasNet = false
}

// releaseIdleNetworks frees the local VLAN of networks without local ports
// (the overlay then forgets their FDB: overlay.prune).
func (a *Agent) releaseIdleNetworks() {
	a.maps.ReleaseIdle(func(key pipeline.NetKey) { a.touch(pipeline.OwnerNetwork(key)) })
}

// removePort unwires a port that left br-int; it is reported down if the
// server had it bound here.
func (a *Agent) removePort(p *portRec) {
	p.dirty = false
	if p.hasNet {
		a.leaveNet(p)
	}
	if _, ok := a.ps.Ports[p.id]; ok {
		a.touch(pipeline.OwnerPort(p.id))
		delete(a.ps.Ports, p.id)
	}
	a.portRemoved(p.id)
	if p.dev != nil && p.dev.Bound && (p.wired == wiredUp || p.wired == wiredAdminDown) {
		p.setWant(reportDown)
		p.wired = wiredNone
		p.upOnSrv = false
		return
	}
	delete(a.ports, p.id)
}

func (a *Agent) writePorts(ctx context.Context, settings []PortSetting) {
	if len(settings) == 0 {
		return
	}
	err := a.d.Switch.SetPorts(ctx, settings)
	byName := map[string]*portRec{}
	for _, p := range a.ports {
		byName[p.vif.Name] = p
	}
	now := a.now()
	for _, s := range settings {
		p := byName[s.Name]
		if p == nil {
			continue
		}
		if err != nil {
			p.retry.fail(now, a.backoff)
			p.dirty = true
			continue
		}
		p.tagOK = true
		p.vif.Tag = int(s.Tag)
		if p.vif.OtherConfig == nil {
			p.vif.OtherConfig = map[string]string{}
		}
		for k, v := range s.OtherConfig {
			p.vif.OtherConfig[k] = v
		}
		if s.IfaceOtherConfig != nil {
			p.vif.IfaceOtherConfig = maps.Clone(s.IfaceOtherConfig)
		}
	}
	if err != nil {
		a.log.Warn("agent: writing port tags failed; retrying", "ports", len(settings), "err", err)
	}
}
