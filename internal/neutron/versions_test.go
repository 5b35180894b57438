package neutron

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/oslo"
)

func TestNegotiationSteps(t *testing.T) {
	ladder := []string{"1.11", "1.10", "1.7"}
	n := negotiation{ladder: ladder}
	if n.pullVersion() != "1.11" || n.reported() != "1.7" {
		t.Fatalf("start: pull %s report %s, want 1.11 / 1.7 (baseline until proven)", n.pullVersion(), n.reported())
	}
	if n2 := n.produced("1.11", 0); n2.confirmed {
		t.Fatalf("an empty result proves nothing")
	}
	n2, retry := n.refused("1.11")
	if !retry || n2.pullVersion() != "1.10" || n2.reported() != "1.7" {
		t.Fatalf("refused 1.11: retry %v pull %s report %s", retry, n2.pullVersion(), n2.reported())
	}
	// A concurrent pull that asked for 1.11 before the step down: repeat, no change.
	if n3, retry := n2.refused("1.11"); !retry || n3.rung != n2.rung || n3.confirmed != n2.confirmed {
		t.Fatalf("stale refusal: retry %v, %+v", retry, n3)
	}
	n3 := n2.produced("1.10", 2)
	if !n3.confirmed || n3.reported() != "1.10" {
		t.Fatalf("produced 1.10: %+v", n3)
	}
	// A result at a version no longer asked for proves nothing about the current one.
	if n4 := n2.produced("1.11", 1); n4.confirmed {
		t.Fatalf("a late result at 1.11 confirmed 1.10")
	}
	// The server refuses the proven version (downgraded): step down, unproven.
	n4, retry := n3.refused("1.10")
	if !retry || n4.confirmed || n4.pullVersion() != "1.7" || n4.reported() != "1.7" {
		t.Fatalf("refusal of the proven version: %+v retry %v", n4, retry)
	}
	// The baseline refused: nothing lower to ask for.
	if n5, retry := n4.refused("1.7"); retry || n5.rung != n4.rung || n5.confirmed != n4.confirmed {
		t.Fatalf("baseline refused: retry %v %+v", retry, n5)
	}
	for t2, l := range VersionLadders {
		if l[len(l)-1] != ResourceVersions[t2] || l[len(l)-1] != ReportedResourceVersions[t2] {
			t.Errorf("%s: ladder baseline %s, ResourceVersions %s, reported %s", t2, l[len(l)-1], ResourceVersions[t2], ReportedResourceVersions[t2])
		}
		if !slices.IsSortedFunc(l, func(a, b string) int { return -compareVersions(a, b) }) {
			t.Errorf("%s ladder %v not newest first", t2, l)
		}
	}
}

func compareVersions(a, b string) int {
	var am, an, bm, bn int
	fmt.Sscanf(a, "%d.%d", &am, &an)
	fmt.Sscanf(b, "%d.%d", &bm, &bn)
	if am != bm {
		return am - bm
	}
	return an - bn
}

// releaseCapture is refenv/ovo_versions.py's output: what one release's server answered
// bulk_pull at every version of VersionLadders, and its reference agent's versions.
type releaseCapture struct {
	Release  string            `json:"release"`
	Ref      map[string]string `json:"reference_resource_versions"`
	BulkPull map[string]map[string]struct {
		Result []json.RawMessage `json:"result"`
		Error  *struct {
			ExcType string `json:"exc_type"`
			Value   string `json:"value"`
		} `json:"error"`
	} `json:"bulk_pull"`
}

var captureReleases = []string{"zed", "2025.1", "2026.2"}

