package agent

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"time"

	"github.com/ovsagent/ovsagent/internal/firewall"
	"github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/pipeline"
)

// setFirewallPort records the port as the firewall must see it (only with
// the OVS firewall; dead and admin-down ports are not filtered). Whether it
// is filtered at all is pp's decision (pipeline.Port.Filtered): a trusted
// network:* port is passed through here exactly as table 60 passes it.
func (a *Agent) setFirewallPort(p *portRec, pp *pipeline.Port, d *Device, vlan uint16, w wiring) {
	if !a.ps.Config.OVSFirewall() {
		return
	}
	if w != wiredUp {
		a.deleteFirewallPort(p.id)
		return
	}
	mac, _ := net.ParseMAC(d.MAC)
	if mac == nil {
		mac, _ = net.ParseMAC(p.vif.MAC)
	}
	fp := firewall.Port{ID: p.id, OFPort: uint32(p.vif.OFPort), VLAN: vlan, MAC: mac, PortSecurity: pp.Filtered()}
	if a.fw.Config.ExplicitlyEgressDirect {
		fp.EgressDirectPatch = a.egressDirectPatch(d)
	}
	if fp.PortSecurity {
		// An unfiltered port's groups are not fetched (the reference's
		// server leaves trusted ports out of security group info).
		fp.SecurityGroupIDs = slices.Clone(d.SecurityGroups)
		sort.Strings(fp.SecurityGroupIDs)
	}
	for _, ip := range d.FixedIPs {
		if ad, err := netip.ParseAddr(ip.IP); err == nil {
			fp.FixedIPs = append(fp.FixedIPs, ad)
		} else {
			fp.Invalid = append(fp.Invalid, fmt.Sprintf("fixed ip %q", ip.IP))
		}
	}
	for _, ap := range d.AllowedPairs {
		pfx, ok := parsePrefix(ap.IP)
		if !ok {
			fp.AllowedAddressPairs = append(fp.AllowedAddressPairs, firewall.AddressPair{Invalid: fmt.Sprintf("allowed address pair %q", ap.IP)})
			continue
		}
		var m net.HardwareAddr
		if ap.MAC != "" {
			m, _ = net.ParseMAC(ap.MAC)
		}
		fp.AllowedAddressPairs = append(fp.AllowedAddressPairs, firewall.AddressPair{MAC: m, IP: pfx})
	}
	old, had := a.fwPorts[p.id]
	if had && !slices.Equal(old.SecurityGroupIDs, fp.SecurityGroupIDs) {
		a.sgDirty = true
	}
	if !had {
		for _, g := range fp.SecurityGroupIDs {
			if _, ok := a.fw.Groups[g]; !ok {
				a.sgDirty = true
			}
		}
	}
	a.fwPorts[p.id] = fp
	a.fwChanged = true
}

func (a *Agent) deleteFirewallPort(id string) {
	if _, ok := a.fwPorts[id]; ok {
		delete(a.fwPorts, id)
		a.fwChanged = true
	}
}

// updateFirewall builds the firewall's next state (re-reading security
// groups when they changed) and dirties the owners whose flows differ.
func (a *Agent) updateFirewall(ctx context.Context) {
	if !a.ps.Config.OVSFirewall() {
		a.sgDirty = false
		return
	}
	if !a.fwChanged && !a.sgDirty && len(a.fw.Ports) > 0 {
		return
	}
	next := &firewall.State{Config: a.fw.Config, Ports: make(map[string]firewall.Port, len(a.fwPorts)), Groups: a.fw.Groups, Members: a.fw.Members}
	for id, p := range a.fwPorts {
		next.Ports[id] = p
	}
	if a.sgDirty && !a.sgRetry.waiting(a.now()) {
		ids := map[string]bool{}
		for _, p := range next.Ports {
			for _, g := range p.SecurityGroupIDs {
				ids[g] = true
			}
		}
		list := sortedKeys(ids)
		groups, members, err := map[string]firewall.SecurityGroup{}, map[string][]firewall.Member{}, error(nil)
		if len(list) > 0 {
			start := time.Now()
			groups, members, err = a.d.Cache.SecurityGroups(ctx, list)
			a.observeRPC("security_group_info", time.Since(start), err)
		}
		if err != nil {
			a.sgRetry.fail(a.now(), a.backoff)
			a.log.Warn("agent: security groups unavailable; retrying", "err", err)
		} else {
			a.sgRetry.succeeded()
			a.sgDirty = false
			next.Groups, next.Members = groups, members
		}
	}
	if a.installedFW != nil && len(next.Ports) > 0 {
		a.conj = firewall.RecoverConjIDs(a.installedFW, next)
		a.installedFW = nil
	}
	a.reportFirewallProblems(next)
	ids, changed := firewall.Update(a.fw, next, a.conj)
	for _, o := range changed {
		a.dirtyOwner[o] = true
	}
	if len(a.fw.Ports) == 0 && len(a.applied[a.layout.Integration]) == 0 {
		a.dirtyOwner[firewall.OwnerBase] = true
	}
	a.fw, a.conj = next, ids
	a.fwChanged = false
}

// installedFlows is implemented by Flows edges that can list what a bridge
// held when they adopted it.
type installedFlows interface {
	InstalledFlows(bridge string) []openflow.Flow
}

func (a *Agent) takeInstalledFirewall() {
	if !a.ps.Config.OVSFirewall() {
		return
	}
	src, ok := a.d.Flows.(installedFlows)
	if !ok {
		return
	}
	var fw []openflow.Flow
	for _, f := range src.InstalledFlows(a.layout.Integration) {
		if pipeline.IsFirewallTable(f.Table) {
			fw = append(fw, f)
		}
	}
	if len(fw) > 0 {
		a.installedFW = fw
	}
}

// reportFirewallProblems logs and counts what the firewall skips in st (a
// rule, member, address pair or port value it cannot represent), each once
// while it lasts: the state is rebuilt on every change, the problem is not
// new each time.
func (a *Agent) reportFirewallProblems(st *firewall.State) {
	probs := firewall.Problems(st)
	if len(probs) == 0 && len(a.fwProblems) == 0 {
		return
	}
	seen := make(map[string]bool, len(probs))
	for _, p := range probs {
		k := p.Kind + "\x00" + p.Owner + "\x00" + p.ID + "\x00" + p.Detail
		seen[k] = true
		if a.fwProblems[k] {
			continue
		}
		a.d.Metrics.IncFirewallSkipped(p.Kind, p.Reason)
		a.log.Warn("agent: firewall skips a value it cannot represent", "kind", p.Kind, "owner", p.Owner, "id", p.ID, "reason", p.Reason, "detail", p.Detail)
	}
	a.fwProblems = seen
}

// egressDirectPatch is the br-int port accepted egress unicast of a port on
// the device's network leaves by with explicitly_egress_direct, as the
// reference's install_accepted_egress_direct_flow picks it: patch-tun for
// tunnel networks, int-<bridge> of the physical network for VLAN networks,
// none (0) for flat and local networks or a missing port.
func (a *Agent) egressDirectPatch(d *Device) uint32 {
	switch pipeline.NetworkType(d.NetworkType) {
	case pipeline.TypeVXLAN, pipeline.TypeGRE, pipeline.TypeGeneve:
		return a.layout.PatchTun
	case pipeline.TypeVLAN:
		if pb, ok := a.layout.Physical[d.PhysicalNetwork]; ok && d.PhysicalNetwork != "" {
			return pb.IntOFPort
		}
	}
	return 0
}
