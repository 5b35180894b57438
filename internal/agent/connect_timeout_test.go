package agent

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// [ovs] of_connect_timeout: a bridge whose switch never answers fails the
// start after the timeout (the reference exits), instead of waiting forever.
func TestOFConnectTimeoutBoundsFirstConnection(t *testing.T) {
	of := NewOFBridges(testLogger())
	of.ConnectTimeout = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- of.Add(ctx, "br-nowhere", filepath.Join(t.TempDir(), "br-nowhere.mgmt")) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Add connected to a socket that does not exist")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Add still waiting for the switch long after of_connect_timeout")
	}
}
