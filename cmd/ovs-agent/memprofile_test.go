package main

import (
	"runtime"
	"testing"

	"github.com/ovsagent/ovsagent/internal/config"
)

func TestStopMemProfiling(t *testing.T) {
	prev := runtime.MemProfileRate
	t.Cleanup(func() { runtime.MemProfileRate = prev })
	cfg := &config.Config{}

	t.Setenv("GODEBUG", "")
	runtime.MemProfileRate = 512 << 10
	cfg.OVSAgent.DebugPprof = true
	if stopMemProfiling(cfg) || runtime.MemProfileRate != 512<<10 {
		t.Fatalf("debug_pprof = true: heap profiling stopped (rate %d)", runtime.MemProfileRate)
	}
	t.Setenv("GODEBUG", "madvdontneed=1,memprofilerate=4096")
	cfg.OVSAgent.DebugPprof = false
	if stopMemProfiling(cfg) || runtime.MemProfileRate != 512<<10 {
		t.Fatalf("GODEBUG memprofilerate set: overridden (rate %d)", runtime.MemProfileRate)
	}
	t.Setenv("GODEBUG", "")
	if !stopMemProfiling(cfg) || runtime.MemProfileRate != 0 {
		t.Fatalf("debug_pprof off: heap profiling still on (rate %d)", runtime.MemProfileRate)
	}
}
