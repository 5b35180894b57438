package dvr

import (
	"fmt"
	"net"
	"sort"
	"strings"
)

// ParseHostMAC parses a DVR MAC as the server sends it: netaddr's default
// dialect, upper case with dashes ("FA-16-3F-8E-8E-11", what
// get_dvr_mac_address_by_host and get_dvr_mac_address_list return), or the
// colon form. Only 48-bit MACs are DVR MACs.
func ParseHostMAC(s string) (net.HardwareAddr, error) {
	m, err := net.ParseMAC(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("dvr: host MAC %q: %w", s, err)
	}
	if len(m) != 6 {
		return nil, fmt.Errorf("dvr: host MAC %q: %d bytes, want 6", s, len(m))
	}
	return m, nil
}

// HostMAC is one entry of get_dvr_mac_address_list / dvr_mac_address_update.
type HostMAC struct {
	Host string `json:"host"`
	MAC  string `json:"mac_address"`
}

// OtherHostMACs is the set the reference keeps as registered_dvr_macs: every
// entry's MAC except this host's own, parsed, sorted and without duplicates.
// An entry that does not parse is reported, not skipped silently: the
// caller decides (the reference would raise inside the RPC handler).
func OtherHostMACs(local net.HardwareAddr, list []HostMAC) ([]net.HardwareAddr, error) {
	seen := map[string]net.HardwareAddr{}
	for _, e := range list {
		m, err := ParseHostMAC(e.MAC)
		if err != nil {
			return nil, fmt.Errorf("host %q: %w", e.Host, err)
		}
		if m.String() == local.String() {
			continue
		}
		seen[m.String()] = m
	}
	out := make([]net.HardwareAddr, 0, len(seen))
	for _, m := range seen {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}
