package agent

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ovsagent/ovsagent/internal/firewall"
	"github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/pipeline"
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
		if now.Before(a.bridgeRetryAt) {
			return
		}
		a.setupBridges(ctx)
		if !a.bridgesOK {
			return
		}
		a.adoptTunnels(ctx)
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
	if !a.started {
		return // the monitor's snapshot has not arrived yet
	}
	if a.resync != "" {
		// Bridges may have been changed behind our back (OVSDB restart).
		a.setupBridges(ctx)
		if !a.bridgesOK {
			return
		}
		a.startResync(a.resync)
		a.resync = ""
	}
	t0 := time.Now()
	a.doTunnelSync(ctx)
	a.fetchDetails(ctx)
	t1 := time.Now()
	settings := a.decidePorts()
	a.releaseIdleNetworks()
	a.reconcileTunnels(ctx)
	t2 := time.Now()
	a.writePorts(ctx, settings)
	t3 := time.Now()
	a.updateFirewall(ctx)
	owners := len(a.dirtyOwner)
	flowsOK := a.applyFlows(ctx)
	t4 := time.Now()
	if flowsOK {
		a.reportDevices(ctx)
	}
	a.updateSync()
	if a.log.Enabled(ctx, slog.LevelDebug) {
		a.log.Debug("agent: batch", "details", t1.Sub(t0), "wire", t2.Sub(t1), "ovsdb", t3.Sub(t2), "port_writes", len(settings),
			"flows", t4.Sub(t3), "owners", owners, "report", time.Since(t4), "in_sync", a.inSync)
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
		a.flowFails++
		a.flowRetryAt = a.now().Add(a.backoff(a.flowFails))
		return
	}
	if !ok {
		a.log.Warn("agent: canary flow missing: ovs-vswitchd restarted; restoring bridges and flows")
		a.ovsRestarted = true
	}
}

func (a *Agent) installedOwners() []string {
	var out []string
	for _, m := range a.installed {
		for o := range m {
			out = append(out, o)
		}
	}
	return out
}

