package agent

import (
	"context"
	"net/netip"
	"slices"

	"github.com/ovsagent/ovsagent/internal/pipeline"
)

// localNet finds the local mapping of an l2pop network entry (keyed by
// network id and segment, like the reference).
func (a *Agent) localNet(netID string, seg *int) (pipeline.NetKey, bool) {
	for k := range a.ps.Networks {
		if k.NetworkID != netID {
			continue
		}
		if seg == nil || !k.HasSeg || int(k.SegID) == *seg {
			return k, true
		}
	}
	return pipeline.NetKey{}, false
}

func (a *Agent) ownIP(ip netip.Addr) bool {
	own, err := netip.ParseAddr(a.opt.LocalIP)
	return err == nil && own == ip
}

// fdbApply applies add_fdb_entries / remove_fdb_entries.
func (a *Agent) fdbApply(entries FDBEntries, add bool) {
	for netID, fn := range entries {
		key, ok := a.localNet(netID, fn.SegmentID)
		if !ok {
			a.log.Debug("agent: l2pop entry for a network without local port; ignored", "network", netID)
			continue
		}
		m := a.fdb[netID]
		if m == nil {
			m = map[netip.Addr]*pipeline.RemoteFDB{}
			a.fdb[netID] = m
			a.ps.Networks[key].FDB = m
		}
		for ipStr, pairs := range fn.Ports {
			ip, err := netip.ParseAddr(ipStr)
			if err != nil {
				a.log.Warn("agent: l2pop entry with a bad agent IP; dropped", "network", netID, "ip", ipStr)
				a.d.Metrics.IncMalformed("q-agent-notifier-l2population-update", "bad-agent-ip")
				continue
			}
			if a.ownIP(ip) {
				continue
			}
			for bad := pipeline.ApplyRemote(m, ip, pairs, add); bad > 0; bad-- {
				a.d.Metrics.IncMalformed("q-agent-notifier-l2population-update", "bad-fdb-entry")
			}
		}
		a.dirtyOwner[pipeline.OwnerNetwork(key)] = true
		if add {
			delete(a.fdbAwait, netID)
			a.fdbSeen[netID] = a.now()
		}
	}
}

// fdbChgIP applies update_fdb_entries' chg_ip (ARP responder entries).
func (a *Agent) fdbChgIP(u FDBUpdate) {
	for netID, agents := range u.ChgIP {
		m := a.fdb[netID]
		if m == nil {
			continue
		}
		for ipStr, chg := range agents {
			ip, err := netip.ParseAddr(ipStr)
			if err != nil || a.ownIP(ip) {
				continue
			}
			pipeline.ChangeRemote(m, ip, chg.Before, chg.After)
		}
		for k := range a.ps.Networks {
			if k.NetworkID == netID {
				a.dirtyOwner[pipeline.OwnerNetwork(k)] = true
			}
		}
	}
}

func (a *Agent) tunnelTypeOK(typ string) bool {
	return slices.Contains(a.opt.TunnelTypes, typ)
}

// tunnelUpdate handles tunnel_update (and tunnel_sync's reply): without
// l2pop every endpoint gets a tunnel port.
func (a *Agent) tunnelUpdate(e TunnelUpdate) {
	ip, err := netip.ParseAddr(e.IP)
	if err != nil {
		a.d.Metrics.IncMalformed("q-agent-notifier-tunnel-update", "bad-ip")
		return
	}
	if a.opt.L2Population || !a.tunnelTypeOK(e.Type) || a.ownIP(ip) {
		return
	}
	a.endpoints[pipeline.TunnelKey{IP: ip, Type: pipeline.NetworkType(e.Type)}] = true
}

func (a *Agent) tunnelDelete(e TunnelDelete) {
	ip, err := netip.ParseAddr(e.IP)
	if err != nil {
		a.d.Metrics.IncMalformed("q-agent-notifier-tunnel-delete", "bad-ip")
		return
	}
	if e.Type == "" { // an old server names no type: every type to that IP
		for k := range a.endpoints {
			if k.IP == ip {
				delete(a.endpoints, k)
			}
		}
		return
	}
	delete(a.endpoints, pipeline.TunnelKey{IP: ip, Type: pipeline.NetworkType(e.Type)})
}

// reconcileTunnels makes the tunnel ports on br-tun those the state needs:
// with l2pop the remote agents of the local networks' FDB, without it every
// known endpoint. Adopted ports nobody claims stay until the first sync.
func (a *Agent) reconcileTunnels(ctx context.Context) {
	if a.layout.Tunnel == "" {
		return
	}
	// one port per remote IP and type, as neutron names them (vxlan-X, gre-X)
	want := a.endpoints
	if a.opt.L2Population {
		want = pipeline.WantedTunnels(a.ps, a.fdb)
	}
	for key := range want {
		ip, typ := key.IP, string(key.Type)
		if _, ok := a.tunnels[key]; ok {
			continue
		}
		tp, err := a.d.Switch.EnsureTunnelPort(ctx, TunnelPort{Type: typ, RemoteIP: ip.String(), LocalIP: a.opt.LocalIP})
		if err != nil || tp.OFPort <= 0 {
			a.log.Warn("agent: tunnel port not created; retrying with the next batch", "remote_ip", ip, "type", typ, "err", err)
			a.flowRetry.fail(a.now(), a.backoff)
			a.dirtyOwner[pipeline.OwnerTunnel(ip)] = true
			continue
		}
		a.tunnels[key] = tp
		a.ps.Tunnels[key] = &pipeline.Tunnel{RemoteIP: ip, Type: key.Type, Ofport: uint32(tp.OFPort)}
		a.dirtyTunnel(ip, typ)
	}
	for key, tp := range a.tunnels {
		if want[key] {
			continue
		}
		if !a.swept {
			continue // adopted: the FDB refresh or tunnel_sync may still claim it
		}
		if err := a.d.Switch.DeleteTunnelPort(ctx, tp); err != nil {
			a.log.Warn("agent: deleting tunnel port failed", "port", tp.Name, "err", err)
			continue
		}
		delete(a.tunnels, key)
		delete(a.ps.Tunnels, key)
		a.dirtyTunnel(key.IP, tp.Type)
	}
}
