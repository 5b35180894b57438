package agent

import (
	"log/slog"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/pipeline"
)

// The pipeline (pipeline.Source over the loop's pipeline state) is
// registered first, through the same seam as the OVS firewall
// (internal/secgroup) and any extension (internal/feature), so the loop
// dispatches every owner by its kind and knows no feature's owners.

// tableName is the reference's name of a table of bridge ("table N" when
// it has none).
func (a *Agent) tableName(bridge string, table uint8) string {
	return pipeline.BridgeTableName(a.ps, bridge, table)
}

// computeFlows asks the registered sources for the owners' flows (each
// owner to the source of its kind) and gives a flow without a cookie the
// bridge's.
func (a *Agent) computeFlows(owners []string) (map[string]map[string][]openflow.Flow, map[string]error) {
	flows, errs := a.features.Compute(owners)
	for _, bf := range flows {
		for br, fs := range bf {
			c := a.bridgeCookie(br)
			for i := range fs {
				if fs[i].Cookie == 0 {
					fs[i].Cookie = c
				}
			}
		}
	}
	return flows, errs
}

// bridgeCookie is the cookie the pipeline stamps on the bridge's flows
// (this run's cookie; 1 in a takeover plan, 0 without OpenFlow).
func (a *Agent) bridgeCookie(br string) uint64 { return a.ps.BridgeCookie(br) }

// host is what the agent offers a feature (feature.Host).
type host struct {
	a    *Agent
	name string // the feature's
}

func (h host) Touch(owners ...string) {
	for _, o := range owners {
		h.a.touch(o)
	}
}
func (h host) Layout() feature.BridgeLayout { return h.a.layout }
func (h host) Cookie(bridge string) uint64  { return h.a.bridgeCookie(bridge) }
func (h host) Log() *slog.Logger            { return h.a.log }
func (h host) Now() time.Time               { return h.a.now() }
func (h host) Backoff(failures int) time.Duration {
	return h.a.backoff(failures)
}
func (h host) ObserveRPC(method string, took time.Duration, err error) {
	h.a.observeRPC(method, took, err)
}
func (h host) Notify(data any) { h.a.Notify(featureEvent{name: h.name, data: data}) }

// featurePort is the port as the features see it.
func (a *Agent) featurePort(p *portRec) feature.Port {
	fp := feature.Port{ID: p.id, Name: p.vif.Name, MAC: p.vif.MAC, LocalVLAN: DeadVLAN}
	if p.vif.OFPort > 0 {
		fp.OFPort = uint32(p.vif.OFPort)
	}
	switch p.wired {
	case wiredUp:
		fp.Wiring = feature.WiredUp
		if v, ok := a.maps.VLAN(p.net); ok {
			fp.LocalVLAN = v
		}
	case wiredAdminDown:
		fp.Wiring = feature.WiredAdminDown
	case wiredDead:
		fp.Wiring = feature.WiredDead
	}
	if d := p.dev; d != nil {
		fp.NetworkID, fp.NetworkType, fp.PhysicalNetwork, fp.SegmentationID = d.NetworkID, d.NetworkType, d.PhysicalNetwork, d.SegmentationID
		fp.DeviceOwner = d.DeviceOwner
		if d.MAC != "" {
			fp.MAC = d.MAC
		}
		fp.PortSecurity, fp.SecurityGroups = d.PortSecurity, d.SecurityGroups
		for _, ip := range d.FixedIPs {
			fp.FixedIPs = append(fp.FixedIPs, ip.IP)
		}
		for _, ap := range d.AllowedPairs {
			fp.AllowedAddressPairs = append(fp.AllowedAddressPairs, feature.AddressPair{MAC: ap.MAC, IP: ap.IP})
		}
	}
	if pp := a.ps.Ports[p.id]; pp != nil {
		fp.Filtered = pp.Filtered()
	}
	return fp
}