// handleOVSRestart re-creates the bridges and re-installs every flow.
func (a *Agent) handleOVSRestart(ctx context.Context) bool {
	a.setupBridges(ctx)
	if !a.bridgesOK {
		return false
	}
	a.ovsRestarted = false
	a.d.Metrics.IncResync("ovs-restart")
	for _, br := range a.layout.Bridges() {
		a.d.Flows.Reset(br)
	}
	a.dirtyAll()
	for br := range a.installed {
		a.installed[br] = map[string][]openflow.Flow{}
	}
	a.adoptTunnels(ctx)
	for _, t := range a.opt.TunnelTypes {
		a.tunnelSync[t] = &retry{}
	}
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

// adoptTunnels takes the tunnel ports OVSDB has into the state, so their
// flows are re-installed and they are not re-created.
func (a *Agent) adoptTunnels(ctx context.Context) {
	if a.layout.Tunnel == "" {
		return
	}
	tps, err := a.d.Switch.TunnelPorts(ctx)
	if err != nil {
		a.log.Warn("agent: listing tunnel ports failed", "err", err)
		return
	}
	for _, tp := range tps {
		ip, err := netip.ParseAddr(tp.RemoteIP)
		if err != nil || tp.OFPort <= 0 {
			continue
		}
		t := &pipeline.Tunnel{RemoteIP: ip, Type: pipeline.NetworkType(tp.Type), Ofport: uint32(tp.OFPort)}
		a.tunnels[t.Key()] = tp
		a.ps.Tunnels[t.Key()] = t
		a.dirtyTunnel(ip, tp.Type)
	}
}

func (a *Agent) dirtyTunnel(ip netip.Addr, typ string) {
	a.dirtyOwner[pipeline.OwnerTunnel(ip)] = true
	for k, n := range a.ps.Networks {
		if string(n.Type) == typ {
			a.dirtyOwner[pipeline.OwnerNetwork(k)] = true
		}
	}
}

func (a *Agent) startResync(reason string) {
	a.log.Info("agent: full resync", "reason", reason)
	a.d.Metrics.IncResync(reason)
	for _, p := range a.ports {
		if p.present {
			p.needDetails = true
			p.dirty = true
			p.retryAt = time.Time{}
		}
	}
	a.fresh = true
	a.sgDirty = true
	for k, n := range a.ps.Networks {
		if n.Type.IsTunnel() && a.opt.L2Population {
			a.refreshNets[k.NetworkID] = true
		}
	}
}

func (a *Agent) doTunnelSync(ctx context.Context) {
	if a.opt.LocalIP == "" {
		return
	}
	now := a.now()
	for _, typ := range sortedKeys(a.tunnelSync) {
		r := a.tunnelSync[typ]
		if r.at.After(now) {
			continue
		}
		start := time.Now()
		eps, err := a.d.Plugin.TunnelSync(ctx, a.opt.LocalIP, typ)
		a.observeRPC("tunnel_sync", time.Since(start), err)
		if err != nil {
			r.failures++
			r.at = now.Add(a.backoff(r.failures))
			a.log.Warn("agent: tunnel_sync failed; retrying", "type", typ, "err", err, "in", a.backoff(r.failures))
			continue
		}
		delete(a.tunnelSync, typ)
		peers := 0
		for _, ep := range eps {
			if ip, err := netip.ParseAddr(ep.IP); err == nil && !a.ownIP(ip) {
				peers++
			}
		}
		a.tunnelPeers[typ] = peers
		if a.opt.L2Population {
			continue // l2pop creates tunnels on demand
		}
		for _, ep := range eps {
			a.tunnelUpdate(TunnelUpdate{IP: ep.IP, Type: typ})
		}
	}
}

func (a *Agent) fetchDetails(ctx context.Context) {
	now := a.now()
	var ids []string
	for id, p := range a.ports {
		if p.present && p.needDetails && p.vif.Ready() && !p.retryAt.After(now) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	sort.Strings(ids)
	start := time.Now()
	devs, failed, err := a.d.Cache.Devices(ctx, ids, a.fresh)
	a.observeRPC("get_device_details", time.Since(start), err)
	if err == nil && len(failed) == len(ids) {
		err = errors.New("no device details")
	}
	if err != nil {
		failed = ids
	}
	if len(failed) > 0 {
		for _, id := range failed {
			p := a.ports[id]
			p.failures++
			p.retryAt = now.Add(a.backoff(p.failures))
		}
		a.log.Warn("agent: device details unavailable; dataplane left as it is, retrying", "ports", len(failed), "err", errString(err))
		if err != nil {
			return
		}
	}
	fresh := a.fresh
	a.fresh = false
	bad := map[string]bool{}
	for _, id := range failed {
		bad[id] = true
	}
	for _, id := range ids {
		if bad[id] {
			continue
		}
		p := a.ports[id]
		d, ok := devs[id]
		if !ok {
			d = Device{PortID: id}
		}
		p.dev = &d
		p.recheck = fresh
		p.needDetails = false
		p.dirty = true
	}
}

// decidePorts wires every dirty port in the state and returns the OVSDB
// writes needed.
func (a *Agent) decidePorts() []PortSetting {
	now := a.now()
	var settings []PortSetting
	for _, id := range sortedKeys(a.ports) {
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
		if p.needDetails || p.dev == nil || p.retryAt.After(now) {
			continue
		}
		if s, ok := a.wirePort(p); ok {
			settings = append(settings, s)
		}
	}
	return settings
}

func netKeyOf(d *Device) pipeline.NetKey {
	if d.SegmentationID != nil && *d.SegmentationID >= 0 {
		return pipeline.Seg(d.NetworkID, uint32(*d.SegmentationID))
	}
	return pipeline.NoSeg(d.NetworkID)
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
		key = netKeyOf(d)
		v, err := a.vlans.Allocate(key)
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
	p.tagOK = adopted

	// Pipeline and firewall state.
	a.touch(pipeline.OwnerPort(p.id))
	a.ps.Ports[p.id] = pipelinePort(p, d, key, w)
	a.touch(pipeline.OwnerPort(p.id))
	a.setFirewallPort(p, d, vlan, w)

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
		if !p.upOnSrv {
			p.setWant(reportUp)
		} else {
			p.setWant(reportNone)
			p.seen = time.Time{}
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
		p.seen = time.Time{}
	}
	p.wired = w
	if p.tagOK {
		return PortSetting{}, false
	}
	return PortSetting{Name: p.vif.Name, Tag: vlan, OtherConfig: oc}, true
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

func parsePrefix(s string) (netip.Prefix, bool) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err == nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, a.BitLen()), true
}

func (a *Agent) joinNet(p *portRec, key pipeline.NetKey, d *Device, vlan uint16) {
	p.net, p.hasNet = key, true
	set := a.netPorts[key]
	if set == nil {
		set = map[string]bool{}
		a.netPorts[key] = set
	}
	set[p.id] = true
	if a.ps.Networks[key] == nil {
		typ := pipeline.NetworkType(d.NetworkType)
		if a.fdb[d.NetworkID] == nil {
			a.fdb[d.NetworkID] = map[netip.Addr]*pipeline.RemoteFDB{}
		}
		a.ps.Networks[key] = &pipeline.Network{Key: key, Type: typ, PhysicalNetwork: d.PhysicalNetwork, LocalVLAN: vlan, FDB: a.fdb[d.NetworkID]}
		a.touch(pipeline.OwnerNetwork(key))
		if typ.IsTunnel() && a.opt.L2Population {
			a.refreshNets[d.NetworkID] = true
		}
	}
}

func (a *Agent) leaveNet(p *portRec) {
	if set := a.netPorts[p.net]; set != nil {
		delete(set, p.id)
	}
	p.hasNet = false
}

// releaseIdleNetworks frees the local VLAN of networks without local ports.
func (a *Agent) releaseIdleNetworks() {
	for key, set := range a.netPorts {
		if len(set) > 0 {
			continue
		}
		delete(a.netPorts, key)
		a.vlans.Release(key)
		a.touch(pipeline.OwnerNetwork(key))
		delete(a.ps.Networks, key)
		still := false
		for k := range a.netPorts {
			if k.NetworkID == key.NetworkID {
				still = true
			}
		}
		if !still {
			delete(a.fdb, key.NetworkID)
			delete(a.refreshNets, key.NetworkID)
			delete(a.fdbAwait, key.NetworkID)
			delete(a.fdbSeen, key.NetworkID)
		}
	}
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
	a.deleteFirewallPort(p.id)
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
			p.failures++
			p.retryAt = now.Add(a.backoff(p.failures))
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
	}
	if err != nil {
		a.log.Warn("agent: writing port tags failed; retrying", "ports", len(settings), "err", err)
	}
}

