package firewall

import (
	"bytes"
	"net"
	"strconv"
)

// Two filtered ports of one network may list the same MAC (an allowed
// address pair shared by a VRRP/keepalived pair, or a pair naming another
// port's MAC). The "reg6=L, dl_dst=M -> reg5=P" entry of table 73 can point
// at one port only, and each entry must have one owner, so one claimant
// wins: the port whose own MAC it is, then the lowest ofport, then the
// smallest port id. internal/pipeline applies the same rule to its table-60
// ingress flows, so both halves agree on the port. (The reference installs
// the entry for every claimant, last writer wins.)

func macKey(vlan uint16, mac net.HardwareAddr) string {
	return strconv.Itoa(int(vlan)) + "|" + string(mac)
}

// allowedMACs is the port MAC followed by the distinct AAP MACs.
func allowedMACs(p Port) []net.HardwareAddr {
	out := []net.HardwareAddr{p.MAC}
	for _, ap := range p.AllowedAddressPairs {
		if len(ap.MAC) == 0 {
			continue
		}
		dup := false
		for _, m := range out {
			if bytes.Equal(m, ap.MAC) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, ap.MAC)
		}
	}
	return out
}

type macClaim struct {
	port  string
	own   bool
	ofprt uint32
}

func (c macClaim) beats(o macClaim) bool {
	if c.own != o.own {
		return c.own
	}
	if c.ofprt != o.ofprt {
		return c.ofprt < o.ofprt
	}
	return c.port < o.port
}

// macWinners maps (VLAN, MAC) to the port id that owns the table-73 entry.
func macWinners(ports map[string]Port) map[string]string {
	best := map[string]macClaim{}
	for id, p := range ports {
		if !p.PortSecurity {
			continue
		}
		for i, m := range allowedMACs(p) {
			c := macClaim{port: id, own: i == 0, ofprt: p.OFPort}
			k := macKey(p.VLAN, m)
			if cur, ok := best[k]; !ok || c.beats(cur) {
				best[k] = c
			}
		}
	}
	out := make(map[string]string, len(best))
	for k, c := range best {
		out[k] = c.port
	}
	return out
}
