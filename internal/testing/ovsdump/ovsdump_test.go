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
