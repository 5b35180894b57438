package neutron

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
)

// FixedIP is a device-details fixed IP.
type FixedIP struct {
	SubnetID  string `json:"subnet_id"`
	IPAddress string `json:"ip_address"`
}

// AddressPair is a device-details allowed address pair (IPAddress may be a CIDR).
type AddressPair struct {
	MACAddress string `json:"mac_address"`
	IPAddress  string `json:"ip_address"`
}

// DeviceDetails is what the reference CacheBackedPluginApi.get_device_details computes
// from the cache (spec §2.1). When Bound is false only Device (and NoActiveBinding) are
// meaningful: the port is unknown, unbound, or its active binding is on another host.
type DeviceDetails struct {
	Device          string
	Bound           bool
	NoActiveBinding bool

	DeviceID            string
	NetworkID           string
	PortID              string
	MACAddress          string
	AdminStateUp        bool
	Status              string
	NetworkType         string
	SegmentationID      *int
	PhysicalNetwork     string
	FixedIPs            []FixedIP
	DeviceOwner         string
	AllowedAddressPairs []AddressPair
	PortSecurityEnabled bool
	QosPolicyID         string
	NetworkQosPolicyID  string
	Profile             map[string]any
	VIFType             string
	VNICType            string
	SecurityGroups      []string
	MigratingTo         string
	// Hints is the port's PortHints dict (Port 1.8+, the port_hints ml2
	// extension); unset when the port has none or the server predates it.
	Hints MiscDict

	// Beyond the reference dict, for the agent's convenience.
	Port    *Port    `json:"-"`
	Network *Network `json:"-"`
	MTU     int      `json:"-"`
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// MarshalJSON renders the reference dict shape.
func (d DeviceDetails) MarshalJSON() ([]byte, error) {
	if !d.Bound {
		m := map[string]any{"device": d.Device}
		if d.NoActiveBinding {
			m["no_active_binding"] = true
		}
		return json.Marshal(m)
	}
	fips := d.FixedIPs
	if fips == nil {
		fips = []FixedIP{}
	}
	aaps := d.AllowedAddressPairs
	if aaps == nil {
		aaps = []AddressPair{}
	}
	sgs := d.SecurityGroups
	if sgs == nil {
		sgs = []string{}
	}
	profile := d.Profile
	if profile == nil {
		profile = map[string]any{}
	}
	var segID any
	if d.SegmentationID != nil {
		segID = *d.SegmentationID
	}
	return json.Marshal(map[string]any{
		"device":                d.Device,
		"device_id":             d.DeviceID,
		"network_id":            d.NetworkID,
		"port_id":               d.PortID,
		"mac_address":           d.MACAddress,
		"admin_state_up":        d.AdminStateUp,
		"status":                d.Status,
		"network_type":          d.NetworkType,
		"segmentation_id":       segID,
		"physical_network":      nullable(d.PhysicalNetwork),
		"fixed_ips":             fips,
		"device_owner":          d.DeviceOwner,
		"allowed_address_pairs": aaps,
		"port_security_enabled": d.PortSecurityEnabled,
		"qos_policy_id":         nullable(d.QosPolicyID),
		"qos_network_policy_id": nullable(d.NetworkQosPolicyID),
		"profile":               profile,
		"vif_type":              d.VIFType,
		"vnic_type":             d.VNICType,
		"security_groups":       sgs,
		"migrating_to":          nullable(d.MigratingTo),
		"hints":                 d.Hints,
	})
}

// NormalizeMAC renders a MAC the way the reference does (netaddr mac_unix_expanded:
// lower case, two digits per octet); anything unparsable is returned lower-cased.
func NormalizeMAC(s string) string {
	hw, err := net.ParseMAC(s)
	if err != nil {
		return strings.ToLower(s)
	}
	return hw.String()
}

// MigratingTo returns the migrating_to host from any ACTIVE binding's profile, or "".
func MigratingTo(bindings []PortBinding) string {
	for _, b := range bindings {
		if b.Status != BindingActive {
			continue
		}
		if s, ok := b.Profile.Get("migrating_to").(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// ComputeDeviceDetails builds the device details of port p (nil: unknown) for host, with
// net the port's cached network (may be nil). Pure.
func ComputeDeviceDetails(device string, p *Port, network *Network, host string) (DeviceDetails, error) {
	d := DeviceDetails{Device: device}
	if p == nil {
		return d, nil
	}
	seg := fresherSegment(p.Segment(), network)
	if seg == nil {
		return d, nil
	}
	binding := p.ActiveBinding()
	if binding == nil {
		return d, fmt.Errorf("device %s: no ACTIVE binding", device)
	}
	migrating := MigratingTo(p.Bindings)
	if migrating == "" && strings.HasPrefix(p.DeviceOwner, "compute:") && binding.Host != host {
		d.NoActiveBinding = true
		return d, nil
	}
	d.Bound = true
	d.DeviceID = p.DeviceID
	d.NetworkID = p.NetworkID
	d.PortID = p.ID
	d.MACAddress = NormalizeMAC(p.MACAddress)
	d.AdminStateUp = p.AdminStateUp
	d.Status = p.Status
	d.NetworkType = seg.NetworkType
	d.SegmentationID = seg.SegmentationID
	d.PhysicalNetwork = seg.PhysicalNetwork
	for _, f := range p.FixedIPs {
		d.FixedIPs = append(d.FixedIPs, FixedIP{SubnetID: f.SubnetID, IPAddress: f.IPAddress})
	}
	d.DeviceOwner = p.DeviceOwner
	for _, a := range p.AllowedAddressPairs {
		d.AllowedAddressPairs = append(d.AllowedAddressPairs, AddressPair{MACAddress: a.MACAddress, IPAddress: a.IPAddress})
	}
	d.PortSecurityEnabled = p.PortSecurityEnabled()
	d.QosPolicyID = p.QosPolicyID
	d.Profile = binding.Profile.Map()
	d.VIFType = binding.VIFType
	d.VNICType = binding.VNICType
	d.SecurityGroups = append([]string(nil), p.SecurityGroupIDs...)
	d.MigratingTo = migrating
	if p.Hints != nil {
		d.Hints = *p.Hints
	}
	d.Port = p
	if network != nil {
		d.Network = network
		d.NetworkQosPolicyID = network.QosPolicyID
		d.MTU = network.MTU
	}
	return d, nil
}

// DeviceDetails computes one device's details from the cache alone (no RPC).
func (c *Cache) DeviceDetails(device, host string) (DeviceDetails, error) {
	p := c.Port(device)
	var n *Network
	if p != nil {
		n = c.Network(p.NetworkID)
	}
	return ComputeDeviceDetails(device, p, n, host)
}

// DevicesDetails is get_devices_details_list_and_failed_devices served from the cache:
// ports (and then their networks) not yet cached are fetched with one bulk_pull each
// instead of one RPC per port. A failed pull fails the devices it concerned.
func (c *Cache) DevicesDetails(ctx context.Context, devices []string, host string, agentRestarted bool) (details []DeviceDetails, failed []string) {
	pullFailed := false
	if err := c.Ensure(ctx, TypePort, Filter{"id": devices}, agentRestarted); err != nil {
		slog.Warn("neutron: bulk_pull ports for device details", "err", err, "devices", len(devices))
		pullFailed = true
	}
	var nets []string
	seen := map[string]bool{}
	for _, dev := range devices {
		if p := c.Port(dev); p != nil && !seen[p.NetworkID] {
			seen[p.NetworkID] = true
			nets = append(nets, p.NetworkID)
		}
	}
	if len(nets) > 0 {
		if err := c.Ensure(ctx, TypeNetwork, Filter{"id": nets}, agentRestarted); err != nil {
			slog.Warn("neutron: bulk_pull networks for device details", "err", err)
		}
	}
	for _, dev := range devices {
		if pullFailed && c.Port(dev) == nil && !c.IsDeleted(TypePort, dev) {
			failed = append(failed, dev)
			continue
		}
		d, err := c.DeviceDetails(dev, host)
		if err != nil {
			slog.Warn("neutron: device details", "device", dev, "err", err)
			failed = append(failed, dev)
			continue
		}
		details = append(details, d)
	}
	return details, failed
}

// fresherSegment is the port's bound segment as the network now has it. A
// network_update that changes a VLAN network's segmentation id pushes the
// Network, not its ports: the ports' binding levels keep the old id, and
// the reference learns the new one from get_network_details
// (_update_network_segmentation_id). The cached Network carries the same
// segment, current, so its copy wins.
func fresherSegment(seg *NetworkSegment, network *Network) *NetworkSegment {
	if seg == nil || network == nil || seg.ID == "" {
		return seg
	}
	for i := range network.Segments {
		if s := &network.Segments[i]; s.ID == seg.ID {
			return s
		}
	}
	return seg
}