func loadRelease(t *testing.T, rel string) releaseCapture {
	t.Helper()
	b, err := os.ReadFile("testdata/versions/" + rel + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var c releaseCapture
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// releaseServer answers bulk_pull as the captured release did: its objects at a
// version it produced, its InvalidTargetVersion failure at one it did not.
func releaseServer(c releaseCapture) *fakeRPC {
	return &fakeRPC{answer: func(s sentCall) (any, error) {
		if s.Method != "bulk_pull" {
			return nil, fmt.Errorf("unexpected %s", s.Method)
		}
		rt, _ := s.Args["resource_type"].(string)
		v, _ := s.Args["version"].(string)
		r, ok := c.BulkPull[rt][v]
		if !ok {
			return nil, fmt.Errorf("no capture of %s %s", rt, v)
		}
		if r.Error != nil {
			return nil, &oslo.RemoteError{Class: r.Error.ExcType, Module: "oslo_versionedobjects.exception", Message: r.Error.Value}
		}
		return r.Result, nil
	}}
}

// Against each release's recorded answers, the negotiation ends on exactly the map
// that release's reference agent reports, the push topics follow it, and the number of
// refused pulls is the ladder steps above the release's versions.
func TestNegotiateAgainstReleases(t *testing.T) {
	wantRefused := map[string]int{"zed": 4 + 2 + 1 + 1 + 1, "2025.1": 1 + 1, "2026.2": 0}
	for _, rel := range captureReleases {
		t.Run(rel, func(t *testing.T) {
			c := loadRelease(t, rel)
			rpc := releaseServer(c)
			cl := NewClient(rpc, "h")
			cl.Versions = NewNegotiator(nil)
			var changes []string
			cl.Versions.OnChange(func(rt, v string) { changes = append(changes, rt+"-"+v) })
			before, gen0 := cl.Versions.Reported()
			if !maps.Equal(before, ReportedResourceVersions) {
				t.Fatalf("before any pull, reported %v, want the baseline %v", before, ReportedResourceVersions)
			}
			ctx := context.Background()
			// One port pulled: the types it names are probed with it.
			rs, err := cl.BulkPull(ctx, TypePort, Filter{"id": {"x"}})
			if err != nil || len(rs) != 1 {
				t.Fatalf("port: %d objects, %v", len(rs), err)
			}
			cl.Versions.probeWG.Wait()
			got, gen := cl.Versions.Reported()
			if !maps.Equal(got, c.Ref) {
				t.Errorf("reported %v\nwant the %s reference's %v", got, rel, c.Ref)
			}
			if (gen != gen0) != (rel != "zed") {
				t.Errorf("generation %d -> %d", gen0, gen)
			}
			refused := 0
			for _, s := range rpc.calls {
				if r := c.BulkPull[s.Args["resource_type"].(string)][s.Args["version"].(string)]; r.Error != nil {
					refused++
				}
			}
			if refused != wantRefused[rel] || len(rpc.calls) != refused+len(VersionLadders) {
				t.Errorf("%d calls, %d refused; want %d refused", len(rpc.calls), refused, wantRefused[rel])
			}
			sub := ConsumerConfig{Cache: NewCache(CacheOptions{}), Versions: cl.Versions}
			var topics []string
			for _, s := range sub.Subscriptions() {
				topics = append(topics, s.Topic)
			}
			for rt := range VersionLadders {
				want := "neutron-vo-" + rt + "-" + c.Ref[rt]
				if !slices.Contains(topics, want) {
					t.Errorf("subscriptions %v lack %s", topics, want)
				}
			}
			sort.Strings(changes)
			t.Logf("%s: %d calls, %d refused, changes %v", rel, len(rpc.calls), refused, changes)
			// Pulls after the agreement go straight to the agreed version.
			n := len(rpc.calls)
			if _, err := cl.BulkPull(ctx, TypePort, Filter{"id": {"x"}}); err != nil || len(rpc.calls) != n+1 {
				t.Errorf("second pull: %v, %d calls", err, len(rpc.calls)-n)
			}
		})
	}
}

// While unproven, a pull of many ids asks for one id first, so that a server's
// refusal costs it one object; once proven, pulls go out whole.
func TestUnprovenPullProbesOneID(t *testing.T) {
	c := loadRelease(t, "zed")
	rpc := releaseServer(c)
	cl := NewClient(rpc, "h")
	cl.Versions = NewNegotiator(nil)
	ids := []string{"a", "b", "c", "d"}
	if _, err := cl.BulkPull(context.Background(), TypePort, Filter{"id": ids}); err != nil {
		t.Fatal(err)
	}
	cl.Versions.probeWG.Wait()
	var sizes []string
	for _, s := range portCalls(rpc) {
		n := len(s.Args["filter_kwargs"].(map[string]any)["id"].([]any))
		sizes = append(sizes, fmt.Sprintf("%s:%d", s.Args["version"], n))
	}
	want := []string{"1.11:1", "1.10:1", "1.9:1", "1.8:1", "1.7:1", "1.7:3"}
	if !slices.Equal(sizes, want) {
		t.Errorf("pulls (version:ids) %v, want %v", sizes, want)
	}
	rpc.calls = nil
	if _, err := cl.BulkPull(context.Background(), TypePort, Filter{"id": ids}); err != nil || len(rpc.calls) != 1 {
		t.Errorf("proven: %d calls, %v", len(rpc.calls), err)
	}
}

func portCalls(rpc *fakeRPC) []sentCall {
	var out []sentCall
	for _, s := range rpc.calls {
		if s.Args["resource_type"] == TypePort {
			out = append(out, s)
		}
	}
	return out
}

// Concurrent pulls of an unproven type wait for the first one's answer instead of
// all climbing down the ladder.
func TestUnprovenPullsSerialise(t *testing.T) {
	c := loadRelease(t, "2025.1")
	rpc := releaseServer(c)
	cl := NewClient(rpc, "h")
	cl.Versions = NewNegotiator(nil)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cl.BulkPull(context.Background(), TypePort, Filter{"id": {"x"}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	cl.Versions.probeWG.Wait()
	refused := 0
	calls := portCalls(rpc)
	for _, s := range calls {
		if s.Args["version"] == "1.11" {
			refused++
		}
	}
	if refused != 1 || len(calls) != 9 {
		t.Errorf("%d calls, %d at 1.11; want 9 and 1", len(calls), refused)
	}
}

// Another error than a version refusal is returned and changes nothing.
func TestNegotiationOtherErrors(t *testing.T) {
	rpc := &fakeRPC{answer: func(sentCall) (any, error) {
		return nil, &oslo.RemoteError{Class: "UnsupportedVersion", Message: "x"}
	}}
	cl := NewClient(rpc, "h")
	cl.Versions = NewNegotiator(nil)
	if _, err := cl.BulkPull(context.Background(), TypePort, Filter{"id": {"a"}}); err == nil {
		t.Fatal("no error")
	}
	if v := cl.Versions.PullVersion(TypePort); v != "1.11" || len(rpc.calls) != 1 {
		t.Errorf("after another error: pull %s, %d calls", v, len(rpc.calls))
	}
}

// ignoredFields are the primitive fields the decoders leave out, with why; any other
// field a release sends must be decoded, so that a new one is looked at.
var ignoredFields = map[string]map[string]string{
	TypePort: {
		"data_plane_status": "set by external monitoring, not read by the OVS agent",
		"dhcp_options":      "extra DHCP options: the DHCP agent's",
		"dns":               "dns_name / dns_assignment: DNS integration, not the L2 agent's",
	},
}

func jsonFields(v any) map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(v)
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

// Every primitive the three releases sent, at every version they produce, decodes, keeps
// the fields the agent reads, and carries no field the decoders do not know.
func TestReleasePrimitivesDecode(t *testing.T) {
	known := map[string]map[string]bool{
		TypePort: jsonFields(Port{}), TypeNetwork: jsonFields(Network{}), TypeSubnet: jsonFields(Subnet{}),
		TypeSecurityGroup: jsonFields(SecurityGroup{}), TypeSecurityGroupRule: jsonFields(SecurityGroupRule{}),
	}
	for _, rel := range captureReleases {
		c := loadRelease(t, rel)
		for rt, byVersion := range c.BulkPull {
			for v, r := range byVersion {
				for _, raw := range r.Result {
					res, err := DecodeResource(raw)
					if err != nil {
						t.Errorf("%s %s %s: %v", rel, rt, v, err)
						continue
					}
					var env struct {
						Version string                     `json:"versioned_object.version"`
						Data    map[string]json.RawMessage `json:"versioned_object.data"`
					}
					if err := json.Unmarshal(raw, &env); err != nil {
						t.Fatal(err)
					}
					if env.Version != v {
						t.Errorf("%s %s asked %s, got %s", rel, rt, v, env.Version)
					}
					for k := range env.Data {
						if !known[rt][k] && ignoredFields[rt][k] == "" {
							t.Errorf("%s %s %s: field %q neither decoded nor listed as ignored", rel, rt, v, k)
						}
					}
					checkDecoded(t, rel+" "+rt+" "+v, res)
				}
			}
		}
	}
}

// checkDecoded checks the values the agent reads of refenv/ovo_versions.py's objects
// (objs: a tcp/22 rule from 10.217.0.0/24, a port on a 10.217.0.0/24 subnet).
func checkDecoded(t *testing.T, what string, r Resource) {
	t.Helper()
	switch x := r.(type) {
	case *Port:
		if len(x.FixedIPs) != 1 || !strings.HasPrefix(x.FixedIPs[0].IPAddress, "10.217.0.") || len(x.SecurityGroupIDs) != 1 ||
			x.MACAddress == "" || x.NetworkID == "" || len(x.Bindings) != 1 || x.Bindings[0].Host != "e2e-rv17-nohost" {
			t.Errorf("%s: %+v", what, x)
		}
	case *Network:
		if x.MTU == 0 || len(x.Segments) != 1 || x.Segments[0].NetworkType == "" {
			t.Errorf("%s: %+v", what, x)
		}
	case *Subnet:
		if x.CIDR != "10.217.0.0/24" || x.IPVersion != 4 {
			t.Errorf("%s: %+v", what, x)
		}
	case *SecurityGroup:
		if len(x.Rules) != 3 || !x.Stateful {
			t.Errorf("%s: %d rules, stateful %v", what, len(x.Rules), x.Stateful)
		}
	case *SecurityGroupRule:
		if x.SecurityGroupID == "" || x.Direction == "" {
			t.Errorf("%s: %+v", what, x)
		}
	}
}

// report_state carries resource_versions on the first report and again after the
// negotiated map changed, not on the reports in between.
func TestReporterResendsChangedVersions(t *testing.T) {
	var mu sync.Mutex
	var sent []map[string]any
	rpc := &fakeRPC{answer: func(c sentCall) (any, error) {
		st := c.Args["agent_state"].(map[string]any)["agent_state"].(map[string]any)
		mu.Lock()
		sent = append(sent, st)
		mu.Unlock()
		return "alive", nil
	}}
	versions := map[string]string{"Port": "1.7"}
	gen := uint64(0)
	r := &Reporter{Client: NewClient(rpc, "h"), ResourceVersions: func() (map[string]string, uint64) { return versions, gen }}
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := r.ReportOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	versions, gen = map[string]string{"Port": "1.11"}, 1
	for i := 0; i < 2; i++ {
		if _, err := r.ReportOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, st := range sent {
		rv, _ := st["resource_versions"].(map[string]any)
		got = append(got, fmt.Sprint(rv["Port"]))
	}
	if want := []string{"1.7", "<nil>", "1.11", "<nil>"}; !slices.Equal(got, want) {
		t.Errorf("Port in resource_versions per report %v, want %v", got, want)
	}
}

type recordServer struct {
	mu     sync.Mutex
	topics []string
}

func (s *recordServer) Serve(topic string, eps ...Endpoint) error {
	s.mu.Lock()
	s.topics = append(s.topics, topic)
	s.mu.Unlock()
	return nil
}

// A version agreed after the consumers started adds its push topic, then asks for a
// report (the queue is bound before the server is told to push there).
func TestConsumersFollowAgreedVersion(t *testing.T) {
	c := loadRelease(t, "2026.2")
	cl := NewClient(releaseServer(c), "h")
	cl.Versions = NewNegotiator(nil)
	srv := &recordServer{}
	reported := make(chan []string, 16)
	cfg := ConsumerConfig{Cache: NewCache(CacheOptions{}), Versions: cl.Versions, OnVersions: func() {
		srv.mu.Lock()
		reported <- slices.Clone(srv.topics)
		srv.mu.Unlock()
	}}
	if err := cfg.Serve(srv); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(srv.topics, "neutron-vo-Port-1.7") {
		t.Fatalf("start topics %v", srv.topics)
	}
	if _, err := cl.BulkPull(context.Background(), TypePort, Filter{"id": {"x"}}); err != nil {
		t.Fatal(err)
	}
	// Each change asks for a report once its topic is served; the Port one comes.
	for {
		select {
		case topics := <-reported:
			if slices.Contains(topics, "neutron-vo-Port-1.11") {
				return
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no report asked for with neutron-vo-Port-1.11 served; topics %v", srv.topics)
		}
	}
}

// A pushed object of an unproven type is pulled back once, which settles its version
// (and, for a port, the types it names).
func TestPushedObjectSettlesVersion(t *testing.T) {
	c := loadRelease(t, "2026.2")
	rpc := releaseServer(c)
	cl := NewClient(rpc, "h")
	cl.Versions = NewNegotiator(nil)
	cl.Versions.SetProber(cl.ProbeVersions)
	cfg := ConsumerConfig{Cache: NewCache(CacheOptions{}), Versions: cl.Versions}
	srv := &recordServer{}
	if err := cfg.Serve(srv); err != nil {
		t.Fatal(err)
	}
	push := `{"event_type": "updated", "resource_list": [` + string(c.BulkPull[TypePort]["1.7"].Result[0]) + `]}`
	if _, err := cfg.pushEndpoint(TypePort, "1.7").Methods["push"](context.Background(), &Request{Method: "push", Args: json.RawMessage(push)}); err != nil {
		t.Fatal(err)
	}
	cl.Versions.probeWG.Wait()
	got, _ := cl.Versions.Reported()
	if !maps.Equal(got, c.Ref) {
		t.Errorf("after one pushed port: %v\nwant %v", got, c.Ref)
	}
}

// BulkPullVersions tells the version each object was pulled at: the one the server
// produced after the refusals, for the single-id probe and the rest alike.
func TestBulkPullVersionsReportsPulledVersion(t *testing.T) {
	for rel, want := range map[string]string{"zed": "1.7", "2026.2": "1.11"} {
		cl := NewClient(releaseServer(loadRelease(t, rel)), "h")
		cl.Versions = NewNegotiator(nil)
		rs, versions, err := cl.BulkPullVersions(context.Background(), TypePort, Filter{"id": {"a", "b", "c"}})
		cl.Versions.probeWG.Wait()
		if err != nil || len(rs) == 0 || len(versions) != len(rs) {
			t.Fatalf("%s: %d objects, versions %v, %v", rel, len(rs), versions, err)
		}
		for i, v := range versions {
			if v != want {
				t.Errorf("%s: object %d pulled at %q, want %s", rel, i, v, want)
			}
		}
	}
	var _ VersionedPuller = (*Client)(nil)
}

// An exception the server raises on one object fails the whole bulk_pull (it
// serialises the reply in one go): the pull is asked again in halves until the
// object is alone, and that object is a bad one of an answered pull (its port
// refused), not a failed pull (every port of the batch held as an outage).
func TestServerExceptionIsolatesItsObject(t *testing.T) {
	rpc := &fakeRPC{answer: func(s sentCall) (any, error) {
		for _, id := range s.Args["filter_kwargs"].(map[string]any)["id"].([]any) {
			if id == "bad" {
				return nil, &oslo.RemoteError{Class: "AttributeError", Module: "builtins", Message: "'NoneType' object has no attribute 'id'"}
			}
		}
		return json.RawMessage("[]"), nil
	}}
	cl := NewClient(rpc, "h")
	ids := []string{"a", "b", "c", "bad", "d", "e", "f", "g"}
	rs, _, err := cl.BulkPullVersions(context.Background(), TypePort, Filter{"id": ids})
	bad, failed := SplitPullError(err)
	if failed || len(rs) != 0 || len(bad) != 1 || bad[0].ID != "bad" {
		t.Fatalf("objects %d, bad %v, failed %v (err %v); want only \"bad\" bad, the pull answered", len(rs), bad, failed, err)
	}
	if len(rpc.calls) > 2*4+1 {
		t.Errorf("%d calls for 8 ids, want about two per halving", len(rpc.calls))
	}
	// a timeout is the pull's failure: not split, not an answer
	rpc.calls = nil
	rpc.answer = func(sentCall) (any, error) { return nil, fmt.Errorf("bulk_pull: %w", oslo.ErrTimeout) }
	if _, _, err := cl.BulkPullVersions(context.Background(), TypePort, Filter{"id": ids}); err == nil {
		t.Fatal("a timeout gave no error")
	} else if _, failed := SplitPullError(err); !failed || len(rpc.calls) != 1 {
		t.Errorf("timeout: failed %v after %d calls, want a failed pull after 1", failed, len(rpc.calls))
	}
}
