package trunk

import (
	"testing"

	"github.com/ovsagent/ovsagent/internal/neutron"
)

func TestNames(t *testing.T) {
	// neutron's gen_trunk_br_name and get_br_{int,trunk}_port_name on the scenario's ids.
	if got := BridgeName(refTrunk); got != "tbr-7a4e42e6-2" {
		t.Errorf("bridge %q", got)
	}
	if i, tr := ParentPatchNames(refParent); i != "tpi-1b2d3c4e-0f" || tr != "tpt-1b2d3c4e-0f" {
		t.Errorf("parent %q %q", i, tr)
	}
	if i, tr := SubportPatchNames("ab"); i != "spi-ab" || tr != "spt-ab" {
		t.Errorf("short subport %q %q", i, tr)
	}
	for name, want := range map[string]bool{"tbr-x": true, "tpi-x": true, "spt-x": true, "tp": true, "sparkle": true, "tap1": false, "qvo1": false} {
		if IsServicePort(name) != want {
			t.Errorf("IsServicePort(%q) = %v", name, !want)
		}
	}
}

func TestStatus(t *testing.T) {
	tbr := BridgeName(refTrunk)
	vm := Iface{Name: refVM, ExternalIDs: map[string]string{KeyIfaceID: refParent, KeyAttachedMAC: refPMAC}}
	tr := neutron.Trunk{ID: refTrunk, PortID: refParent, SubPorts: refSubPorts(refTrunk, refS1, refS2)}
	wire, ok := Wire(WireInput{IntBridge: "br-int", Trunk: tr, Ifaces: []Iface{vm, {Name: tbr}}, Bound: refBound()})
	if !ok {
		t.Fatal("no VM found")
	}
	if _, ok := Wire(WireInput{IntBridge: "br-int", Trunk: tr, Ifaces: []Iface{{Name: tbr}, {Name: "tpt-x"}}}); ok {
		t.Error("a bridge with service ports only has a VM")
	}
	bad := tr
	bad.SubPorts = append(refSubPorts(refTrunk, refS1), neutron.SubPort{PortID: refS3, TrunkID: refTrunk, SegmentationType: "inherit", SegmentationID: 5},
		neutron.SubPort{PortID: refS4, TrunkID: refTrunk, SegmentationType: "vlan", SegmentationID: 4095})
	badWire, _ := Wire(WireInput{IntBridge: "br-int", Trunk: bad, Ifaces: []Iface{vm}, Bound: refBound()})
	if n := len(validIDs(badWire.Add)); n != 1 {
		t.Errorf("%d subports wired, want 1 (inherit and 4095 refused)", n)
	}
	noVM := AddSubports("br-int", refTrunk, nil, refSubPorts(refTrunk, refS3), refBound())
	rmNoVM := RemoveSubports("br-int", refTrunk, true, nil, []string{refS3})
	rm, _ := Remove("br-int", map[string]string{KeyBridgeName: tbr, KeyTrunkID: refTrunk, KeyIfaceID: refParent, KeySubportIDs: `["` + refS1 + `"]`}, false)
	cases := []struct {
		name string
		p    Plan
		o    Outcome
		want string
	}{
		{"all in", wire, Outcome{}, neutron.TrunkActive},
		{"parent failed", wire, Outcome{ParentFailed: true}, neutron.TrunkError},
		{"a subport failed", wire, Outcome{Failed: map[string]bool{refS2: true}}, neutron.TrunkDegraded},
		{"metadata failed", wire, Outcome{MetadataFailed: true}, neutron.TrunkDegraded},
		{"unwirable subports", badWire, Outcome{}, neutron.TrunkDegraded},
		{"unbound subport", AddSubports("br-int", refTrunk, &vm, refSubPorts(refTrunk, refS3), refBound(refS3)), Outcome{}, neutron.TrunkDegraded},
		{"add without the VM", noVM, Outcome{}, neutron.TrunkDegraded},
		{"remove without the VM", rmNoVM, Outcome{}, neutron.TrunkActive},
		{"remove, a step failed", rmNoVM, Outcome{Failed: map[string]bool{refS3: true}}, neutron.TrunkDegraded},
		{"trunk removed", rm, Outcome{}, ""},
		{"bridge disposed", Dispose("br-int", tbr, nil), Outcome{}, ""},
	}
	for _, c := range cases {
		if got := Status(c.p, c.o); got != c.want {
			t.Errorf("%s: %q want %q", c.name, got, c.want)
		}
	}
	for _, ids := range []map[string]string{
		{KeyBridgeName: tbr, KeyTrunkID: refTrunk},                                // no parent
		{KeyBridgeName: "br-int", KeyTrunkID: refTrunk, KeyIfaceID: refParent},    // not a trunk bridge
		{KeyBridgeName: "tbr-other", KeyTrunkID: refTrunk, KeyIfaceID: refParent}, // bridge of another trunk
	} {
		if _, ok := Remove("br-int", ids, false); ok {
			t.Errorf("Remove accepted %v", ids)
		}
	}
	if got := (Metadata{BridgeName: tbr, TrunkID: refTrunk}).ExternalIDs()[KeySubportIDs]; got != "[]" {
		t.Errorf("empty subport_ids %q", got)
	}
	if got := (Metadata{SubportIDs: []string{"a", "b"}}).ExternalIDs()[KeySubportIDs]; got != `["a", "b"]` {
		t.Errorf("subport_ids %q, want the reference's json.dumps form", got)
	}
}
