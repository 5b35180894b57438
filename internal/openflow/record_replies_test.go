//go:build integration

package openflow

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRecordReplies refreshes testdata/replies/*.bin, the fuzz seeds: raw
// OFPMP_FLOW replies of ovs-vswitchd holding every flow kind we model.
// Run with OVSAGENT_RECORD=1.
func TestRecordReplies(t *testing.T) {
	if os.Getenv("OVSAGENT_RECORD") == "" {
		t.Log("set OVSAGENT_RECORD=1 to re-record the fuzz seeds")
		return
	}
	o, br, c := testBridge(t, Options{})
	ctx := context.Background()
	var flows []Flow
	for _, tc := range referenceFlows() {
		flows = append(flows, tc.flow)
	}
	flows = append(flows, extraFlows()...)
	if err := c.Bundle(ctx, adds(flows)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Ofctl("add-flow", br, "table=7,priority=1,tcp,tcp_flags=+syn,actions=group:1,meter:1,clone(output:1),ct(commit,force,alg=ftp),sample(probability=1)"); err != nil {
		t.Logf("foreign flow: %v", err)
		if _, err := o.Ofctl("add-flow", br, "table=7,priority=1,tcp,tcp_flags=+syn,actions=clone(output:1),ct(commit,force,alg=ftp),mod_nw_ttl:3"); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := net.Dial("unix", o.Mgmt(br))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	nc.Write(AppendHello(nil, 1))
	nc.Write(AppendFlowStatsRequest(nil, 2, TableAll, 0, 0))
	dir := filepath.Join("testdata", "replies")
	os.MkdirAll(dir, 0o755)
	n := 0
	for {
		msg, err := readMsg(nc, nil)
		if err != nil {
			t.Fatal(err)
		}
		if msg[1] != TypeMultipartReply {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "flow-stats-"+string(rune('a'+n))+".bin"), msg, 0o644); err != nil {
			t.Fatal(err)
		}
		n++
		if binary.BigEndian.Uint16(msg[10:])&mpReplyMore == 0 {
			break
		}
	}
	t.Logf("recorded %d replies", n)
}