// applyFlows recomputes the dirty owners and applies what changed, one
// bundle per bridge. The stale flows of earlier rounds go in the same
// bundle once the dataplane is complete.
func (a *Agent) applyFlows(ctx context.Context) bool {
	sweeps := map[string]bool{}
	if !a.swept {
		for _, br := range a.layout.Bridges() {
			if a.sweepReady(br) {
				sweeps[br] = true
			}
		}
	}
	if len(a.dirtyOwner) == 0 && len(sweeps) == 0 {
		return true
	}
	if a.flowRetryAt.After(a.now()) {
		return false
	}
	for _, owner := range sortedKeys(a.dirtyOwner) {
		if !strings.HasPrefix(owner, "fw:") {
			a.touch(owner)
		}
	}
	changes := map[string]map[string][]openflow.Flow{}
	var fwOwners []string
	for owner := range a.dirtyOwner {
		if strings.HasPrefix(owner, "fw:") {
			fwOwners = append(fwOwners, owner)
		}
	}
	fwFlows, fwErrs := firewall.FlowsForOwners(a.fw, a.conj, fwOwners)
	for owner := range a.dirtyOwner {
		var bf map[string][]openflow.Flow
		if strings.HasPrefix(owner, "fw:") {
			fs, err := fwFlows[owner], fwErrs[owner]
			if err != nil {
				a.log.Error("agent: firewall owner", "owner", owner, "err", err)
				delete(a.dirtyOwner, owner)
				continue
			}
			for i := range fs {
				if fs[i].Cookie == 0 {
					fs[i].Cookie = a.ps.Int.Cookie // what the reconciler installs them with
				}
			}
			bf = map[string][]openflow.Flow{a.layout.Integration: fs}
		} else {
			got, err := pipeline.FlowsFor(a.ps, owner)
			if err != nil {
				a.log.Error("agent: pipeline owner", "owner", owner, "err", err)
				delete(a.dirtyOwner, owner)
				continue
			}
			bf = got
		}
		for br := range a.installed {
			want := bf[br]
			if flowsEqual(a.installed[br][owner], want) {
				continue
			}
			if changes[br] == nil {
				changes[br] = map[string][]openflow.Flow{}
			}
			changes[br][owner] = want
		}
	}
	failed := false
	for _, br := range a.layout.Bridges() {
		set := changes[br]
		sweep := sweeps[br]
		if len(set) == 0 && !sweep {
			continue
		}
		start := time.Now()
		err := a.d.Flows.Apply(ctx, br, FlowChange{Set: set, Sweep: sweep})
		if err != nil {
			a.log.Warn("agent: flow bundle failed; retrying", "bridge", br, "owners", len(set), "err", err)
			failed = true
			continue
		}
		a.d.Metrics.ObserveBundle(br, time.Since(start))
		if sweep {
			a.sweptBr[br] = true
		}
		for owner, fs := range set {
			if len(fs) == 0 {
				delete(a.installed[br], owner)
			} else {
				// An exact-size copy: the flow builders' append slack was
				// 8 MiB of the heap at 1,000 ports (scale test).
				a.installed[br][owner] = append([]openflow.Flow(nil), fs...)
			}
		}
		a.d.Metrics.SetFlows(br, tableCounts(a.installed[br]))
		if br == a.layout.Integration {
			a.ct.request(a.conntrackZones(set))
		}
	}
	if failed {
		a.flowFails++
		a.flowRetryAt = a.now().Add(a.backoff(a.flowFails))
		return false
	}
	a.flowFails = 0
	clear(a.dirtyOwner)
	if !a.swept && len(sweeps) > 0 {
		all := true
		for _, br := range a.layout.Bridges() {
			all = all && a.sweptBr[br]
		}
		if all {
			a.afterSweep(ctx)
		}
	}
	return true
}

