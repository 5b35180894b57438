package main

import (
	"io"
	"log/slog"
	"math"
	"runtime/debug"
	"testing"

	"github.com/ovsagent/ovsagent/internal/config"
)

func TestApplyMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := &config.Config{}

	t.Setenv("GOMEMLIMIT", "")
	if got := applyMemoryLimit(cfg, log); got != 0 || debug.SetMemoryLimit(-1) != prev {
		t.Fatalf("no option: limit %d set", got)
	}
	cfg.OVSAgent.MemoryLimitMiB = 48
	if got := applyMemoryLimit(cfg, log); got != 48<<20 || debug.SetMemoryLimit(-1) != 48<<20 {
		t.Fatalf("memory_limit_mib = 48: limit %d, runtime %d", got, debug.SetMemoryLimit(-1))
	}
	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "100MiB")
	if got := applyMemoryLimit(cfg, log); got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("GOMEMLIMIT set: memory_limit_mib must not override it (set %d)", got)
	}
}
