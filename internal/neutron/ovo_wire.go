package neutron

import (
	"encoding/json"
	"fmt"
)

// Single-pass decoding. Nested json.Unmarshaler implementations make encoding/json skip
// and then re-validate every nested object once per nesting level; a Port (four levels
// deep at the binding segment) was scanned about ten times. The wire types below mirror
// the public ones with every nested object as a plain vo[T], so a whole object decodes in
// one json.Unmarshal, after which names and versions are checked and the values copied
// into the public types.

// vo is a versioned-object envelope with its data decoded in place.
type vo[T any] struct {
	Name    string `json:"versioned_object.name"`
	Version string `json:"versioned_object.version"`
	Data    T      `json:"versioned_object.data"`
}

// check verifies the envelope's name (want, or alt when given) and major version.
func (v *vo[T]) check(want, alt, version string) error {
	if v.Name != want && (alt == "" || v.Name != alt) {
		if v.Name == "" {
			return fmt.Errorf("ovo: expected %s object, got no versioned_object.name", want)
		}
		return fmt.Errorf("ovo: expected %s object, got %q", want, v.Name)
	}
	if !compatible(v.Version, version) {
		return &VersionError{Name: v.Name, Version: v.Version, Want: version}
	}
	return nil
}

// convList checks every envelope of in and converts its data.
func convList[W, T any](in []vo[W], want, alt, version string, conv func(*W) (T, error)) ([]T, error) {
	if in == nil {
		return nil, nil
	}
	out := make([]T, len(in))
	for i := range in {
		if err := in[i].check(want, alt, version); err != nil {
			return nil, err
		}
		v, err := conv(&in[i].Data)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func same[W, T any](f func(*W) T) func(*W) (T, error) {
	return func(w *W) (T, error) { return f(w), nil }
}

// Leaf data types: the public types without their envelope-decoding methods.
type (
	bindingData PortBinding
	segData     NetworkSegment
	ipAllocData IPAllocation
	aapData     AllowedAddressPair
	secData     PortSecurity
	poolData    IPAllocationPool
	dnsData     DNSNameServer
	routeData   Route
	ruleData    SecurityGroupRule
	addrData    AddressAssociation
)

// Wire types: outer fields shadow the embedded plain type's nested-object fields.
type (
	levelPlain PortBindingLevel
	levelWire  struct {
		levelPlain
		Segment *vo[segData] `json:"segment"`
	}
	portPlain Port
	portWire  struct {
		portPlain
		AllowedAddressPairs []vo[aapData]     `json:"allowed_address_pairs"`
		Bindings            []vo[bindingData] `json:"bindings"`
		BindingLevels       []vo[levelWire]   `json:"binding_levels"`
		DistributedBindings []vo[bindingData] `json:"distributed_bindings"`
		FixedIPs            []vo[ipAllocData] `json:"fixed_ips"`
		Security            *vo[secData]      `json:"security"`
		Hints               *vo[hintsData]    `json:"hints"`
	}
	// hintsData is PortHints 1.0 (Port 1.8).
	hintsData struct {
		PortID string   `json:"port_id"`
		Hints  MiscDict `json:"hints"`
	}
	networkPlain Network
	networkWire  struct {
		networkPlain
		Security *vo[secData]  `json:"security"`
		Segments []vo[segData] `json:"segments"`
	}
	subnetPlain Subnet
	subnetWire  struct {
		subnetPlain
		AllocationPools []vo[poolData]  `json:"allocation_pools"`
		DNSNameservers  []vo[dnsData]   `json:"dns_nameservers"`
		HostRoutes      []vo[routeData] `json:"host_routes"`
	}
	sgPlain SecurityGroup
	sgWire  struct {
		sgPlain
		Rules []vo[ruleData] `json:"rules"`
	}
	agPlain AddressGroup
	agWire  struct {
		agPlain
		Addresses []vo[addrData] `json:"addresses"`
	}
)

// decodeTop decodes a whole top-level object and checks its own envelope.
func decodeTop[W any](b []byte, w *vo[W], name string) error {
	err := json.Unmarshal(b, w)
	if w.Name == "" && err != nil {
		return fmt.Errorf("ovo: %s: %w", name, err)
	}
	if cerr := w.check(name, "", ResourceVersions[name]); cerr != nil {
		return cerr
	}
	if err != nil {
		return fmt.Errorf("ovo: %s %s: %w", name, w.Version, err)
	}
	return nil
}

func optional[W, T any](v *vo[W], want, alt, version string, conv func(*W) T) (*T, error) {
	if v == nil {
		return nil, nil
	}
	if err := v.check(want, alt, version); err != nil {
		return nil, err
	}
	t := conv(&v.Data)
	return &t, nil
}

func segment(d *segData) NetworkSegment { return NetworkSegment(*d) }
func security(d *secData) PortSecurity  { return PortSecurity(*d) }

func decodePort(b []byte, p *Port) error {
	var w vo[portWire]
	if err := decodeTop(b, &w, TypePort); err != nil {
		return err
	}
	d := &w.Data
	out := Port(d.portPlain)
	var err error
	binding := same(func(x *bindingData) PortBinding { return PortBinding(*x) })
	if out.AllowedAddressPairs, err = convList(d.AllowedAddressPairs, "AllowedAddressPair", "", "1.0", same(func(x *aapData) AllowedAddressPair { return AllowedAddressPair(*x) })); err != nil {
		return err
	}
	if out.Bindings, err = convList(d.Bindings, "PortBinding", "", "1.0", binding); err != nil {
		return err
	}
	if out.DistributedBindings, err = convList(d.DistributedBindings, "DistributedPortBinding", "PortBinding", "1.0", binding); err != nil {
		return err
	}
	if out.FixedIPs, err = convList(d.FixedIPs, "IPAllocation", "", "1.0", same(func(x *ipAllocData) IPAllocation { return IPAllocation(*x) })); err != nil {
		return err
	}
	if out.Security, err = optional(d.Security, "PortSecurity", "", "1.0", security); err != nil {
		return err
	}
	if out.Hints, err = optional(d.Hints, "PortHints", "", "1.0", func(h *hintsData) MiscDict { return h.Hints }); err != nil {
		return err
	}
	if out.BindingLevels, err = convList(d.BindingLevels, "PortBindingLevel", "", "1.1", func(x *levelWire) (PortBindingLevel, error) {
		l := PortBindingLevel(x.levelPlain)
		var err error
		l.Segment, err = optional(x.Segment, "NetworkSegment", "", "1.0", segment)
		return l, err
	}); err != nil {
		return err
	}
	out.intern()
	*p = out
	return nil
}

func decodeNetwork(b []byte, n *Network) error {
	var w vo[networkWire]
	w.Data.MTU = 1500 // the OVO default when the field is unset
	if err := decodeTop(b, &w, TypeNetwork); err != nil {
		return err
	}
	out := Network(w.Data.networkPlain)
	var err error
	if out.Security, err = optional(w.Data.Security, "NetworkPortSecurity", "PortSecurity", "1.0", security); err != nil {
		return err
	}
	if out.Segments, err = convList(w.Data.Segments, "NetworkSegment", "", "1.0", same(segment)); err != nil {
		return err
	}
	*n = out
	return nil
}

func decodeSubnet(b []byte, s *Subnet) error {
	var w vo[subnetWire]
	if err := decodeTop(b, &w, TypeSubnet); err != nil {
		return err
	}
	out := Subnet(w.Data.subnetPlain)
	var err error
	if out.AllocationPools, err = convList(w.Data.AllocationPools, "IPAllocationPool", "", "1.0", same(func(x *poolData) IPAllocationPool { return IPAllocationPool(*x) })); err != nil {
		return err
	}
	if out.DNSNameservers, err = convList(w.Data.DNSNameservers, "DNSNameServer", "", "1.0", same(func(x *dnsData) DNSNameServer { return DNSNameServer(*x) })); err != nil {
		return err
	}
	if out.HostRoutes, err = convList(w.Data.HostRoutes, "Route", "", "1.0", same(func(x *routeData) Route { return Route(*x) })); err != nil {
		return err
	}
	*s = out
	return nil
}

func decodeSecurityGroup(b []byte, g *SecurityGroup) error {
	var w vo[sgWire]
	w.Data.Stateful = true // OVO default
	if err := decodeTop(b, &w, TypeSecurityGroup); err != nil {
		return err
	}
	out := SecurityGroup(w.Data.sgPlain)
	var err error
	if out.Rules, err = convList(w.Data.Rules, TypeSecurityGroupRule, "", ResourceVersions[TypeSecurityGroupRule], same(func(x *ruleData) SecurityGroupRule { return SecurityGroupRule(*x) })); err != nil {
		return err
	}
	for i := range out.Rules {
		out.Rules[i].intern()
	}
	*g = out
	return nil
}

func decodeSecurityGroupRule(b []byte, r *SecurityGroupRule) error {
	var w vo[ruleData]
	if err := decodeTop(b, &w, TypeSecurityGroupRule); err != nil {
		return err
	}
	*r = SecurityGroupRule(w.Data)
	r.intern()
	return nil
}

func decodeAddressGroup(b []byte, g *AddressGroup) error {
	var w vo[agWire]
	if err := decodeTop(b, &w, TypeAddressGroup); err != nil {
		return err
	}
	out := AddressGroup(w.Data.agPlain)
	var err error
	if out.Addresses, err = convList(w.Data.Addresses, "AddressAssociation", "", "1.0", same(func(x *addrData) AddressAssociation { return AddressAssociation(*x) })); err != nil {
		return err
	}
	*g = out
	return nil
}
