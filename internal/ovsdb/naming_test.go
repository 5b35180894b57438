package ovsdb

import "testing"

func TestTunnelPortName(t *testing.T) {
	for _, tc := range []struct {
		typ, ip string
		h       TunnelHash
		want    string
	}{
		{"vxlan", "10.0.0.2", TunnelHashSHA1, "vxlan-0a000002"},
		{"vxlan", "172.31.255.2", TunnelHashSHA1, "vxlan-ac1fff02"},
		{"gre", "192.168.1.10", TunnelHashSHA1, "gre-c0a8010a"},
		{"geneve", "10.0.0.255", TunnelHashBlake2b, "geneve-0a0000ff"},
		// values computed with the reference's Python expressions
		{"vxlan", "2001:db8::1", TunnelHashSHA1, "vxlan-d3wbibj5t"},
		{"vxlan", "2001:db8::1", TunnelHashBlake2b, "vxlan-xsyzhsi4u"},
		{"gre", "2001:db8::1", TunnelHashSHA1, "gre-d3wbibj5tg3"},
		{"vxlan", "fd00::2", TunnelHashBlake2b, "vxlan-jahnh55sd"},
	} {
		got, err := TunnelPortName(tc.typ, tc.ip, tc.h)
		if err != nil || got != tc.want {
			t.Errorf("TunnelPortName(%s, %s, %d) = %q, %v; want %q", tc.typ, tc.ip, tc.h, got, err, tc.want)
		}
		if len(got) > DeviceNameMaxLen {
			t.Errorf("%q longer than %d", got, DeviceNameMaxLen)
		}
	}
	if _, err := TunnelPortName("vxlan", "not-an-ip", TunnelHashSHA1); err == nil {
		t.Error("invalid IP accepted")
	}
}

func TestPhysPatchNames(t *testing.T) {
	i, p, err := PhysPatchNames("br-eth1")
	if err != nil || i != "int-br-eth1" || p != "phy-br-eth1" {
		t.Fatalf("got %q %q %v", i, p, err)
	}
	// longer than 15: prefix + head + 6 hex of sha1(name), as neutron-lib
	i, _, err = PhysPatchNames("br-physical-long")
	if err != nil || i != "int-br-phbaa90a" {
		t.Fatalf("got %q %v", i, err)
	}
}

func TestTunnelOptions(t *testing.T) {
	tp := TunnelPort{Type: "vxlan", RemoteIP: "10.0.0.2", LocalIP: "10.0.0.1", DontFragment: true, DstPort: 4789}
	got := tp.Options()
	want := map[string]string{"df_default": "true", "remote_ip": "10.0.0.2", "local_ip": "10.0.0.1",
		"in_key": "flow", "out_key": "flow", "egress_pkt_mark": "0"}
	if !mapsEqual(got, want) {
		t.Fatalf("options %v, want %v", got, want)
	}
	tp.DstPort, tp.Csum, tp.TOS, tp.NoEgressPktMark = 4790, true, "inherit", true
	got = tp.Options()
	if got["dst_port"] != "4790" || got["csum"] != "true" || got["tos"] != "inherit" || got["egress_pkt_mark"] != "" {
		t.Fatalf("options %v", got)
	}
	g6 := TunnelPort{Type: "gre", RemoteIP: "fd00::2", LocalIP: "fd00::1"}
	if g6.InterfaceType() != "ip6gre" || g6.Options()["packet_type"] != "legacy_l2" {
		t.Fatalf("ip6gre: %s %v", g6.InterfaceType(), g6.Options())
	}
}

func TestResolveRunDir(t *testing.T) {
	t.Setenv("OVS_RUNDIR", "")
	if d := resolveRunDir("", "unix:/tmp/x/db.sock", nil); d != "/tmp/x" {
		t.Errorf("unix: %s", d)
	}
	if d := resolveRunDir("", "tcp:127.0.0.1:6640", map[string]string{"rundir": "/run/ovs"}); d != "/run/ovs" {
		t.Errorf("tcp with rundir: %s", d)
	}
	if d := resolveRunDir("/explicit", "unix:/tmp/x/db.sock", nil); d != "/explicit" {
		t.Errorf("explicit: %s", d)
	}
	t.Setenv("OVS_RUNDIR", "/env")
	if d := resolveRunDir("", "unix:/tmp/x/db.sock", nil); d != "/env" {
		t.Errorf("env: %s", d)
	}
}

func TestMergeMutations(t *testing.T) {
	if m := mergeMutations("other_config", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1"}); m != nil {
		t.Fatalf("no change expected, got %v", m)
	}
	m := mergeMutations("other_config", map[string]string{"a": "1"}, map[string]string{"a": "2", "c": "3"})
	if len(m) != 2 || m[0].Mutator != "delete" || m[1].Mutator != "insert" {
		t.Fatalf("got %v", m)
	}
}

func FuzzTunnelPortName(f *testing.F) {
	for _, s := range []string{"10.0.0.2", "2001:db8::1", "::ffff:10.0.0.1", "", "x"} {
		f.Add("vxlan", s)
	}
	f.Fuzz(func(t *testing.T, typ, ip string) {
		for _, h := range []TunnelHash{TunnelHashSHA1, TunnelHashBlake2b} {
			name, err := TunnelPortName(typ, ip, h)
			if err != nil {
				continue
			}
			if len(name) > DeviceNameMaxLen {
				t.Fatalf("%q: %d chars", name, len(name))
			}
			if name[:len(typ)+1] != typ+"-" {
				t.Fatalf("%q lacks prefix %q", name, typ)
			}
		}
		if n, err := InterfaceName(ip, PeerIntegrationPrefix); err == nil && len(ip)+4 > DeviceNameMaxLen && len(n) != DeviceNameMaxLen {
			t.Fatalf("InterfaceName(%q) = %q", ip, n)
		}
	})
}
