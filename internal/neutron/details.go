package neutron

import (
	"context"
	"encoding/json"
	"errors"
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
	status := p.Status
	if p.DeviceOwner == DeviceOwnerDVRInterface {
		// A distributed router port is bound per host (its distributed bindings): without
		// this host's binding the server answers get_device_details with the device alone
		// (get_bound_port_context: "Binding info for DVR port ... not found") and swallows
		// an update_device_up for it, l2pop included — a port reported up then stays DOWN
		// for this host and its network's FDB never comes. Unbound until the binding is
		// there (its creation is pushed); its status is this host's.
		db := p.DistributedBindingOn(host)
		if db == nil {
			return d, nil
		}
		status = db.Status
	}
	d.Bound = true
	d.DeviceID = p.DeviceID
	d.NetworkID = p.NetworkID
	d.PortID = p.ID
	d.MACAddress = NormalizeMAC(p.MACAddress)
	d.AdminStateUp = p.AdminStateUp
	d.Status = status
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

// ErrUnavailable is wrapped by the reason DevicesDetails gives for a device whose
// objects could not be pulled: the server's answer did not come (an RPC error, a
// timeout, the broker down, an error the server raised). An outage: it says nothing
// about the device, which is asked for again later (the reference retries its failed
// devices the same way).
var ErrUnavailable = errors.New("neutron: server unavailable")

// DevicesDetails is get_devices_details_list_and_failed_devices served from the cache:
// ports (and then their networks) not yet cached are fetched with one bulk_pull each
// instead of one RPC per port. failed gives each device whose details could not be
// computed and why: an error wrapping ErrUnavailable when a pull of its port or network
// failed, one wrapping ErrBadReply when the server returned its port or network in a
// form that could not be decoded (the rest of the reply is used), else what the cached
// port lacks (no ACTIVE binding). A port or network the server does not have is no
// failure: the device is unbound, or its details lack the network's MTU and QoS policy,
// as they do for the reference's server.
func (c *Cache) DevicesDetails(ctx context.Context, devices []string, host string, agentRestarted bool) (details []DeviceDetails, failed map[string]error) {
	failed = map[string]error{}
	ports := newPullOutcome(TypePort, c.Ensure(ctx, TypePort, Filter{"id": devices}, agentRestarted))
	if ports.err != nil {
		slog.Warn("neutron: bulk_pull ports for device details", "err", ports.err, "devices", len(devices))
	}
	var nets []string
	seen := map[string]bool{}
	for _, dev := range devices {
		if p := c.Port(dev); p != nil && !seen[p.NetworkID] {
			seen[p.NetworkID] = true
			nets = append(nets, p.NetworkID)
		}
	}
	var networks pullOutcome
	if len(nets) > 0 {
		networks = newPullOutcome(TypeNetwork, c.Ensure(ctx, TypeNetwork, Filter{"id": nets}, agentRestarted))
		if networks.err != nil {
			slog.Warn("neutron: bulk_pull networks for device details", "err", networks.err)
		}
	}
	for _, dev := range devices {
		p := c.Port(dev)
		if err := ports.reason(dev, p == nil && !c.IsDeleted(TypePort, dev)); err != nil {
			failed[dev] = fmt.Errorf("device %s: %w", dev, err)
			continue
		}
		if p != nil {
			missing := c.Network(p.NetworkID) == nil && !c.IsDeleted(TypeNetwork, p.NetworkID)
			if err := networks.reason(p.NetworkID, missing); err != nil {
				failed[dev] = fmt.Errorf("device %s: its network: %w", dev, err)
				continue
			}
		}
		d, err := c.DeviceDetails(dev, host)
		if err != nil {
			slog.Warn("neutron: device details", "device", dev, "err", err)
			failed[dev] = err
			continue
		}
		details = append(details, d)
	}
	return details, failed
}

// pullOutcome is what the error of one Ensure says about each object it asked for.
type pullOutcome struct {
	rtype  string
	err    error
	bad    map[string]error // objects returned that could not be decoded, by id
	anyBad error            // one such object whose id could not be read: any object missing may be it
	failed bool             // the pull itself failed (SplitPullError): objects missing are unavailable
}

func newPullOutcome(rtype string, err error) pullOutcome {
	o := pullOutcome{rtype: rtype, err: err}
	bad, failed := SplitPullError(err)
	o.failed = failed
	for _, b := range bad {
		e := fmt.Errorf("%w: %s %q could not be decoded: %w", ErrBadReply, rtype, b.ID, b.Err)
		if b.ID == "" {
			o.anyBad = e
			continue
		}
		if o.bad == nil {
			o.bad = map[string]error{}
		}
		o.bad[b.ID] = e
	}
	return o
}

// reason is why object id cannot be used (nil when it can), missing saying whether the
// cache has neither it nor its deletion.
func (o pullOutcome) reason(id string, missing bool) error {
	if e, ok := o.bad[id]; ok {
		return e
	}
	if !missing {
		return nil
	}
	if o.failed {
		return fmt.Errorf("%w: bulk_pull %s: %w", ErrUnavailable, o.rtype, o.err)
	}
	return o.anyBad
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
