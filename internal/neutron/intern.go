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

// internAll replaces each string with its canonical copy.
func internAll(ps ...*string) {
	for _, p := range ps {
		*p = intern(*p)
	}
}

// internSlice replaces each element with its canonical copy.
func internSlice(ss []string) {
	for i := range ss {
		ss[i] = intern(ss[i])
	}
}

// self returns own when s equals it (one copy within an object), else s.
func self(s, own string) string {
	if s == own {
		return own
	}
	return s
}

func (p *Port) intern() {
	internAll(&p.ProjectID, &p.NetworkID, &p.DeviceOwner, &p.Status, &p.QosPolicyID, &p.QosNetworkPolicyID)
	internSlice(p.SecurityGroupIDs)
	for i := range p.AllowedAddressPairs {
		p.AllowedAddressPairs[i].PortID = self(p.AllowedAddressPairs[i].PortID, p.ID)
	}
	for _, bs := range [][]PortBinding{p.Bindings, p.DistributedBindings} {
		for i := range bs {
			b := &bs[i]
			b.PortID = self(b.PortID, p.ID)
			internAll(&b.Host, &b.VIFType, &b.VNICType, &b.Status)
		}
	}
	for i := range p.BindingLevels {
		l := &p.BindingLevels[i]
		l.PortID = self(l.PortID, p.ID)
		internAll(&l.Host, &l.Driver, &l.SegmentID)
		if l.Segment != nil {
			l.Segment.intern()
		}
	}
	for i := range p.FixedIPs {
		f := &p.FixedIPs[i]
		f.PortID = self(f.PortID, p.ID)
		internAll(&f.SubnetID, &f.NetworkID)
	}
	if p.Security != nil {
		p.Security.ID = self(p.Security.ID, p.ID)
	}
}

// intern: a segment is repeated in every port bound to it.
func (s *NetworkSegment) intern() {
	internAll(&s.ID, &s.NetworkID, &s.Name, &s.NetworkType, &s.PhysicalNetwork)
	internSlice(s.Hosts)
}

func (r *SecurityGroupRule) intern() {
	internAll(&r.ProjectID, &r.SecurityGroupID, &r.RemoteGroupID, &r.Direction, &r.Ethertype, &r.RemoteAddressGroupID)
	r.Protocol = FlexString(intern(string(r.Protocol)))
}
