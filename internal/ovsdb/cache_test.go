package ovsdb

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTablesApply: initial content, a modify carrying only some columns, a
// delete, and a row that does not decode (the others still apply).
func TestTablesApply(t *testing.T) {
	db := newTables()
	touched, err := db.apply(json.RawMessage(`{
		"Open_vSwitch": {"r": {"new": {"bridges": ["uuid", "b"], "cur_cfg": 3, "next_cfg": 4}}},
		"Bridge": {"b": {"new": {"name": "br-int", "ports": ["set", [["uuid", "p1"], ["uuid", "p2"]]], "fail_mode": "secure"}}},
		"Port": {"p1": {"new": {"name": "tap1", "tag": 5, "interfaces": ["uuid", "i1"]}},
		         "p2": {"new": {"name": "tap2", "tag": ["set", []], "interfaces": ["uuid", "i2"]}}},
		"Interface": {"i1": {"new": {"name": "tap1", "ofport": 7, "external_ids": ["map", [["iface-id", "a"]]]}}}
	}`))
	if err != nil || !touched["Port"] || !touched["Bridge"] || !touched["Open_vSwitch"] || touched["Controller"] {
		t.Fatalf("initial: %v %v", touched, err)
	}
	p1 := db.ports["p1"]
	if p1.Name != "tap1" || *p1.Tag != 5 || db.ports["p2"].Tag != nil || *db.bridges["b"].FailMode != "secure" || db.root["r"].NextCfg != 4 {
		t.Fatalf("decoded: %+v %+v", p1, db.bridges["b"])
	}
	_, err = db.apply(json.RawMessage(`{
		"Port": {"p1": {"old": {"tag": 5}, "new": {"tag": 9}}, "p2": {"old": {"name": "tap2"}}},
		"Interface": {"i1": {"new": {"ofport": "seven"}}}
	}`))
	if err == nil || !strings.Contains(err.Error(), "Interface.ofport") {
		t.Errorf("bad row error: %v", err)
	}
	if got := db.ports["p1"]; got.Name != "tap1" || *got.Tag != 9 || got.Interfaces[0] != "i1" {
		t.Errorf("partial modify: %+v", got)
	}
	if *p1.Tag != 5 {
		t.Error("a cached row was changed in place")
	}
	if db.ports["p2"] != nil {
		t.Error("deleted row still cached")
	}
	if i := db.ifaces["i1"]; i == nil || *i.Ofport != 7 {
		t.Errorf("row that failed to decode: %+v (want the previous content)", i)
	}
	if _, err := db.apply(json.RawMessage(`[1]`)); err == nil {
		t.Error("malformed updates: no error")
	}
}

// FuzzTablesApply: whatever ovsdb-server (or something pretending to be it)
// sends as table updates, applying it returns an error or a cache of
// well-formed rows; it never panics.
func FuzzTablesApply(f *testing.F) {
	f.Add([]byte(`{"Port":{"p1":{"new":{"name":"tap1","tag":5,"interfaces":["uuid","i1"]}}}}`))
	f.Add([]byte(`{"Bridge":{"b":{"new":{"ports":["set",[["uuid","p1"]]],"protocols":"OpenFlow13"}}}}`))
	f.Add([]byte(`{"Interface":{"i":{"new":{"external_ids":["map",[["iface-id","x"]]],"ofport":["set",[]]}}}}`))
	f.Add([]byte(`{"Open_vSwitch":{"r":{"new":{"cur_cfg":1,"bridges":["set",[]]}}},"Port":{"p1":{"old":{}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		db := newTables()
		_, _ = db.apply(b)
		_, _ = db.apply(b) // and again over what the first one left
		for id, p := range db.ports {
			if p == nil || p.UUID != id {
				t.Fatalf("port %q cached as %+v", id, p)
			}
		}
	})
}