func tableCounts(m map[string][]openflow.Flow) map[uint8]int {
	out := map[uint8]int{}
	for _, fs := range m {
		for _, f := range fs {
			out[f.Table]++
		}
	}
	return out
}

func flowsEqual(a, b []openflow.Flow) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !flowEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

func flowEqual(x, y openflow.Flow) bool {
	// The rendering is canonical (field order, action text) and covers
	// every part of the entry.
	return x.String() == y.String()
}

// dataplaneComplete: every port that can be wired is wired, tunnels are
// synced and the FDB of every tunnelled network has arrived (or waited
// for long enough): nothing installed by an earlier run is needed any more.
func (a *Agent) dataplaneComplete() bool {
	return a.wiringComplete() && a.fdbComplete()
}

// wiringComplete: everything but l2pop's FDB is known and computed.
func (a *Agent) wiringComplete() bool {
	if !a.started || !a.bridgesOK || a.ovsRestarted || len(a.tunnelSync) > 0 || a.sgDirty {
		return false
	}
	for _, p := range a.ports {
		if p.present && p.vif.Ready() && (p.needDetails || p.dirty || !p.tagOK && p.wired != wiredNone) {
			return false
		}
	}
	return true
}

// fdbComplete: the FDB of every tunnelled network was asked for and has
// arrived or been waited for.
func (a *Agent) fdbComplete() bool {
	if a.noPeers() {
		return true // no other host: l2pop has no FDB to send
	}
	if len(a.refreshNets) > 0 {
		return false
	}
	now := a.now()
	for _, dl := range a.fdbAwait {
		if now.Before(dl) {
			return false
		}
	}
	return true
}

