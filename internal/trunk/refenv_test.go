package trunk

// Golden against the whole 2026.2 reference agent (not only its trunk handler, which
// golden_test.go replays step by step): refenv/trunk_capture.sh plugged a vlan-aware VM
// (a trunk with two subports, VLAN 101 on a vxlan network and 102 on a VLAN network) on the
// reference agent's private OVS and captured the host wired, then unplugged
// (docs/reference/captures-2026.2/trunk). The test feeds the captured trunk, ports and
// the VM's interface to Wire and Remove and compares the result with the captured rows of
// the trunk bridge and the tpi-/spi- ports of br-int. What the agent's ordinary port wiring
// adds to tpi-/spi- (the local VLAN tag, other_config net_uuid...) and their br-int flows
// are the pipeline's and are compared by internal/pipeline (TestRefenvTrunk).

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/neutron"
	"github.com/ovsagent/ovsagent/internal/testing/ovsdump"
)

const refTrunkDir = "../../docs/reference/captures-2026.2/trunk"

func readTrunkCapture(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// refModel is the capture's rows of the trunk bridges and of br-int's tpi-/spi- ports.
// br-int's tags are left out: the local VLAN is the agent's port wiring, not the handler's.
func refModel(t *testing.T, dir string) dbModel {
	ports := map[string]map[string]string{}
	for _, r := range ovsdump.Records(readTrunkCapture(t, dir, "ovs/ovsdb-Port.txt")) {
		ports[r["name"]] = r
	}
	ifaces := map[string]map[string]string{}
	for _, r := range ovsdump.Records(readTrunkCapture(t, dir, "ovs/ovsdb-Interface.txt")) {
		ifaces[strings.Trim(r["name"], `"`)] = r
	}
	m := dbModel{}
	for _, br := range strings.Fields(readTrunkCapture(t, dir, "ovs/bridges.txt")) {
		if br != "br-int" && !IsTrunkBridge(br) {
			continue
		}
		m[br] = map[string]refRow{}
		for name := range ovsdump.OfctlPorts(readTrunkCapture(t, dir, "ovs/ofctl-show-"+br+".txt")) {
			if br == "br-int" && !IsServicePort(name) {
				continue
			}
			p, i := ports[name], ifaces[name]
			if p == nil || i == nil {
				t.Fatalf("%s: no Port/Interface row", name)
			}
			row := refRow{Type: strings.Trim(i["type"], `"`), Options: ovsdump.Map(i["options"]), ExternalIDs: ovsdump.Map(i["external_ids"])}
			if len(row.Options) == 0 {
				row.Options = nil
			}
			if n, err := strconv.Atoi(p["tag"]); err == nil && br != "br-int" {
				row.Tag = &n
			}
			if vm := p["vlan_mode"]; vm != "[]" && vm != "" {
				row.VLANMode = &vm
			}
			m[br][name] = row
		}
		// the bridge's own port (ofctl show lists it as LOCAL)
		if IsTrunkBridge(br) {
			m[br][br] = refRow{Type: "internal"}
		}
	}
	return m
}

type refTrunkAPI struct {
	Trunks []struct {
		ID       string            `json:"id"`
		PortID   string            `json:"port_id"`
		Status   string            `json:"status"`
		SubPorts []neutron.SubPort `json:"sub_ports"`
	} `json:"trunks"`
}

func TestRefenvTrunkAgent(t *testing.T) {
	wiredDir, unpluggedDir := filepath.Join(refTrunkDir, "wired"), filepath.Join(refTrunkDir, "unplugged")
	var api refTrunkAPI
	if err := json.Unmarshal([]byte(readTrunkCapture(t, wiredDir, "api-trunks.json")), &api); err != nil {
		t.Fatal(err)
	}
	if len(api.Trunks) != 1 || len(api.Trunks[0].SubPorts) != 2 {
		t.Fatalf("capture: want one trunk with two subports, have %+v", api.Trunks)
	}
	at := api.Trunks[0]
	tr := neutron.Trunk{ID: at.ID, PortID: at.PortID}
	for _, s := range at.SubPorts {
		s.TrunkID = at.ID
		tr.SubPorts = append(tr.SubPorts, s)
	}
	var ports struct {
		Ports []struct {
			ID  string `json:"id"`
			MAC string `json:"mac_address"`
		} `json:"ports"`
	}
	if err := json.Unmarshal([]byte(readTrunkCapture(t, wiredDir, "api-ports.json")), &ports); err != nil {
		t.Fatal(err)
	}
	bound := map[string]string{}
	for _, p := range ports.Ports {
		bound[p.ID] = p.MAC
	}

	want := refModel(t, wiredDir)
	tbr := BridgeName(tr.ID)
	if want[tbr] == nil {
		t.Fatalf("capture has no bridge %s", tbr)
	}
	// The host before the handler: os-vif's trunk bridge with the VM's tap (its
	// external_ids without the trunk metadata the handler adds), nothing on br-int.
	plug := dbModel{"br-int": {}, tbr: {tbr: {Type: "internal"}}}
	vm := ""
	for name, r := range want[tbr] {
		if r.ExternalIDs[KeyTrunkID] != "" {
			vm = name
			r.ExternalIDs = map[string]string{}
			for k, v := range want[tbr][name].ExternalIDs {
				if k != KeyTrunkID && k != KeyBridgeName && k != KeySubportIDs {
					r.ExternalIDs[k] = v
				}
			}
			plug[tbr][name] = r
		}
	}
	if vm == "" {
		t.Fatal("capture: no VM interface with trunk metadata on the trunk bridge")
	}
	got := plug.clone()
	p, ok := Wire(WireInput{IntBridge: "br-int", Trunk: tr, Ifaces: got.ifaces(tbr), Bound: bound})
	if !ok {
		t.Fatal("Wire: no VM interface")
	}
	got.apply(p)
	for _, d := range diff(got, want) {
		t.Errorf("wired: %s", d)
	}
	if st := Status(p, Outcome{}); st != at.Status {
		t.Errorf("status %q, the reference's trunk is %q", st, at.Status)
	}
	rows := 0
	for _, br := range want {
		rows += len(br)
	}
	t.Logf("wired: %d rows compared (%s and br-int's tpi-/spi-), status %s", rows, tbr, at.Status)

	// Unplugged: os-vif deleted the trunk bridge; the handler removes the br-int ends
	// from the VM interface's last external_ids.
	last := got[tbr][vm].ExternalIDs
	delete(got, tbr)
	rp, ok := Remove("br-int", last, false)
	if !ok {
		t.Fatalf("Remove: metadata not recognised: %v", last)
	}
	got.apply(rp)
	wantAfter := refModel(t, unpluggedDir)
	if _, left := wantAfter[tbr]; left {
		t.Errorf("the reference's capture still has %s", tbr)
	}
	for _, d := range diff(got, wantAfter) {
		t.Errorf("unplugged: %s", d)
	}

	// Flows: the reference installs none on the trunk bridge (no controller, no fail
	// mode: OVS's own NORMAL), and the trunk feature owns none.
	if fl := strings.TrimSpace(readTrunkCapture(t, wiredDir, "ovs/flows-"+tbr+".nostats.txt")); fl != "priority=0 actions=NORMAL" {
		t.Errorf("the reference's %s flows:\n%s", tbr, fl)
	}
	for _, r := range ovsdump.Records(readTrunkCapture(t, wiredDir, "ovs/ovsdb-Bridge.txt")) {
		if r["name"] == tbr && (r["controller"] != "[]" || r["fail_mode"] != "[]") {
			t.Errorf("the reference set %s's controller %s fail_mode %s", tbr, r["controller"], r["fail_mode"])
		}
	}
	if _, owns := any(&Feature{}).(feature.FlowSource); owns {
		t.Error("the trunk feature is a flow source: the reference has no trunk flows")
	}
}
