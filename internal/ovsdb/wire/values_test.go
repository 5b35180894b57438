package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestOperationJSON(t *testing.T) {
	cases := []struct {
		name string
		op   Operation
		want string
	}{
		{"insert", Operation{Op: OpInsert, Table: "Port", UUIDName: "port1",
			Row: Row{"name": "tap1", "interfaces": Set{NamedUUID("iface1")}, "other_config": Map{"tag": "5", "net_uuid": "n"}}},
			`{"op":"insert","row":{"interfaces":["set",[["named-uuid","iface1"]]],"name":"tap1","other_config":["map",[["net_uuid","n"],["tag","5"]]]},"table":"Port","uuid-name":"port1"}`},
		{"mutate", Operation{Op: OpMutate, Table: "Bridge", Where: []Condition{{"name", Equal, "br-int"}},
			Mutations: []Mutation{{"ports", MutDelete, Set{UUID("9b1e2f3a-0000-4000-8000-000000000001")}}}},
			`{"mutations":[["ports","delete",["set",[["uuid","9b1e2f3a-0000-4000-8000-000000000001"]]]]],"op":"mutate","table":"Bridge","where":[["name","==","br-int"]]}`},
		{"update without where still has where", Operation{Op: OpUpdate, Table: "Bridge", Row: Row{"fail_mode": "secure"}},
			`{"op":"update","row":{"fail_mode":"secure"},"table":"Bridge","where":[]}`},
		{"select columns", Operation{Op: OpSelect, Table: "Open_vSwitch", Where: []Condition{{"_uuid", Equal, UUID("u")}}, Columns: []string{"next_cfg"}},
			`{"columns":["next_cfg"],"op":"select","table":"Open_vSwitch","where":[["_uuid","==",["uuid","u"]]]}`},
		{"empty set and map", Operation{Op: OpUpdate, Table: "Port", Where: []Condition{}, Row: Row{"trunks": Set{}, "vlan_mode": Set(nil), "external_ids": Map{}}},
			`{"op":"update","row":{"external_ids":["map",[]],"trunks":["set",[]],"vlan_mode":["set",[]]},"table":"Port","where":[]}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.op)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if string(b) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, b, c.want)
		}
	}
}

func TestDecoders(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	if s, err := Strings(raw(`"OpenFlow13"`)); err != nil || len(s) != 1 || s[0] != "OpenFlow13" {
		t.Errorf("bare atom as set: %v %v", s, err)
	}
	if s, err := Strings(raw(`["set",["a","b"]]`)); err != nil || strings.Join(s, ",") != "a,b" {
		t.Errorf("set: %v %v", s, err)
	}
	if s, err := Strings(raw(`["set",[]]`)); err != nil || s != nil {
		t.Errorf("empty set: %v %v", s, err)
	}
	if u, err := UUIDs(raw(`["uuid","x"]`)); err != nil || len(u) != 1 || u[0] != "x" {
		t.Errorf("bare uuid as set: %v %v", u, err)
	}
	if u, err := UUIDs(raw(`["set",[["uuid","x"],["uuid","y"]]]`)); err != nil || strings.Join(u, ",") != "x,y" {
		t.Errorf("uuid set: %v %v", u, err)
	}
	if n, err := OptInt(raw(`["set",[]]`)); err != nil || n != nil {
		t.Errorf("empty optional: %v %v", n, err)
	}
	if n, err := OptInt(raw(`7`)); err != nil || n == nil || *n != 7 {
		t.Errorf("optional 7: %v %v", n, err)
	}
	if n, err := Ints(raw(`["set",[1,2,4094]]`)); err != nil || len(n) != 3 || n[2] != 4094 {
		t.Errorf("ints: %v %v", n, err)
	}
	if m, err := StringMap(raw(`["map",[["iface-id","p1"],["attached-mac","fa:16:3e:00:00:01"]]]`)); err != nil || m["iface-id"] != "p1" || len(m) != 2 {
		t.Errorf("map: %v %v", m, err)
	}
	if m, err := StringMap(raw(`["map",[]]`)); err != nil || m != nil {
		t.Errorf("empty map: %v %v", m, err)
	}
	// Bad input: a clear error, no panic.
	for _, bad := range []struct {
		name string
		f    func() error
	}{
		{"string from number", func() error { _, err := String(raw(`3`)); return err }},
		{"int from string", func() error { _, err := Int(raw(`"3"`)); return err }},
		{"map from set", func() error { _, err := StringMap(raw(`["set",[]]`)); return err }},
		{"map of ints", func() error { _, err := StringMap(raw(`["map",[[1,2]]]`)); return err }},
		{"uuid from string", func() error { _, err := UUIDs(raw(`"x"`)); return err }},
		{"two values in an optional", func() error { _, err := OptInt(raw(`["set",[1,2]]`)); return err }},
		{"truncated", func() error { _, err := Strings(raw(`["set",`)); return err }},
	} {
		if err := bad.f(); err == nil {
			t.Errorf("%s: no error", bad.name)
		}
	}
}

func TestCheckResults(t *testing.T) {
	ops := []Operation{{Op: OpInsert, Table: "Port"}, {Op: OpMutate, Table: "Bridge"}}
	if err := CheckResults([]Result{{}, {Count: 1}}, ops); err != nil {
		t.Errorf("success: %v", err)
	}
	err := CheckResults([]Result{{}, {Error: "constraint violation", Details: "no row"}, {}}, ops)
	if err == nil || !strings.Contains(err.Error(), "operation 1 (mutate Bridge): constraint violation: no row") {
		t.Errorf("op error: %v", err)
	}
	err = CheckResults([]Result{{}, {}, {Error: "referential integrity violation"}}, ops)
	if err == nil || !strings.Contains(err.Error(), "commit: referential integrity violation") {
		t.Errorf("commit error: %v", err)
	}
	if err := CheckResults([]Result{{}}, ops); err == nil {
		t.Error("short result: no error")
	}
}
