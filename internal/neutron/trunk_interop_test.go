//go:build trunkserver && integration

package neutron_test

// The trunk RPC against a real Zed neutron-server with the trunk service plugin. The
// shared refenv server has service_plugins empty, so this runs against the private one
// refenv/trunkserver.sh starts (own database, vhost and port; no e2e lock):
//
//	refenv/trunkserver.sh start
//	NEUTRON_URL=http://127.0.0.1:9698 TRANSPORT_URL=rabbit://guest:guest@127.0.0.1:5672/neutron-trunk \
//	  go test -tags trunkserver,integration -count=1 -run TestTrunkRPCRealServer -v ./internal/neutron

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/neutron"
	"github.com/ovsagent/ovsagent/internal/neutron/neutrontest"
)

type trunkPushes struct {
	mu     sync.Mutex
	trunks []*neutron.TrunkPush
	subs   []*neutron.SubPortPush
	c      chan struct{}
}

func (r *trunkPushes) TrunkPushed(_ context.Context, p *neutron.TrunkPush) error {
	r.mu.Lock()
	r.trunks = append(r.trunks, p)
	r.mu.Unlock()
	r.c <- struct{}{}
	return nil
}

func (r *trunkPushes) SubPortsPushed(_ context.Context, p *neutron.SubPortPush) error {
	r.mu.Lock()
	r.subs = append(r.subs, p)
	r.mu.Unlock()
	r.c <- struct{}{}
	return nil
}

// waitFor waits until cond holds over what was pushed.
func (r *trunkPushes) waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-r.c:
		case <-ctx.Done():
			t.Fatalf("no %s pushed (trunk pushes %d, subport pushes %d)", what, len(r.trunks), len(r.subs))
		}
	}
}

type apiTrunk struct {
	ID       string `json:"id"`
	PortID   string `json:"port_id"`
	Status   string `json:"status"`
	SubPorts []struct {
		PortID         string `json:"port_id"`
		SegmentationID int    `json:"segmentation_id"`
	} `json:"sub_ports"`
}

