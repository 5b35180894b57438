package main

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/ovsagent/ovsagent/internal/config"
)

// applyMemoryLimit sets the Go runtime's soft memory limit from [ovsagent]
// memory_limit_mib. GOMEMLIMIT, when set, is the operator's word and wins
// (the runtime has already applied it). A soft limit makes the collector
// run more often as the heap nears it, instead of letting it grow to twice
// the live heap (GOGC=100): RSS stays nearer the live heap, for more GC CPU
// while ports are wired. Below the live heap the collector would run nearly non-stop
// while the agent works (the runtime caps it at half the CPU). It returns
// the limit set, 0 if none.
func applyMemoryLimit(cfg *config.Config, log *slog.Logger) int64 {
	mib := cfg.OVSAgent.MemoryLimitMiB
	if mib <= 0 {
		return 0
	}
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Info("memory_limit_mib ignored: GOMEMLIMIT is set", "GOMEMLIMIT", v, "memory_limit_mib", mib)
		return 0
	}
	limit := int64(mib) << 20
	debug.SetMemoryLimit(limit)
	log.Info("soft memory limit set", "memory_limit_mib", mib)
	return limit
}
