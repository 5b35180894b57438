package main

import (
	"os"
	"runtime"
	"strings"

	"github.com/ovsagent/ovsagent/internal/config"
)

// stopMemProfiling turns the runtime's heap profiling off unless [ovsagent]
// debug_pprof serves its profiles: nothing else reads them, and its
// bookkeeping is resident memory of its own — a hash table whose pages the
// sampled allocation sites touch at random, plus the records
// (go_memstats_buck_hash_sys_bytes).
// GODEBUG=memprofilerate=N, when given, is the operator's word and wins.
// Called once the configuration is read, before the agent starts: the
// package initialisers' few samples touch only a few pages.
func stopMemProfiling(cfg *config.Config) bool {
	if cfg.OVSAgent.DebugPprof || strings.Contains(os.Getenv("GODEBUG"), "memprofilerate=") {
		return false
	}
	runtime.MemProfileRate = 0
	return true
}