func TestTrunkRPCRealServer(t *testing.T) {
	api := neutrontest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := startAgent(t, ctx)
	t.Cleanup(func() { _ = api.DeleteAgentsOnHost(context.Background(), a.host) })
	rec := &trunkPushes{c: make(chan struct{}, 64)}
	rpc := neutron.Oslo{T: a.tr}
	for _, s := range neutron.TrunkSubscriptions(rec, func(rt string, err error) { t.Errorf("%s push did not decode: %v", rt, err) }) {
		if err := rpc.Serve(s.Topic, s.Endpoints...); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := a.reporter.ReportOnce(ctx); err != nil || res != neutron.ReportNew {
		t.Fatalf("report_state = %q, %v", res, err)
	}

	var nets [3]string
	var ports [3]neutrontest.Port
	for i := range nets {
		n, err := api.CreateNetwork(ctx, "trunk-"+a.host, nil)
		if err != nil {
			t.Fatal(err)
		}
		nets[i] = n.ID
		t.Cleanup(func() { _ = api.DeleteNetwork(context.Background(), n.ID) })
		p, err := api.CreatePort(ctx, n.ID, "trunk-port", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
		t.Cleanup(func() { _ = api.DeletePort(context.Background(), p.ID) })
	}
	parent, sub1, sub2 := ports[0], ports[1], ports[2]
	// Subports are created without device_owner (the trunk plugin sets trunk:subport).
	for _, p := range []neutrontest.Port{sub1, sub2} {
		if _, err := api.UpdatePort(ctx, p.ID, map[string]any{"device_owner": "", "device_id": ""}); err != nil {
			t.Fatal(err)
		}
	}

	var tr struct {
		Trunk apiTrunk `json:"trunk"`
	}
	body := map[string]any{"trunk": map[string]any{"port_id": parent.ID, "name": "t-" + a.host, "project_id": api.Project,
		"sub_ports": []map[string]any{{"port_id": sub1.ID, "segmentation_type": "vlan", "segmentation_id": 101}}}}
	if err := api.Do(ctx, http.MethodPost, "/trunks", body, &tr); err != nil {
		t.Fatal(err)
	}
	trunkID := tr.Trunk.ID
	t.Cleanup(func() { _ = api.Do(context.Background(), http.MethodDelete, "/trunks/"+trunkID, nil, nil) })
	rec.waitFor(t, ctx, "trunk created", func() bool {
		for _, p := range rec.trunks {
			if p.EventType == neutron.TrunkEventCreated && len(p.Trunks) == 1 && p.Trunks[0].ID == trunkID && p.Trunks[0].PortID == parent.ID {
				return true
			}
		}
		return false
	})

	// The parent bound to our host gets the trunk bridge name in its vif_details (what
	// os-vif plugs the VM into).
	if _, err := api.UpdatePort(ctx, parent.ID, map[string]any{"binding:host_id": a.host}); err != nil {
		t.Fatal(err)
	}
	var pv struct {
		Port struct {
			VIFDetails map[string]any `json:"binding:vif_details"`
		} `json:"port"`
	}
	if err := api.Do(ctx, http.MethodGet, "/ports/"+parent.ID, nil, &pv); err != nil {
		t.Fatal(err)
	}
	if want := ("tbr-" + trunkID)[:14]; pv.Port.VIFDetails["bridge_name"] != want {
		t.Errorf("parent vif_details bridge_name %v, want %s", pv.Port.VIFDetails["bridge_name"], want)
	}

	tc := a.client.Trunk()
	got, err := tc.GetTrunkDetails(ctx, parent.ID)
	if err != nil || got == nil {
		t.Fatalf("get_trunk_details: %+v %v", got, err)
	}
	if got.ID != trunkID || got.PortID != parent.ID || len(got.SubPorts) != 1 || got.SubPorts[0].PortID != sub1.ID ||
		got.SubPorts[0].SegmentationID != 101 || got.SubPorts[0].TrunkID != trunkID || got.SubPorts[0].SegmentationType != "vlan" {
		t.Fatalf("get_trunk_details: %+v", got)
	}
	if none, err := tc.GetTrunkDetails(ctx, sub1.ID); none != nil || err != nil {
		t.Fatalf("get_trunk_details of a non-parent: %+v %v", none, err)
	}

	bound, err := tc.UpdateSubportBindings(ctx, got.SubPorts)
	if err != nil {
		t.Fatal(err)
	}
	if b := bound[trunkID]; len(b) != 1 || b[0].ID != sub1.ID || b[0].MACAddress != sub1.MACAddress || b[0].HostID != a.host || b[0].VIFType != "ovs" {
		t.Fatalf("update_subport_bindings: %+v", bound)
	}
	if p, err := api.GetPort(ctx, sub1.ID); err != nil || p.HostID != a.host || p.DeviceOwner != neutron.TrunkSubportOwner {
		t.Fatalf("subport after binding: %+v %v", p, err)
	}
	trunkStatus := func() string {
		var r struct {
			Trunk apiTrunk `json:"trunk"`
		}
		if err := api.Do(ctx, http.MethodGet, "/trunks/"+trunkID, nil, &r); err != nil {
			t.Fatal(err)
		}
		return r.Trunk.Status
	}
	if s := trunkStatus(); s != neutron.TrunkBuild {
		t.Errorf("trunk status after binding %q, want BUILD (the server's)", s)
	}
	for _, s := range []string{neutron.TrunkActive, neutron.TrunkDegraded, neutron.TrunkActive} {
		if err := tc.UpdateTrunkStatus(ctx, trunkID, s); err != nil {
			t.Fatal(err)
		}
		if got := trunkStatus(); got != s {
			t.Fatalf("trunk status %q after update_trunk_status(%s)", got, s)
		}
	}

	// Subports added and removed live arrive on the SubPort topic.
	add := map[string]any{"sub_ports": []map[string]any{{"port_id": sub2.ID, "segmentation_type": "vlan", "segmentation_id": 102}}}
	if err := api.Do(ctx, http.MethodPut, "/trunks/"+trunkID+"/add_subports", add, nil); err != nil {
		t.Fatal(err)
	}
	subPushed := func(event string) func() bool {
		return func() bool {
			for _, p := range rec.subs {
				if p.EventType == event && len(p.SubPorts) == 1 && p.SubPorts[0] == (neutron.SubPort{PortID: sub2.ID, TrunkID: trunkID, SegmentationType: "vlan", SegmentationID: 102}) {
					return true
				}
			}
			return false
		}
	}
	rec.waitFor(t, ctx, "subport created", subPushed(neutron.TrunkEventCreated))
	rm := map[string]any{"sub_ports": []map[string]any{{"port_id": sub2.ID}}}
	if err := api.Do(ctx, http.MethodPut, "/trunks/"+trunkID+"/remove_subports", rm, nil); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, ctx, "subport deleted", subPushed(neutron.TrunkEventDeleted))

	// Unbound parent first: a trunk whose parent is in use cannot be deleted.
	if _, err := api.UpdatePort(ctx, parent.ID, map[string]any{"binding:host_id": ""}); err != nil {
		t.Fatal(err)
	}
	if err := api.Do(ctx, http.MethodDelete, "/trunks/"+trunkID, nil, nil); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, ctx, "trunk deleted", func() bool {
		for _, p := range rec.trunks {
			if p.EventType == neutron.TrunkEventDeleted && len(p.Trunks) == 1 && p.Trunks[0].ID == trunkID {
				return true
			}
		}
		return false
	})
	if none, err := tc.GetTrunkDetails(ctx, parent.ID); none != nil || err != nil {
		t.Fatalf("get_trunk_details after delete: %+v %v", none, err)
	}
}
