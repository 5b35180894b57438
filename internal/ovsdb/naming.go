package ovsdb

import (
	"crypto/sha1"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/crypto/blake2b"
)

// DeviceNameMaxLen is the kernel's IFNAMSIZ minus the NUL: OVS port and interface
// names that become netdevs must fit in it.
const DeviceNameMaxLen = 15

// interfaceHashLen is how many hex digits of sha1(name) neutron-lib keeps when it
// has to shorten a name (neutron_lib.plugins.utils.INTERFACE_HASH_LEN).
const interfaceHashLen = 6

// Prefixes and placeholder peer of the integration<->physical patch pair
// (neutron_lib.plugins.ml2.ovs_constants).
const (
	PeerIntegrationPrefix = "int-"
	PeerPhysicalPrefix    = "phy-"
	NonexistentPeer       = "nonexistent-peer"
)

// DeadVLANTag is the tag of ports the agent refuses to wire (MAX_VLAN_TAG+1).
const DeadVLANTag = 4095

// InterfaceName is neutron-lib's get_interface_name: prefix+name when it fits in
// 15 characters, otherwise prefix + the head of name + 6 hex of sha1(name), so
// that names the reference agent created are recognised as ours.
func InterfaceName(name, prefix string) (string, error) {
	if len(prefix)+len(name) <= DeviceNameMaxLen {
		return prefix + name, nil
	}
	if len(prefix)+interfaceHashLen > DeviceNameMaxLen {
		return "", fmt.Errorf("ovsdb: interface prefix %q too long", prefix)
	}
	sum := sha1.Sum([]byte(name))
	keep := DeviceNameMaxLen - len(prefix) - interfaceHashLen
	return prefix + name[:keep] + hex.EncodeToString(sum[:])[:interfaceHashLen], nil
}

// PhysPatchNames returns the names of the patch pair between br-int and the
// physical bridge: (int-<bridge> on br-int, phy-<bridge> on the bridge).
func PhysPatchNames(physBridge string) (intSide, physSide string, err error) {
	if intSide, err = InterfaceName(physBridge, PeerIntegrationPrefix); err != nil {
		return "", "", err
	}
	if physSide, err = InterfaceName(physBridge, PeerPhysicalPrefix); err != nil {
		return "", "", err
	}
	return intSide, physSide, nil
}

// TunnelHash selects the IPv6 tunnel-name hash; the reference changed it between
// releases, and a port created by one release is only recognised by the same rule.
type TunnelHash int

const (
	// TunnelHashSHA1 is Zed/2023.1: base32(sha1(ip)).
	TunnelHashSHA1 TunnelHash = iota
	// TunnelHashBlake2b is master: base32(blake2b-160(ip)).
	TunnelHashBlake2b
)

// TunnelPortName is the reference's get_tunnel_name: "<type>-<hash>", the hash
// being the IPv4 address as 8 hex digits (vxlan-0a000002) or, for IPv6, the head
// of lower-case base32 of a digest of the address text, cut so the name is 15
// characters long.
func TunnelPortName(tunnelType, remoteIP string, h TunnelHash) (string, error) {
	addr, err := netip.ParseAddr(remoteIP)
	if err != nil {
		return "", fmt.Errorf("ovsdb: tunnel name: invalid remote IP %q", remoteIP)
	}
	hashLen := DeviceNameMaxLen - len(tunnelType) - 1
	if hashLen < 8 { // room for the IPv4 form; the reference's types all leave it
		return "", fmt.Errorf("ovsdb: tunnel name: type %q too long", tunnelType)
	}
	if addr.Is4() {
		b := addr.As4()
		return fmt.Sprintf("%s-%02x%02x%02x%02x", tunnelType, b[0], b[1], b[2], b[3]), nil
	}
	var digest []byte
	switch h {
	case TunnelHashBlake2b:
		d, err := blake2b.New(20, nil)
		if err != nil {
			return "", fmt.Errorf("ovsdb: tunnel name: %w", err)
		}
		d.Write([]byte(remoteIP))
		digest = d.Sum(nil)
	default:
		s := sha1.Sum([]byte(remoteIP))
		digest = s[:]
	}
	enc := strings.ToLower(base32.StdEncoding.EncodeToString(digest))
	if hashLen > len(enc) {
		hashLen = len(enc)
	}
	return tunnelType + "-" + enc[:hashLen], nil
}
