package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

func TestServerHealthzAndMetrics(t *testing.T) {
	m := New()
	s, err := Listen("127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, nil) }()
	base := "http://" + s.Addr()

	if code, _ := get(t, base+"/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("healthz before sync = %d, want 503", code)
	}
	m.SetInSync(true)
	if code, body := get(t, base+"/healthz"); code != http.StatusOK || !strings.Contains(body, "ok") {
		t.Errorf("healthz in sync = %d %q, want 200 ok", code, body)
	}
	m.SetInSync(false)
	if code, _ := get(t, base+"/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("healthz after losing sync = %d, want 503", code)
	}

	m.SetPortsWired(3)
	m.ObservePortWiring(300 * time.Millisecond)
	m.ObserveRPC("update_device_list", 250*time.Millisecond, nil)
	m.ObserveRPC("tunnel_sync", time.Millisecond, errors.New("timeout"))
	m.SetFlows("br-int", map[uint8]int{0: 5, 60: 2})
	m.SetFlows("br-int", map[uint8]int{0: 4}) // table 60 gone
	m.ObserveBundle("br-int", 2*time.Millisecond)
	m.IncResync("revived")
	m.ObserveLoop(time.Millisecond)
	m.IncMalformed("q-agent-notifier-tunnel-update", "not-json")
	m.IncDeclareFailure("q-agent-notifier-port-update", "precondition_failed")
	m.IncDeclareFailure("q-agent-notifier-port-update", "precondition_failed")

	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("metrics = %d", code)
	}
	for _, want := range []string{
		"ovsagent_ports_wired 3",
		"ovsagent_port_wiring_seconds_count 1",
		`ovsagent_rpc_duration_seconds_count{method="update_device_list"} 1`,
		`ovsagent_rpc_errors_total{method="tunnel_sync"} 1`,
		`ovsagent_flows{bridge="br-int",table="0"} 4`,
		`ovsagent_bundle_apply_seconds_count{bridge="br-int"} 1`,
		`ovsagent_resyncs_total{reason="revived"} 1`,
		"ovsagent_loop_duration_seconds_count 1",
		`ovsagent_malformed_messages_total{reason="not-json",topic="q-agent-notifier-tunnel-update"} 1`,
		`ovsagent_amqp_declare_failures_total{queue="q-agent-notifier-port-update",reason="precondition_failed"} 2`,
		"ovsagent_in_sync 0",
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, `table="60"`) {
		t.Errorf("/metrics still has the flows of a table that was emptied")
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
}

func TestNilMetricsRecordNothing(t *testing.T) {
	var m *Metrics
	m.SetPortsWired(1)
	m.ObserveRPC("x", time.Second, errors.New("e"))
	m.SetFlows("br", map[uint8]int{1: 1})
	m.SetInSync(true)
	m.IncDeclareFailure("q", "r")
	if m.InSync() {
		t.Fatal("nil metrics claims in sync")
	}
}

func TestListenBadAddress(t *testing.T) {
	if _, err := Listen("256.0.0.1:0", New()); err == nil {
		t.Fatal("Listen on a bad address succeeded")
	}
}

// TestBucketsCoverMinutes: at 1,000 ports a port waits minutes in the
// server stage; such waits land in buckets of their own, not in +Inf.
func TestBucketsCoverMinutes(t *testing.T) {
	m := New()
	m.ObserveWiringStage("server", 150*time.Second)
	m.ObserveWiringStage("server", 8*time.Minute)
	text := string(m.AppendText(nil))
	for _, want := range []string{
		`ovsagent_port_wiring_stage_seconds_bucket{stage="server",le="120"} 0`,
		`ovsagent_port_wiring_stage_seconds_bucket{stage="server",le="180"} 1`,
		`ovsagent_port_wiring_stage_seconds_bucket{stage="server",le="300"} 1`,
		`ovsagent_port_wiring_stage_seconds_bucket{stage="server",le="600"} 2`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("lacks %q", want)
		}
	}
}

// TestBuildInfo: one ovsagent_build_info sample, 1, naming the Go version
// the binary was built with and a version and revision (or "unknown").
func TestBuildInfo(t *testing.T) {
	text := string(New().AppendText(nil))
	re := regexp.MustCompile(`(?m)^ovsagent_build_info\{goversion="([^"]+)",revision="([^"]+)",version="([^"]+)"\} 1$`)
	got := re.FindAllStringSubmatch(text, -1)
	if len(got) != 1 || got[0][1] != runtime.Version() {
		t.Fatalf("build info samples %q, want one with goversion %s", got, runtime.Version())
	}
	if !strings.Contains(text, "# TYPE ovsagent_build_info gauge\n") {
		t.Error("ovsagent_build_info lacks its TYPE")
	}
	b := string(buildInfoFamily(buildInfo{version: `v1.2.3`, goversion: "go1.26", revision: `abc"d`}).samples(nil))
	if want := `ovsagent_build_info{goversion="go1.26",revision="abc\"d",version="v1.2.3"} 1` + "\n"; b != want {
		t.Errorf("sample %q, want %q", b, want)
	}
}

// TestConnectionGauges: the connection states are read at each scrape
// from whoever owns the connection.
func TestConnectionGauges(t *testing.T) {
	m := New()
	if text := string(m.AppendText(nil)); strings.Contains(text, "_connected") {
		t.Fatalf("states exported before anything is watched:\n%s", text)
	}
	var amqp, ovsdb, brInt atomic.Bool
	m.WatchAMQP(amqp.Load)
	m.WatchOVSDB(ovsdb.Load)
	m.WatchOpenFlow("br-int", brInt.Load)
	m.WatchOpenFlow("br-tun", func() bool { return true })
	check := func(want ...string) {
		t.Helper()
		text := string(m.AppendText(nil))
		for _, w := range want {
			if !strings.Contains(text, "\n"+w+"\n") {
				t.Errorf("lacks %q", w)
			}
		}
	}
	check("ovsagent_amqp_connected 0", "ovsagent_ovsdb_connected 0", `ovsagent_openflow_connected{bridge="br-int"} 0`,
		`ovsagent_openflow_connected{bridge="br-tun"} 1`)
	amqp.Store(true)
	ovsdb.Store(true)
	brInt.Store(true)
	check("ovsagent_amqp_connected 1", "ovsagent_ovsdb_connected 1", `ovsagent_openflow_connected{bridge="br-int"} 1`)
	var nilM *Metrics
	nilM.WatchAMQP(amqp.Load) // records nothing, does not panic
}