// noPeers: tunnel_sync named no endpoint but ours for every tunnel type
// and br-tun has no tunnel port, so no FDB entry can come.
func (a *Agent) noPeers() bool {
	if len(a.tunnels) > 0 || len(a.tunnelPeers) < len(a.opt.TunnelTypes) {
		return false
	}
	for _, n := range a.tunnelPeers {
		if n > 0 {
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
	if a.sweptBr[br] || !a.wiringComplete() {
		return false
	}
	if br == a.layout.Tunnel && len(a.tunnels) > 0 {
		return a.fdbComplete()
	}
	return true
}

func (a *Agent) afterSweep(ctx context.Context) {
	a.swept = true
	clear(a.fdbAwait)
	a.vlans.DisposeHints()
	a.conj = a.conj.ReleaseReserved()
	a.log.Info("agent: in sync with the dataplane; stale flows removed")
	a.reconcileTunnels(ctx) // adopted tunnel ports nobody uses go now
}

// reportDevices sends one update_device_list for every port whose state
// the server must learn (plus a devices_down first for re-plugged ports).
// The call runs on its own goroutine so that wiring goes on while the
// server works; its result comes back to the loop (onReportResult). A port
// is in at most one call at a time, which keeps its ups and downs in order.
func (a *Agent) reportDevices(ctx context.Context) {
	if a.inflight >= a.opt.MaxInflightReports {
		return // a result will bring the loop back
	}
	now := a.now()
	r := &reportResult{gens: map[string]uint64{}, upNets: map[string]bool{}}
	for _, id := range sortedKeys(a.ports) {
		p := a.ports[id]
		if p.inflight || p.retryAt.After(now) {
			continue
		}
		switch p.want {
		case reportUp:
			if p.wired == wiredUp && p.tagOK {
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
	// l2pop sends a network's full FDB when a port of it goes up with
	// refresh_tunnels; one already-ACTIVE port per network is enough (no
	// status change on the server, no storm). A network whose refresh is
	// out already is not asked again.
	r.refreshNets = map[string]bool{}
	for _, id := range sortedKeys(a.refreshNets) {
		if a.refreshOut[id] {
			continue
		}
		if !r.upNets[id] {
			for _, pid := range sortedKeys(a.ports) {
				p := a.ports[pid]
				if !p.inflight && p.wired == wiredUp && p.tagOK && p.dev != nil && p.dev.NetworkID == id {
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
	if len(r.up) == 0 && len(r.down) == 0 {
		return
	}
	r.sent = a.now()
	for _, id := range append(r.up, r.down...) {
		p := a.ports[id]
		p.inflight = true
		r.gens[id] = p.gen
		if p.want == reportUp && !p.seen.IsZero() {
			a.d.Metrics.ObserveAgentBatch(r.sent.Sub(p.seen))
		}
	}
	for id := range r.refreshNets {
		a.refreshOut[id] = true
	}
	a.inflight++
	a.d.Metrics.IncUpdateDeviceList()
	a.log.Debug("agent: update_device_list", "up", r.up, "down", r.down, "refresh_tunnels", r.refresh, "in_flight", a.inflight)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if len(r.readded) > 0 {
			start := time.Now()
			_, err := a.d.Plugin.UpdateDeviceList(ctx, nil, r.readded, false)
			a.observeRPC("update_device_list", time.Since(start), err)
			if err != nil {
				r.err = err
				a.deliver(ctx, r)
				return
			}
		}
		start := time.Now()
		r.res, r.err = a.d.Plugin.UpdateDeviceList(ctx, r.up, r.down, r.refresh)
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
	for id := range r.refreshNets {
		delete(a.refreshOut, id)
	}
	for id := range r.gens {
		if p := a.ports[id]; p != nil {
			p.inflight = false
		}
	}
	if r.err != nil {
		a.reportFailed(append(r.up, r.down...), r.err)
		return
	}
	for _, id := range r.readded {
		if p := a.ports[id]; p != nil {
			p.reAdded = false
		}
	}
	for id := range r.refreshNets {
		if a.refreshNets[id] {
			delete(a.refreshNets, id)
			// Only flows that output to a tunnel port need the FDB back
			// before the sweep; with no tunnel port there is none, and
			// l2pop sends nothing when the network has no other host.
			// The FDB may also have come before the reply (the server
			// casts it while it handles the call).
			got, ok := a.fdbSeen[id]
			if !a.swept && len(a.tunnels) > 0 && !(ok && !got.Before(r.sent)) {
				a.fdbAwait[id] = r.replied.Add(a.opt.FDBWait)
			}
		}
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
		p.failures = 0
		if !p.seen.IsZero() {
			a.d.Metrics.ObservePortWiring(r.replied.Sub(p.seen))
			p.seen = time.Time{}
		}
	}
	for _, id := range r.res.Down {
		ok[id] = true
		p := a.ports[id]
		if p == nil || p.gen != r.gens[id] || p.want != reportDown {
			continue
		}
		p.want = reportNone
		p.failures = 0
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

func (a *Agent) reportFailed(ids []string, err error) {
	now := a.now()
	for _, id := range ids {
		if p := a.ports[id]; p != nil {
			p.failures++
			p.retryAt = now.Add(a.backoff(p.failures))
		}
	}
	a.log.Warn("agent: update_device_list failed; retrying", "ports", len(ids), "err", errString(err))
}

// updateSync computes whether the agent is in sync and publishes it.
func (a *Agent) updateSync() {
	in := a.swept && a.dataplaneComplete() && len(a.dirtyOwner) == 0
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

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
