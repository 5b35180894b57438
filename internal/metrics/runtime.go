package metrics

import (
	"bytes"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	rm "runtime/metrics"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The go_* and process_* families operators expect from a Go exporter, with
// client_golang's names and help texts, read at scrape time only: a few
// scalar runtime/metrics samples (no histograms, nothing kept between
// scrapes) and /proc/self. Left out: go_memstats_* that need a
// stop-the-world ReadMemStats (lookups, and the *_bytes of classes
// runtime/metrics does not split the same way), and
// process_network_{receive,transmit}_bytes_total, which were the network
// namespace's counters (/proc/self/net/netstat), not the process'.

// memClass is one go_* family summing runtime/metrics samples.
type memClass struct {
	name, help, typ string
	keys            []string
}

var memClasses = []memClass{
	{"go_gc_gogc_percent", "Heap size target percentage configured by the user, otherwise 100. This value is set by the GOGC environment variable, and the runtime/debug.SetGCPercent function. Sourced from /gc/gogc:percent.", "gauge",
		[]string{"/gc/gogc:percent"}},
	{"go_gc_gomemlimit_bytes", "Go runtime memory limit configured by the user, otherwise math.MaxInt64. This value is set by the GOMEMLIMIT environment variable, and the runtime/debug.SetMemoryLimit function. Sourced from /gc/gomemlimit:bytes.", "gauge",
		[]string{"/gc/gomemlimit:bytes"}},
	{"go_memstats_alloc_bytes", "Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.", "gauge",
		[]string{"/memory/classes/heap/objects:bytes"}},
	{"go_memstats_alloc_bytes_total", "Total number of bytes allocated in heap until now, even if released already. Equals to /gc/heap/allocs:bytes.", "counter",
		[]string{"/gc/heap/allocs:bytes"}},
	{"go_memstats_buck_hash_sys_bytes", "Number of bytes used by the profiling bucket hash table. Equals to /memory/classes/profiling/buckets:bytes.", "gauge",
		[]string{"/memory/classes/profiling/buckets:bytes"}},
	{"go_memstats_frees_total", "Total number of heap objects frees. Equals to /gc/heap/frees:objects + /gc/heap/tiny/allocs:objects.", "counter",
		[]string{"/gc/heap/frees:objects", "/gc/heap/tiny/allocs:objects"}},
	{"go_memstats_gc_sys_bytes", "Number of bytes used for garbage collection system metadata. Equals to /memory/classes/metadata/other:bytes.", "gauge",
		[]string{"/memory/classes/metadata/other:bytes"}},
	{"go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes. Equals to /memory/classes/heap/objects:bytes.", "gauge",
		[]string{"/memory/classes/heap/objects:bytes"}},
	{"go_memstats_heap_idle_bytes", "Number of heap bytes waiting to be used. Equals to /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", "gauge",
		[]string{"/memory/classes/heap/released:bytes", "/memory/classes/heap/free:bytes"}},
	{"go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes", "gauge",
		[]string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes"}},
	{"go_memstats_heap_objects", "Number of currently allocated objects. Equals to /gc/heap/objects:objects.", "gauge",
		[]string{"/gc/heap/objects:objects"}},
	{"go_memstats_heap_released_bytes", "Number of heap bytes released to OS. Equals to /memory/classes/heap/released:bytes.", "gauge",
		[]string{"/memory/classes/heap/released:bytes"}},
	{"go_memstats_heap_sys_bytes", "Number of heap bytes obtained from system. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes + /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", "gauge",
		[]string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes", "/memory/classes/heap/released:bytes", "/memory/classes/heap/free:bytes"}},
	{"go_memstats_mallocs_total", "Total number of heap objects allocated, both live and gc-ed. Semantically a counter version for go_memstats_heap_objects gauge. Equals to /gc/heap/allocs:objects + /gc/heap/tiny/allocs:objects.", "counter",
		[]string{"/gc/heap/allocs:objects", "/gc/heap/tiny/allocs:objects"}},
	{"go_memstats_mcache_inuse_bytes", "Number of bytes in use by mcache structures. Equals to /memory/classes/metadata/mcache/inuse:bytes.", "gauge",
		[]string{"/memory/classes/metadata/mcache/inuse:bytes"}},
	{"go_memstats_mcache_sys_bytes", "Number of bytes used for mcache structures obtained from system. Equals to /memory/classes/metadata/mcache/inuse:bytes + /memory/classes/metadata/mcache/free:bytes.", "gauge",
		[]string{"/memory/classes/metadata/mcache/inuse:bytes", "/memory/classes/metadata/mcache/free:bytes"}},
	{"go_memstats_mspan_inuse_bytes", "Number of bytes in use by mspan structures. Equals to /memory/classes/metadata/mspan/inuse:bytes.", "gauge",
		[]string{"/memory/classes/metadata/mspan/inuse:bytes"}},
	{"go_memstats_mspan_sys_bytes", "Number of bytes used for mspan structures obtained from system. Equals to /memory/classes/metadata/mspan/inuse:bytes + /memory/classes/metadata/mspan/free:bytes.", "gauge",
		[]string{"/memory/classes/metadata/mspan/inuse:bytes", "/memory/classes/metadata/mspan/free:bytes"}},
	{"go_memstats_next_gc_bytes", "Number of heap bytes when next garbage collection will take place. Equals to /gc/heap/goal:bytes.", "gauge",
		[]string{"/gc/heap/goal:bytes"}},
	{"go_memstats_other_sys_bytes", "Number of bytes used for other system allocations. Equals to /memory/classes/other:bytes.", "gauge",
		[]string{"/memory/classes/other:bytes"}},
	{"go_memstats_stack_inuse_bytes", "Number of bytes obtained from system for stack allocator in non-CGO environments. Equals to /memory/classes/heap/stacks:bytes.", "gauge",
		[]string{"/memory/classes/heap/stacks:bytes"}},
	{"go_memstats_stack_sys_bytes", "Number of bytes obtained from system for stack allocator. Equals to /memory/classes/heap/stacks:bytes + /memory/classes/os-stacks:bytes.", "gauge",
		[]string{"/memory/classes/heap/stacks:bytes", "/memory/classes/os-stacks:bytes"}},
	{"go_memstats_sys_bytes", "Number of bytes obtained from system. Equals to /memory/classes/total:byte.", "gauge",
		[]string{"/memory/classes/total:bytes"}},
	{"go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting, or the number of operating system threads that can execute user-level Go code simultaneously. Sourced from /sched/gomaxprocs:threads.", "gauge",
		[]string{"/sched/gomaxprocs:threads"}},
}

// sampleValue is a scalar runtime/metrics sample as a float (0 for a name
// this runtime does not know).
func sampleValue(s rm.Sample) float64 {
	switch s.Value.Kind() {
	case rm.KindUint64:
		return float64(s.Value.Uint64())
	case rm.KindFloat64:
		return s.Value.Float64()
	}
	return 0
}

// goFamilies reads the go_* families.
func goFamilies() []family {
	var samples []rm.Sample
	index := map[string]int{}
	for _, c := range memClasses {
		for _, k := range c.keys {
			if _, ok := index[k]; !ok {
				index[k] = len(samples)
				samples = append(samples, rm.Sample{Name: k})
			}
		}
	}
	rm.Read(samples)
	fams := make([]family, 0, len(memClasses)+5)
	for _, c := range memClasses {
		v := 0.0
		for _, k := range c.keys {
			v += sampleValue(samples[index[k]])
		}
		fams = append(fams, valueFamily(c.name, c.help, c.typ, v))
	}
	threads, _ := runtime.ThreadCreateProfile(nil)
	fams = append(fams,
		valueFamily("go_goroutines", "Number of goroutines that currently exist.", "gauge", float64(runtime.NumGoroutine())),
		valueFamily("go_threads", "Number of OS threads created.", "gauge", float64(threads)),
		family{"go_info", "Information about the Go environment.", "gauge", func(b []byte) []byte {
			b = append(b, `go_info{version="`...)
			b = appendEscaped(b, runtime.Version(), true)
			return append(b, "\"} 1\n"...)
		}})
	// The GC pause summary as client_golang made it from debug.ReadGCStats:
	// quantiles 0, .25, .5, .75, 1 of the recent pauses, their total, the
	// number of collections.
	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&gc)
	fams = append(fams,
		family{"go_gc_duration_seconds", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.", "summary", func(b []byte) []byte {
			for i, q := range gc.PauseQuantiles {
				b = appendName(b, "go_gc_duration_seconds", "", labels{}, [2]string{}, "quantile", float64(i)/4)
				b = appendFloat(b, q.Seconds())
				b = append(b, '\n')
			}
			b = append(b, "go_gc_duration_seconds_sum "...)
			b = appendFloat(b, gc.PauseTotal.Seconds())
			b = append(b, "\ngo_gc_duration_seconds_count "...)
			b = strconv.AppendInt(b, gc.NumGC, 10)
			return append(b, '\n')
		}},
		valueFamily("go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", "gauge",
			float64(gc.LastGC.UnixNano())/1e9))
	return fams
}

// userHZ is the unit of /proc's CPU times (USER_HZ, 100 on every Linux
// ABI the agent runs on; procfs assumed the same).
const userHZ = 100

var bootTime = sync.OnceValue(func() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, []byte("btime ")); ok {
			t, _ := strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
			return t
		}
	}
	return 0
})

