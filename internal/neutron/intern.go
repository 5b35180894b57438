package neutron

import "unique"

// Decoded objects share their repeated strings. encoding/json allocates every string it
// decodes, so at 1,000 ports the cache held a thousand copies of the network, subnet,
// segment and security group ids, of the host, of "compute:nova", and five copies of
// each port's own id (the port's, its binding's, its binding level's, its fixed IP's and
// its port security's). Values that other objects repeat go through the unique package
// (its map holds them weakly: a value no object uses any more is dropped by the GC);
// a port's own id, which only the port repeats, is shared within the port.

// intern returns the canonical copy of s.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// self returns own when s equals it (one copy within an object), else s.
func self(s, own string) string {
	if s == own {
		return own
	}
	return s
}

func (p *Port) intern() {
	p.ProjectID = intern(p.ProjectID)
	p.NetworkID = intern(p.NetworkID)
	p.DeviceOwner = intern(p.DeviceOwner)
	p.Status = intern(p.Status)
	p.QosPolicyID = intern(p.QosPolicyID)
	p.QosNetworkPolicyID = intern(p.QosNetworkPolicyID)
	for i := range p.SecurityGroupIDs {
		p.SecurityGroupIDs[i] = intern(p.SecurityGroupIDs[i])
	}
	for i := range p.AllowedAddressPairs {
		p.AllowedAddressPairs[i].PortID = self(p.AllowedAddressPairs[i].PortID, p.ID)
	}
	for _, bs := range [][]PortBinding{p.Bindings, p.DistributedBindings} {
		for i := range bs {
			b := &bs[i]
			b.PortID = self(b.PortID, p.ID)
			b.Host = intern(b.Host)
			b.VIFType = intern(b.VIFType)
			b.VNICType = intern(b.VNICType)
			b.Status = intern(b.Status)
		}
	}
	for i := range p.BindingLevels {
		l := &p.BindingLevels[i]
		l.PortID = self(l.PortID, p.ID)
		l.Host = intern(l.Host)
		l.Driver = intern(l.Driver)
		l.SegmentID = intern(l.SegmentID)
		if l.Segment != nil {
			l.Segment.intern()
		}
	}
	for i := range p.FixedIPs {
		f := &p.FixedIPs[i]
		f.PortID = self(f.PortID, p.ID)
		f.SubnetID = intern(f.SubnetID)
		f.NetworkID = intern(f.NetworkID)
	}
	if p.Security != nil {
		p.Security.ID = self(p.Security.ID, p.ID)
	}
}

// intern: a segment is repeated in every port bound to it.
func (s *NetworkSegment) intern() {
	s.ID = intern(s.ID)
	s.NetworkID = intern(s.NetworkID)
	s.Name = intern(s.Name)
	s.NetworkType = intern(s.NetworkType)
	s.PhysicalNetwork = intern(s.PhysicalNetwork)
	for i := range s.Hosts {
		s.Hosts[i] = intern(s.Hosts[i])
	}
}

func (r *SecurityGroupRule) intern() {
	r.ProjectID = intern(r.ProjectID)
	r.SecurityGroupID = intern(r.SecurityGroupID)
	r.RemoteGroupID = intern(r.RemoteGroupID)
	r.Direction = intern(r.Direction)
	r.Ethertype = intern(r.Ethertype)
	r.Protocol = FlexString(intern(string(r.Protocol)))
	r.RemoteAddressGroupID = intern(r.RemoteAddressGroupID)
}
