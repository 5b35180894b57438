package secgroup

import (
	"slices"
	"testing"
)

func TestMarkedTuples(t *testing.T) {
	dump := `tcp,orig=(src=10.250.31.11,dst=10.250.31.12,sport=58426,dport=22),reply=(src=10.250.31.12,dst=10.250.31.11,sport=22,dport=58426),zone=1,mark=1,protoinfo=(state=ESTABLISHED)
tcp,orig=(src=10.250.31.11,dst=10.250.31.12,sport=58427,dport=22),reply=(src=10.250.31.12,dst=10.250.31.11,sport=22,dport=58427),zone=1,protoinfo=(state=ESTABLISHED)
tcp,orig=(src=10.250.31.11,dst=10.250.31.12,sport=58428,dport=22),reply=(src=10.250.31.12,dst=10.250.31.11,sport=22,dport=58428),zone=2,mark=1,protoinfo=(state=ESTABLISHED)
icmp,orig=(src=10.250.32.11,dst=10.250.32.10,id=4242,type=8,code=0),reply=(src=10.250.32.10,dst=10.250.32.11,id=4242,type=0,code=0),zone=1,mark=1
udp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=67,dport=68),reply=(src=10.0.0.2,dst=10.0.0.1,sport=68,dport=67),zone=1,mark=0x1
tcp,orig=(src=fd00::11,dst=fd00::12,sport=40000,dport=80),reply=(src=fd00::12,dst=fd00::11,sport=80,dport=40000),zone=1,mark=1,protoinfo=(state=SYN_SENT)
icmpv6,orig=(src=fd00::11,dst=fd00::12,id=7,type=128,code=0),reply=(src=fd00::12,dst=fd00::11,id=7,type=129,code=0),zone=1,mark=1
tcp,orig=(src=10.0.0.1,dst=10.0.0.2,sport=1,dport=2),reply=(src=10.0.0.2,dst=10.0.0.1,sport=2,dport=1),zone=1,mark=2,protoinfo=(state=ESTABLISHED)
garbage line
`
	got := MarkedTuples(dump, 1, 1)
	want := []string{
		"ct_nw_src=10.250.31.11,ct_nw_dst=10.250.31.12,ct_nw_proto=6,ct_tp_src=58426,ct_tp_dst=22",
		"ct_nw_src=10.250.32.11,ct_nw_dst=10.250.32.10,ct_nw_proto=1,icmp_id=4242,icmp_type=8,icmp_code=0",
		"ct_nw_src=10.0.0.1,ct_nw_dst=10.0.0.2,ct_nw_proto=17,ct_tp_src=67,ct_tp_dst=68",
		"ct_ipv6_src=fd00::11,ct_ipv6_dst=fd00::12,ct_nw_proto=6,ct_tp_src=40000,ct_tp_dst=80",
	}
	if !slices.Equal(got, want) {
		t.Errorf("MarkedTuples:\n got %q\nwant %q", got, want)
	}
	if got := MarkedTuples(dump, 3, 1); len(got) != 0 {
		t.Errorf("zone 3: %q", got)
	}
}
