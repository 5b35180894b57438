//go:build integration

package firewall

import (
	"strings"
	"testing"
)

// Problems reports exactly what the translation skips, and nothing else.
func TestProblemsListsWhatIsSkipped(t *testing.T) {
	st := badValuesState()
	g := st.Groups[sgA]
	g.Rules = append(g.Rules,
		Rule{ID: "pfx", Direction: Ingress, EtherType: IPv4, Protocol: "tcp", Invalid: `remote_ip_prefix "10.0.0.300/24"`},
		Rule{ID: "v6icmp", Direction: Ingress, EtherType: IPv6, Protocol: "1", PortRangeMin: iptr(128)})
	st.Groups[sgA] = g
	st.Members[sgB] = []Member{{Invalid: `address "10.1"`}, {IP: pfx("::ffff:10.0.0.9/128")}}
	p := st.Ports["p1"]
	p.AllowedAddressPairs = []AddressPair{{Invalid: `ip_address "x"`}, {IP: pfx("::ffff:10.0.0.7/128")}}
	p.Invalid = []string{`fixed ip "10.0.0.999"`}
	st.Ports["p1"] = p
	var got []string
	for _, pr := range Problems(st) {
		got = append(got, pr.Kind+"|"+pr.Owner+"|"+pr.ID+"|"+pr.Reason)
	}
	want := []string{
		`address-pair|p1|ip_address "x"|address`,
		"member|" + sgB + `|address "10.1"|address`,
		`port|p1|fixed ip "10.0.0.999"|unreadable`,
		"rule|" + sgA + "|big|port-range",
		"rule|" + sgA + "|code|icmp-type-code",
		"rule|" + sgA + "|icmp|icmp-type-code",
		"rule|" + sgA + "|neg|port-range",
		"rule|" + sgA + "|pfx|unreadable",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A rule Problems reports yields no flow; one it does not report does.
	ls := only(computeLines(st), "82")
	if containsLine(ls, "tcp,reg5=0x7 ") {
		t.Errorf("the rule with an unreadable prefix became a rule from anywhere:\n%s", strings.Join(ls, "\n"))
	}
	if !containsLine(ls, "icmp6,reg5=0x7,icmp_type=128") {
		t.Errorf("the legacy IPv6 ICMP rule is gone:\n%s", strings.Join(ls, "\n"))
	}
}