// processFamilies reads the process_* families from /proc/self; what cannot
// be read is left out.
func processFamilies() []family {
	var fams []family
	if st, err := os.ReadFile("/proc/self/stat"); err == nil {
		// Fields after the command name, which is in parentheses and may hold
		// spaces: f[0] is field 3 (state), so field n is f[n-3].
		if i := bytes.LastIndexByte(st, ')'); i >= 0 {
			f := bytes.Fields(st[i+1:])
			if len(f) >= 22 {
				num := func(n int) float64 {
					v, _ := strconv.ParseUint(string(f[n-3]), 10, 64)
					return float64(v)
				}
				fams = append(fams,
					valueFamily("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", "counter", (num(14)+num(15))/userHZ),
					valueFamily("process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge", num(23)),
					valueFamily("process_resident_memory_bytes", "Resident memory size in bytes.", "gauge", num(24)*float64(os.Getpagesize())))
				if bt := bootTime(); bt > 0 {
					fams = append(fams, valueFamily("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", "gauge", bt+num(22)/userHZ))
				}
			}
		}
	}
	if n, err := openFDs(); err == nil {
		fams = append(fams, valueFamily("process_open_fds", "Number of open file descriptors.", "gauge", float64(n)))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		fams = append(fams, valueFamily("process_max_fds", "Maximum number of open file descriptors.", "gauge", float64(lim.Cur)))
	}
	if syscall.Getrlimit(syscall.RLIMIT_AS, &lim) == nil {
		fams = append(fams, valueFamily("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", "gauge", float64(lim.Cur)))
	}
	return fams
}

// openFDs counts /proc/self/fd (the directory's own descriptor included, as
// procfs counted it), a few names at a time.
func openFDs() (int, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	n := 0
	for {
		names, err := d.Readdirnames(64)
		n += len(names)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
	}
}
