package neutron

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// testdata/trunk/<release>.json are written by refenv/trunk_primitives.py with each
// release's own neutron (Zed on the host, 2026.2 in its chroot).
type trunkFixture struct {
	Release         string          `json:"release"`
	TrunkVersion    string          `json:"trunk_version"`
	SubPortVersion  string          `json:"subport_version"`
	GetTrunkDetails json.RawMessage `json:"get_trunk_details"`
	SubPortPush     json.RawMessage `json:"subport_push"`
}

func trunkFixtures(t *testing.T) map[string]trunkFixture {
	t.Helper()
	files, err := filepath.Glob("testdata/trunk/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no trunk fixtures: %v", err)
	}
	out := map[string]trunkFixture{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fx trunkFixture
		if err := json.Unmarshal(b, &fx); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = fx
	}
	return out
}

const (
	fxTrunk  = "7a4e42e6-2b1c-4e4a-9d8e-3c1f3b9a0c11"
	fxParent = "1b2d3c4e-0f1a-4b2c-8d3e-4f5a6b7c8d90"
	fxSub1   = "2c3d4e5f-1a2b-4c3d-9e4f-5a6b7c8d9e01"
	fxSub2   = "3d4e5f6a-2b3c-4d4e-8f5a-6b7c8d9e0f12"
)

var fxSubPorts = []SubPort{
	{PortID: fxSub1, TrunkID: fxTrunk, SegmentationType: "vlan", SegmentationID: 101},
	{PortID: fxSub2, TrunkID: fxTrunk, SegmentationType: "vlan", SegmentationID: 102},
}

func TestDecodeTrunkReleases(t *testing.T) {
	want := Trunk{ID: fxTrunk, ProjectID: "demo", Name: "t1", PortID: fxParent, Status: "DOWN", AdminStateUp: true, SubPorts: fxSubPorts}
	for name, fx := range trunkFixtures(t) {
		t.Run(name, func(t *testing.T) {
			if fx.TrunkVersion != TrunkVersion || fx.SubPortVersion != SubPortVersion {
				t.Errorf("%s sends Trunk %s / SubPort %s, the agent speaks %s / %s", fx.Release, fx.TrunkVersion, fx.SubPortVersion, TrunkVersion, SubPortVersion)
			}
			got, err := DecodeTrunk(fx.GetTrunkDetails)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("trunk:\n got %+v\nwant %+v", got, want)
			}
			p, err := DecodeSubPortPush(fx.SubPortPush)
			if err != nil {
				t.Fatal(err)
			}
			if p.EventType != TrunkEventCreated || !reflect.DeepEqual(p.SubPorts, fxSubPorts) {
				t.Errorf("subport push: %+v", p)
			}
		})
	}
}

func subPrim(data string) string {
	return `{"versioned_object.name":"SubPort","versioned_object.namespace":"versionedobjects","versioned_object.version":"1.0","versioned_object.data":` + data + `}`
}

func trunkPrim(version, data string) string {
	return `{"versioned_object.name":"Trunk","versioned_object.namespace":"versionedobjects","versioned_object.version":"` + version + `","versioned_object.data":` + data + `}`
}

