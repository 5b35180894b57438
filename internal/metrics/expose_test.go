package metrics

import (
	"errors"
	"math"
	"os"
	"os/exec"
	"regexp"
	rm "runtime/metrics"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// observeAll records the observations testdata/exposition.golden was made
// from: the same calls on the client_golang version of this package
// (promhttp's output with the go_* and process_* families cut out), and
// since, the connection states and the buckets for minutes (the build info
// changes with every commit: withoutRuntime drops it).
func observeAll(m *Metrics) {
	m.SetPortsWired(3)
	m.ObservePortWiring(300 * time.Millisecond)
	m.ObserveWiringStage("server", 150*time.Second)
	m.ObserveWiringStage("agent", 3*time.Millisecond)
	m.ObserveWiringStage("server", 3*time.Second)
	m.ObserveRPC("update_device_list", 250*time.Millisecond, nil)
	m.ObserveRPC("tunnel_sync", time.Millisecond, errors.New("timeout"))
	m.SetFlows("br-int", map[uint8]int{0: 5, 60: 2})
	m.SetFlows("br-int", map[uint8]int{0: 4, 10: 1234567})
	m.SetFlows("br-tun", map[uint8]int{22: 1})
	m.ObserveBundle("br-int", 2*time.Millisecond)
	m.IncResync("revived")
	m.IncOwnerRejected("br-int", "fw:port")
	m.IncOwnerRejected("br-int", "fw:port")
	m.SetOwnersRejected("br-int", 1)
	m.ObserveLoop(time.Millisecond)
	m.IncMalformed("q-agent-notifier-tunnel-update", "not-json")
	m.IncMalformed("q-agent\"x\\y", "a\nb")
	m.IncUpdateDeviceList()
	m.SetInSync(true)
	m.WatchAMQP(func() bool { return true })
	m.WatchOVSDB(func() bool { return false })
	m.WatchOpenFlow("br-int", func() bool { return true })
	m.WatchOpenFlow("br-tun", func() bool { return false })
}

// withoutRuntime drops the go_* and process_* families, whose values change
// from run to run, and the build info.
func withoutRuntime(text string) string {
	var out []string
	for _, l := range strings.SplitAfter(text, "\n") {
		name := strings.TrimPrefix(strings.TrimPrefix(l, "# HELP "), "# TYPE ")
		if !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") && !strings.HasPrefix(name, "ovsagent_build_info") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

func TestExpositionGolden(t *testing.T) {
	want, err := os.ReadFile("testdata/exposition.golden")
	if err != nil {
		t.Fatal(err)
	}
	m := New()
	observeAll(m)
	got := withoutRuntime(string(m.AppendText(nil)))
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("exposition differs from client_golang's at line %d:\n got %q\nwant %q", i+1, g, w)
			}
		}
	}
}

// sampleLine matches one sample line of the text format.
var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$`)

// TestRuntimeFamilies: the go_* and process_* families operators read are
// there, each with HELP and TYPE, with plausible values.
func TestRuntimeFamilies(t *testing.T) {
	text := string(New().AppendText(nil))
	values := map[string]float64{}
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		s := sampleLine.FindStringSubmatch(l)
		if s == nil {
			t.Fatalf("not a sample line: %q", l)
		}
		v, err := strconv.ParseFloat(s[3], 64)
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		values[s[1]+s[2]] = v
	}
	rss := values["process_resident_memory_bytes"]
	if rss < 1<<20 || rss > 1<<34 {
		t.Errorf("process_resident_memory_bytes = %v", rss)
	}
	if st := values["process_start_time_seconds"]; math.Abs(st-float64(time.Now().Unix())) > 3600 {
		t.Errorf("process_start_time_seconds = %v, now %d", st, time.Now().Unix())
	}
	for _, name := range []string{
		"process_virtual_memory_bytes", "process_cpu_seconds_total", "process_open_fds", "process_max_fds",
		"process_virtual_memory_max_bytes", "go_goroutines", "go_threads", "go_memstats_heap_inuse_bytes",
		"go_memstats_heap_alloc_bytes", "go_memstats_sys_bytes", "go_gc_duration_seconds_count",
		`go_gc_duration_seconds{quantile="0.5"}`, "go_sched_gomaxprocs_threads", "go_gc_gogc_percent",
	} {
		if _, ok := values[name]; !ok {
			t.Errorf("no %s", name)
		}
		base := strings.SplitN(strings.TrimSuffix(strings.TrimSuffix(name, "_count"), "_sum"), "{", 2)[0]
		if !strings.Contains(text, "# HELP "+base+" ") || !strings.Contains(text, "# TYPE "+base+" ") {
			t.Errorf("%s lacks HELP or TYPE", base)
		}
	}
	if values["go_memstats_heap_inuse_bytes"] <= 0 || values["go_goroutines"] < 1 || values["process_open_fds"] < 3 {
		t.Errorf("implausible: heap_inuse %v goroutines %v open_fds %v", values["go_memstats_heap_inuse_bytes"],
			values["go_goroutines"], values["process_open_fds"])
	}
}

// TestRuntimeMetricNames: every runtime/metrics name read is one this Go
// knows (an unknown one would read as 0 forever).
func TestRuntimeMetricNames(t *testing.T) {
	known := map[string]bool{}
	for _, d := range rm.All() {
		known[d.Name] = true
	}
	for _, c := range memClasses {
		for _, k := range c.keys {
			if !known[k] {
				t.Errorf("%s: runtime/metrics has no %s", c.name, k)
			}
		}
	}
}

func TestHistogramBuckets(t *testing.T) {
	h := newHistogram([]float64{0.1, 1, 10})
	for _, v := range []float64{0.05, 0.1, 0.1000001, 1, 5, 10, 11, 1e9} {
		h.observe(v)
	}
	var got []uint64
	for i := range h.counts {
		got = append(got, h.counts[i].Load())
	}
	// le semantics: a value equal to a bound is in that bound's bucket.
	if want := []uint64{2, 2, 2, 2}; !slices.Equal(got, want) {
		t.Errorf("buckets = %v, want %v", got, want)
	}
	if sum := math.Float64frombits(h.sum.Load()); math.Abs(sum-(1e9+27.2500001)) > 1e-3 {
		t.Errorf("sum = %v", sum)
	}
	v := newVec(func() *histogram { return h }, "x")
	v.with("a", "")
	out := string(histogramFamily("h", "help", v).samples(nil))
	want := `h_bucket{x="a",le="0.1"} 2
