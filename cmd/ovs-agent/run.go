package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/ovsagent/ovsagent/internal/config"
)

// run runs the agent until ctx is cancelled (SIGTERM/SIGINT). It belongs to
// the internal/agent owner, who replaces this placeholder with the wiring.
func run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	return errors.New("agent not wired yet")
}
