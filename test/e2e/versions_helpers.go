//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"strings"
	"time"
)

// referenceVersions is the resource_versions map the release's reference OVS agent
// reports: LOCAL_RESOURCE_VERSIONS of the release's own neutron (the host's python
// for zed, the chroot's for the others), the map its agent puts in report_state.
func referenceVersions(ctx context.Context) (map[string]string, error) {
	script := "import json; from neutron.api.rpc.callbacks import resources as r; print(json.dumps(r.LOCAL_RESOURCE_VERSIONS))"
	argv := []string{"/usr/bin/python3", "-c", script}
	if c := refChroot(); c != "" {
		argv = append([]string{"chroot", c}, argv...)
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	var m map[string]string
	return m, json.Unmarshal(out, &m)
}

// storedVersions is the resource_versions the server stored for the agent with id
// (agents.resource_versions; the API does not show it): the map the server's version
// manager pushes by. The database is found by the id, so every release and messaging
// variant of refenv works without knowing its database name.
func storedVersions(ctx context.Context, agentID string) (map[string]string, error) {
	dbs, err := sh(ctx, "mysql", "-N", "-e", "SHOW DATABASES LIKE 'neutron%'")
	if err != nil {
		return nil, err
	}
	for _, db := range strings.Fields(dbs) {
		out, err := sh(ctx, "mysql", "-N", "-e", fmt.Sprintf("SELECT resource_versions FROM `%s`.agents WHERE id='%s'", db, agentID))
		if err != nil || strings.TrimSpace(out) == "" {
			continue
		}
		var m map[string]string
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &m); err != nil {
			return nil, fmt.Errorf("%s agents.resource_versions %q: %w", db, out, err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("agent %s in no neutron database", agentID)
}

// CheckReportedVersions waits until the server stored, for e.Host's OVS agent, exactly
// the resource_versions the release's reference agent reports (ovs-agent settles them
// with the server on its first pulls), and checks that the agent consumes the push
// topic of each negotiated type at that version (its neutron-vo-<T>-<v>.<host> queue has
// a consumer).
func (e *Env) CheckReportedVersions(within time.Duration) {
	t := e.T
	t.Helper()
	want, err := referenceVersions(e.Ctx)
	if err != nil {
		t.Fatalf("reference versions: %v", err)
	}
	a, err := e.Neutron.OVSAgent(e.Ctx, e.Host)
	if err != nil || a == nil {
		t.Fatalf("agent of %s: %v", e.Host, err)
	}
	var got map[string]string
	deadline := time.Now().Add(within)
	for {
		if got, err = storedVersions(e.Ctx, a.ID); err == nil && maps.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resource_versions stored for %s: %v (%v)\nwant the %s reference agent's %v", e.Host, got, err, refRelease(), want)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("resource_versions stored for %s equal the %s reference agent's: Port %s, Network %s, Subnet %s, SecurityGroup %s, SecurityGroupRule %s",
		e.Host, refRelease(), got["Port"], got["Network"], got["Subnet"], got["SecurityGroup"], got["SecurityGroupRule"])
	node, err := rabbitNode(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The broker's consumer counts of quorum queues and streams are statistics it
	// refreshes every few seconds (seen 0 on a consumed quorum queue ~1 s after the
	// consume): poll until they settle.
	var missing []string
	polls, t0 := 0, time.Now()
	for deadline := time.Now().Add(within); ; {
		polls++
		out, err := rabbitmqctl(e.Ctx, node, "list_queues", "-p", TransportVHost(), "name", "consumers")
		if err != nil {
			t.Fatal(err)
		}
		consumers := map[string]string{}
		for _, row := range tsvRows(out) {
			if len(row) == 2 {
				consumers[row[0]] = row[1]
			}
		}
		missing = missing[:0]
		for _, rt := range []string{"Port", "Network", "Subnet", "SecurityGroup", "SecurityGroupRule"} {
			q := "neutron-vo-" + rt + "-" + want[rt] + "." + e.Host
			if consumers[q] != "1" {
				missing = append(missing, fmt.Sprintf("queue %s: %q consumers", q, consumers[q]))
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, m := range missing {
		t.Errorf("%s, want 1 (the agent consumes the push topic of the reported version)", m)
	}
	if len(missing) == 0 {
		t.Logf("the push queues of those versions have the agent as consumer (broker statistics settled after %d polls, %s)", polls, time.Since(t0).Round(time.Millisecond))
	}
}