h_bucket{x="a",le="1"} 4
h_bucket{x="a",le="10"} 6
h_bucket{x="a",le="+Inf"} 8
h_sum{x="a"} 1.0000000272500001e+09
h_count{x="a"} 8
`
	if out != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", out, want)
	}
}

// TestConcurrentObserve: observations from many goroutines while scraping
// (run with -race) all land, and every scrape's _count equals its +Inf
// bucket.
func TestConcurrentObserve(t *testing.T) {
	m := New()
	const workers, each = 8, 2000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	scraped := make(chan error, 1)
	go func() {
		defer close(scraped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			text := string(m.AppendText(nil))
			inf := regexp.MustCompile(`(?m)^ovsagent_loop_duration_seconds_bucket\{le="\+Inf"\} (\d+)$`).FindStringSubmatch(text)
			cnt := regexp.MustCompile(`(?m)^ovsagent_loop_duration_seconds_count (\d+)$`).FindStringSubmatch(text)
			if inf == nil || cnt == nil || inf[1] != cnt[1] {
				scraped <- errors.New("count and +Inf bucket differ: " + strings.Join(inf, " ") + " / " + strings.Join(cnt, " "))
				return
			}
		}
	}()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			method := []string{"a", "b"}[w%2]
			for i := 0; i < each; i++ {
				m.ObserveLoop(time.Duration(i) * time.Microsecond)
				m.ObserveRPC(method, time.Millisecond, errors.New("x"))
				m.IncMalformed("t", method)
				m.SetPortsWired(i)
				m.SetFlows("br-int", map[uint8]int{uint8(w): i})
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	if err := <-scraped; err != nil {
		t.Fatal(err)
	}
	text := string(m.AppendText(nil))
	for _, want := range []string{
		"ovsagent_loop_duration_seconds_count 16000\n",
		`ovsagent_rpc_duration_seconds_count{method="a"} 8000` + "\n",
		`ovsagent_rpc_errors_total{method="b"} 8000` + "\n",
		`ovsagent_malformed_messages_total{reason="a",topic="t"} 8000` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("lacks %q", want)
		}
	}
	var sum float64
	for i := 0; i < each; i++ {
		sum += (time.Duration(i) * time.Microsecond).Seconds()
	}
	re := regexp.MustCompile(`(?m)^ovsagent_loop_duration_seconds_sum (\S+)$`)
	got, _ := strconv.ParseFloat(re.FindStringSubmatch(text)[1], 64)
	if math.Abs(got-workers*sum) > 1e-6 {
		t.Errorf("sum = %v, want %v", got, workers*sum)
	}
}

// TestObserveDoesNotAllocate: recording is atomics on a child found without
// allocating, once the child exists.
func TestObserveDoesNotAllocate(t *testing.T) {
	m := New()
	m.ObserveRPC("get_devices_details_list", time.Millisecond, errors.New("x"))
	m.ObserveWiringStage("agent", time.Millisecond)
	m.IncMalformed("topic", "reason")
	m.IncResync("revived")
	err := errors.New("x")
	n := testing.AllocsPerRun(200, func() {
		m.ObservePortWiring(time.Millisecond)
		m.ObserveWiringStage("agent", time.Millisecond)
		m.ObserveRPC("get_devices_details_list", time.Millisecond, err)
		m.ObserveBundle("br-int", time.Millisecond)
		m.IncResync("revived")
		m.ObserveLoop(time.Millisecond)
		m.IncMalformed("topic", "reason")
		m.IncUpdateDeviceList()
		m.SetPortsWired(4)
		m.SetInSync(true)
	})
	if n != 0 {
		t.Errorf("%v allocations per round of observations", n)
	}
}

// TestNamesOthersRead: every ovsagent_* name the bench, the e2e suite and
// the docs read, and process_resident_memory_bytes, is in the exposition.
func TestNamesOthersRead(t *testing.T) {
	out, err := exec.Command("grep", "-rhoE", `(ovsagent_[a-z_]+[a-z]|process_resident_memory_bytes|go_memstats_[a-z_]+[a-z])`,
		"../../bench/bench.py", "../../bench/run.sh", "../../bench/README.md", "../../test", "../../docs", "../../README.md").Output()
	if err != nil && len(out) == 0 {
		t.Skipf("grep: %v", err)
	}
	m := New()
	observeAll(m)
	// a labelled family is exposed once a child exists: a refusal (the e2e suite reads it)
	m.IncDeclareFailure("q-agent-notifier-port-update", "precondition_failed")
	text := string(m.AppendText(nil))
	names := map[string]bool{}
	for _, n := range strings.Fields(string(out)) {
		names[n] = true
	}
	var missing []string
	for n := range names {
		// A family name, or a histogram's _sum/_count/_bucket.
		if !strings.Contains(text, "\n"+n+" ") && !strings.Contains(text, "\n"+n+"{") &&
			!strings.Contains(text, "# TYPE "+n+" ") {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	for _, n := range missing {
		t.Errorf("%s is read elsewhere in the repository but not exported", n)
	}
}
