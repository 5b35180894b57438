package ovsdump

import (
	"reflect"
	"testing"
)

func TestRecords(t *testing.T) {
	in := `_uuid               : 5c0e2d1a-0000-4000-8000-000000000001
name                : int-br-phys
other_config        : {mcast-snooping-flood="false", net_uuid="a60f"}
tag                 : []

_uuid               : 5c0e2d1a-0000-4000-8000-000000000002
name                : "tap1234567890a"
tag                 : 3
`
	got := Records(in)
	want := []map[string]string{
		{"_uuid": "5c0e2d1a-0000-4000-8000-000000000001", "name": "int-br-phys",
			"other_config": `{mcast-snooping-flood="false", net_uuid="a60f"}`, "tag": "[]"},
		{"_uuid": "5c0e2d1a-0000-4000-8000-000000000002", "name": `"tap1234567890a"`, "tag": "3"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Records:\n got %q\nwant %q", got, want)
	}
	if r := Records(""); r != nil {
		t.Errorf("Records of nothing: %q", r)
	}
}

func TestMap(t *testing.T) {
	for _, c := range []struct {
		in   string
		want map[string]string
	}{
		{`{}`, map[string]string{}},
		{`[]`, map[string]string{}},
		{`{a=b, c="d"}`, map[string]string{"a": "b", "c": "d"}},
		{`{attached-mac="fa:16:3e:00:00:01", iface-id="6f1c-2a", vm-uuid=x}`,
			map[string]string{"attached-mac": "fa:16:3e:00:00:01", "iface-id": "6f1c-2a", "vm-uuid": "x"}},
		{`{subport_ids="[\"a\", \"b\"]", trunk_id="t"}`,
			map[string]string{"subport_ids": `["a", "b"]`, "trunk_id": "t"}},
		{`{0=9f0b3c44-1111-4222-8333-444455556666, 1=0d2e}`,
			map[string]string{"0": "9f0b3c44-1111-4222-8333-444455556666", "1": "0d2e"}},
	} {
		if got := Map(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Map(%s) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestOfctlPorts(t *testing.T) {
	in := `OFPT_FEATURES_REPLY (OF1.3) (xid=0x2): dpid:0000bef3d4c83b42
n_tables:254, n_buffers:0
OFPST_PORT_DESC reply (OF1.3) (xid=0x3):
 1(int-br-phys): addr:6a:52:1e:7b:21:4c
     config:     0
 12(tapa3f1c2d4-5e): addr:fe:16:3e:12:34:56
 LOCAL(br-int): addr:be:f3:d4:c8:3b:42
`
	want := map[string]uint32{"int-br-phys": 1, "tapa3f1c2d4-5e": 12}
	if got := OfctlPorts(in); !reflect.DeepEqual(got, want) {
		t.Fatalf("OfctlPorts = %v, want %v", got, want)
	}
}

const line = " cookie=0x7b42e198ddf13bb9, table=10, priority=1 actions=learn(table=20,hard_timeout=300,priority=1,cookie=0x2,NXM_OF_VLAN_TCI[0..11]),output:1"

func TestCookies(t *testing.T) {
	if got, want := DropCookie(line), " table=10, priority=1 actions=learn(table=20,hard_timeout=300,priority=1,cookie=0x2,NXM_OF_VLAN_TCI[0..11]),output:1"; got != want {
		t.Errorf("DropCookie:\n got %q\nwant %q", got, want)
	}
	if got, want := MaskCookie(line), " cookie=C, table=10, priority=1 actions=learn(table=20,hard_timeout=300,priority=1,cookie=C,NXM_OF_VLAN_TCI[0..11]),output:1"; got != want {
		t.Errorf("MaskCookie:\n got %q\nwant %q", got, want)
	}
	if c, ok := Cookie(line); !ok || c != "0x7b42e198ddf13bb9" {
		t.Errorf("Cookie = %q %v", c, ok)
	}
	if c, ok := Cookie(" priority=0 actions=NORMAL"); ok {
		t.Errorf("Cookie of a line without one = %q", c)
	}
}

func TestTable(t *testing.T) {
	if n, ok := Table(line); !ok || n != 10 {
		t.Errorf("Table = %d %v, want 10 (the flow's, not the learn action's)", n, ok)
	}
	if n, ok := Table(" cookie=0x1, priority=0 actions=NORMAL"); ok {
		t.Errorf("Table of a table-0 line = %d", n)
	}
}

func TestLines(t *testing.T) {
	dump := " cookie=0x2, table=1, priority=1 actions=drop\n\n cookie=0x1, priority=0 actions=NORMAL\n cookie=0x3, table=2, priority=1 actions=drop\n"
	got := Lines(dump, func(l string) bool { _, ok := Table(l); return ok }, DropCookie)
	want := []string{" table=1, priority=1 actions=drop", " table=2, priority=1 actions=drop"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Lines = %q, want %q", got, want)
	}
	if got := Lines(dump, nil, nil); len(got) != 3 || got[0] != " cookie=0x1, priority=0 actions=NORMAL" {
		t.Errorf("Lines(nil, nil) = %q", got)
	}
}

func TestDiff(t *testing.T) {
	missing, extra := Diff([]string{"c", "a", "a", "b"}, []string{"z", "a", "b", "y", "b"})
	if want := []string{"a", "c"}; !reflect.DeepEqual(missing, want) {
		t.Errorf("missing = %q, want %q", missing, want)
	}
	if want := []string{"z", "y", "b"}; !reflect.DeepEqual(extra, want) {
		t.Errorf("extra = %q, want %q", extra, want)
	}
	if m, e := Diff([]string{"a"}, []string{"a"}); m != nil || e != nil {
		t.Errorf("equal sets differ: %q %q", m, e)
	}
}