func TestDecodeTrunkShapes(t *testing.T) {
	// A Trunk 1.0 (tenant_id) is accepted; subports without trunk_id get the trunk's;
	// admin_state_up absent means up (the field's default in the API).
	got, err := DecodeTrunk([]byte(trunkPrim("1.0", `{"id":"t","tenant_id":"p","port_id":"pp","sub_ports":[`+
		subPrim(`{"port_id":"s","segmentation_type":"vlan","segmentation_id":7}`)+`]}`)))
	if err != nil {
		t.Fatal(err)
	}
	want := Trunk{ID: "t", ProjectID: "p", PortID: "pp", AdminStateUp: true, SubPorts: []SubPort{{PortID: "s", TrunkID: "t", SegmentationType: "vlan", SegmentationID: 7}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v want %+v", got, want)
	}
	bad := []struct{ name, in, errPart string }{
		{"major 2", trunkPrim("2.0", `{"id":"t","port_id":"p"}`), "incompatible"},
		{"no id", trunkPrim("1.1", `{"port_id":"p"}`), "without id"},
		{"no parent", trunkPrim("1.1", `{"id":"t"}`), "without id or port_id"},
		{"not a trunk", subPrim(`{"port_id":"s"}`), `got "SubPort"`},
		{"subport without port", trunkPrim("1.1", `{"id":"t","port_id":"p","sub_ports":[`+subPrim(`{"segmentation_id":3}`)+`]}`), "SubPort without port_id"},
		{"subport of another type", trunkPrim("1.1", `{"id":"t","port_id":"p","sub_ports":[`+trunkPrim("1.1", `{}`)+`]}`), `got "Trunk"`},
		{"seg id a string", trunkPrim("1.1", `{"id":"t","port_id":"p","sub_ports":[`+subPrim(`{"port_id":"s","segmentation_id":"x"}`)+`]}`), "Trunk"},
		{"not json", `{"versioned_object.name":`, "Trunk"},
	}
	for _, c := range bad {
		if _, err := DecodeTrunk([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.errPart) {
			t.Errorf("%s: err %v, want it to contain %q", c.name, err, c.errPart)
		}
	}
	var ve *VersionError
	if _, err := DecodeTrunk([]byte(trunkPrim("2.0", `{"id":"t","port_id":"p"}`))); !errors.As(err, &ve) {
		t.Errorf("major 2: %v is not a VersionError", err)
	}
}

func TestDecodeTrunkPushes(t *testing.T) {
	args := `{"resource_list":[` + trunkPrim("1.1", `{"id":"t","port_id":"p"}`) + `],"event_type":"deleted"}`
	p, err := DecodeTrunkPush([]byte(args))
	if err != nil || p.EventType != TrunkEventDeleted || len(p.Trunks) != 1 || p.Trunks[0].ID != "t" {
		t.Fatalf("trunk push: %+v %v", p, err)
	}
	bad := map[string]string{
		"event":           `{"resource_list":[],"event_type":"exploded"}`,
		"no list":         `{"event_type":"created"}`,
		"subport no tid":  `{"resource_list":[` + subPrim(`{"port_id":"s"}`) + `],"event_type":"created"}`,
		"trunk on subtop": `{"resource_list":[` + trunkPrim("1.1", `{"id":"t","port_id":"p"}`) + `],"event_type":"created"}`,
	}
	for name, a := range bad {
		if _, err := DecodeSubPortPush([]byte(a)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := DecodeTrunkPush([]byte(`{"resource_list":[` + subPrim(`{"port_id":"s","trunk_id":"t"}`) + `],"event_type":"created"}`)); err == nil {
		t.Error("a SubPort on the Trunk topic decoded")
	}
}

type recTrunkHandler struct {
	trunks []*TrunkPush
	subs   []*SubPortPush
}

func (r *recTrunkHandler) TrunkPushed(_ context.Context, p *TrunkPush) error {
	r.trunks = append(r.trunks, p)
	return nil
}

func (r *recTrunkHandler) SubPortsPushed(_ context.Context, p *SubPortPush) error {
	r.subs = append(r.subs, p)
	return nil
}

func TestTrunkSubscriptions(t *testing.T) {
	h := &recTrunkHandler{}
	var bad []string
	subs := TrunkSubscriptions(h, func(rt string, err error) { bad = append(bad, rt) })
	var topics []string
	for _, s := range subs {
		topics = append(topics, s.Topic)
	}
	// The topics the reference's TrunkSkeleton consumes (resource_type_versioned_topic).
	if want := []string{"neutron-vo-SubPort-1.0", "neutron-vo-Trunk-1.1"}; !reflect.DeepEqual(topics, want) {
		t.Fatalf("topics %v want %v", topics, want)
	}
	push := func(i int, args string) error {
		_, err := subs[i].Endpoints[0].Methods["push"](context.Background(), &Request{Method: "push", Version: "1.1", Args: json.RawMessage(args)})
		return err
	}
	for _, fx := range trunkFixtures(t) {
		if err := push(0, string(fx.SubPortPush)); err != nil {
			t.Fatal(err)
		}
	}
	if err := push(0, `{"resource_list":[],"event_type":"deleted"}`); err != nil {
		t.Fatal(err)
	}
	if err := push(1, `{"resource_list":[`+trunkPrim("1.1", `{"id":"t","port_id":"p"}`)+`],"event_type":"created"}`); err != nil {
		t.Fatal(err)
	}
	if err := push(0, `{"resource_list":[1],"event_type":"created"}`); !errors.Is(err, ErrBadArgs) {
		t.Errorf("bad push: %v", err)
	}
	if len(h.subs) != len(trunkFixtures(t)) || len(h.trunks) != 1 || !reflect.DeepEqual(bad, []string{TypeSubPort}) {
		t.Errorf("delivered %d subport pushes, %d trunk pushes; errors %v", len(h.subs), len(h.trunks), bad)
	}
}

func TestTrunkClient(t *testing.T) {
	fx := trunkFixtures(t)["zed.json"]
	f := &fakeRPC{answer: func(c sentCall) (any, error) {
		switch c.Method {
		case "pull":
			if c.Args["resource_id"] == fxParent {
				return fx.GetTrunkDetails, nil
			}
			return nil, nil
		case "update_subport_bindings":
			return json.RawMessage(`{"` + fxTrunk + `":[{"id":"` + fxSub1 + `","mac_address":"FA:16:3E:00:00:01","binding:host_id":"hv1","binding:vif_type":"ovs"}]}`), nil
		}
		return nil, nil
	}}
	tc := NewClient(f, "hv1").Trunk()
	ctx := context.Background()
	tr, err := tc.GetTrunkDetails(ctx, fxParent)
	if err != nil || tr == nil || tr.ID != fxTrunk || len(tr.SubPorts) != 2 {
		t.Fatalf("get_trunk_details: %+v %v", tr, err)
	}
	if tr, err := tc.GetTrunkDetails(ctx, "other"); tr != nil || err != nil {
		t.Fatalf("no trunk: %+v %v", tr, err)
	}
	if err := tc.UpdateTrunkStatus(ctx, fxTrunk, TrunkDegraded); err != nil {
		t.Fatal(err)
	}
	if err := tc.UpdateTrunkStatus(ctx, fxTrunk, "GREEN"); err == nil {
		t.Error("unknown status sent")
	}
	bound, err := tc.UpdateSubportBindings(ctx, fxSubPorts)
	if err != nil {
		t.Fatal(err)
	}
	if b := bound[fxTrunk]; len(b) != 1 || b[0].ID != fxSub1 || b[0].MACAddress != "fa:16:3e:00:00:01" || b[0].HostID != "hv1" {
		t.Errorf("bindings %+v", bound)
	}
	// What went on the wire: the reference's targets and arguments.
	type sent struct {
		T Target
		M string
	}
	var got []sent
	for _, c := range f.calls {
		got = append(got, sent{c.Target, c.Method})
	}
	plugin := Target{Topic: "q-plugin", Version: "1.1"}
	trunk := Target{Topic: "trunk", Version: "1.0", Namespace: "trunk"}
	want := []sent{{plugin, "pull"}, {plugin, "pull"}, {trunk, "update_trunk_status"}, {trunk, "update_subport_bindings"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("calls %+v\nwant %+v", got, want)
	}
	if a := f.calls[0].Args; a["resource_type"] != "Trunk" || a["version"] != "1.1" || a["resource_id"] != fxParent {
		t.Errorf("pull args %v", a)
	}
	if a := f.calls[2].Args; a["trunk_id"] != fxTrunk || a["status"] != "DEGRADED" || len(a) != 2 {
		t.Errorf("update_trunk_status args %v", a)
	}
	// update_subport_bindings carries plain dicts of the subports' fields (what oslo's
	// JSON encoding makes of the reference's SubPort objects).
	var sentSubs []SubPort
	b, _ := json.Marshal(f.calls[3].Args["subports"])
	if err := json.Unmarshal(b, &sentSubs); err != nil || !reflect.DeepEqual(sentSubs, fxSubPorts) {
		t.Errorf("subports sent %s: %v", b, err)
	}
	var keys []map[string]any
	_ = json.Unmarshal(b, &keys)
	for _, k := range keys {
		if len(k) != 4 {
			t.Errorf("subport sent with keys %v, want the 4 fields", k)
		}
	}
	if _, err := tc.UpdateSubportBindings(ctx, []SubPort{{PortID: "x"}}); err == nil {
		t.Error("subport without trunk_id sent")
	}
	// A reply for another parent is not taken for this one.
	f.answer = func(c sentCall) (any, error) { return fx.GetTrunkDetails, nil }
	if _, err := tc.GetTrunkDetails(ctx, "other"); !errors.Is(err, ErrBadReply) {
		t.Errorf("mismatched parent: %v", err)
	}
}
