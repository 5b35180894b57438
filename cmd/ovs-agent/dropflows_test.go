package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ovsagent/ovsagent/internal/config"
)

// [agent] drop_flows_on_start loads (it was refused) and reaches the agent.
func TestAgentOptionsDropFlowsOnStart(t *testing.T) {
	for body, want := range map[string]bool{"": false, "[agent]\ndrop_flows_on_start = True\n": true, "[agent]\ndrop_flows_on_start = false\n": false} {
		path := filepath.Join(t.TempDir(), "agent.ini")
		if err := os.WriteFile(path, []byte("[DEFAULT]\ntransport_url = rabbit://u:p@127.0.0.1:5672/\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(config.Files(path), config.Options{})
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		if got := agentOptions(cfg).DropFlowsOnStart; got != want {
			t.Errorf("%q: DropFlowsOnStart = %v, want %v", body, got, want)
		}
	}
}
