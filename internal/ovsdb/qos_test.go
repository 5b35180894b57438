//go:build integration

package ovsdb

import (
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// TestQoSRowsOnOVS writes the reference's QoS rows (an ingress bandwidth limit's
// linux-htb QoS with queue 0) to a private ovsdb-server and reads them back with
// ovs-vsctl; rewrites are no-ops; the delete clears Port.qos and removes the queue.
func TestQoSRowsOnOVS(t *testing.T) {
	o := ovstest.Start(t)
	c := dial(t, o)
	ctx := testCtx(t)
	br := uniq(t)
	vsctl(t, o, "add-br", br, "--", "set", "Bridge", br, "datapath_type=netdev")
	port := br + "p"
	vsctl(t, o, "add-port", br, port, "--", "set", "Interface", port, "type=internal",
		"--", "set", "Port", port, "other_config:net_uuid=n1", "other_config:tag=3")

	spec := QoSSpec{Type: "linux-htb",
		ExternalIDs: map[string]string{"id": port, "_type": "bandwidth_limit"},
		OtherConfig: map[string]string{"max-rate": "34359738367"},
		Queues: []QueueSpec{{Num: 0,
			ExternalIDs: map[string]string{"port": port, "type": "bandwidth_limit", "queue-num": "0"},
			OtherConfig: map[string]string{"max-rate": "10000000", "burst": "8000000"}}},
	}
	if err := c.EnsureQoS(ctx, spec, port); err != nil {
		t.Fatal(err)
	}
	qos := vsctl(t, o, "get", "Port", port, "qos")
	if got := vsctl(t, o, "get", "QoS", qos, "type", "external_ids", "other_config"); got !=
		"linux-htb\n{_type=bandwidth_limit, id="+port+"}\n{max-rate=\"34359738367\"}" {
		t.Errorf("QoS row:\n%s", got)
	}
	queue := strings.TrimSuffix(strings.TrimPrefix(vsctl(t, o, "get", "QoS", qos, "queues"), "{0="), "}")
	if got := vsctl(t, o, "get", "Queue", queue, "external_ids", "other_config"); got !=
		"{port="+port+", queue-num=\"0\", type=bandwidth_limit}\n{burst=\"8000000\", max-rate=\"10000000\"}" {
		t.Errorf("Queue row:\n%s", got)
	}
	// the same again changes nothing; a new rate updates the queue in place
	if err := c.EnsureQoS(ctx, spec, port); err != nil {
		t.Fatal(err)
	}
	spec.Queues[0].OtherConfig = map[string]string{"max-rate": "20000000", "burst": "0"}
	if err := c.EnsureQoS(ctx, spec, port); err != nil {
		t.Fatal(err)
	}
	if got := vsctl(t, o, "get", "Port", port, "qos"); got != qos {
		t.Errorf("QoS replaced: %s -> %s", qos, got)
	}
	if got := vsctl(t, o, "get", "Queue", queue, "other_config:max-rate"); got != `"20000000"` {
		t.Errorf("queue max-rate %s", got)
	}
	qoss, queues, err := c.QoSState(ctx)
	if err != nil || len(qoss) != 1 || len(queues) != 1 || qoss[0].Queues[0] != queue {
		t.Fatalf("QoSState %+v %+v %v", qoss, queues, err)
	}
	if err := c.DeleteQoS(ctx, port, "bandwidth_limit"); err != nil {
		t.Fatal(err)
	}
	if got := vsctl(t, o, "get", "Port", port, "qos"); got != "[]" {
		t.Errorf("Port.qos after delete: %s", got)
	}
	if n, err := c.CountRows(ctx, "QoS"); err != nil || n != 0 {
		t.Errorf("QoS rows %d %v", n, err)
	}
	if n, err := c.CountRows(ctx, "Queue"); err != nil || n != 0 {
		t.Errorf("Queue rows %d %v", n, err)
	}
	if err := c.DeleteQoS(ctx, port, "bandwidth_limit"); err != nil {
		t.Errorf("second delete: %v", err)
	}

	if err := c.SetIngressPolicing(ctx, port, 10000, 8000); err != nil {
		t.Fatal(err)
	}
	if got := vsctl(t, o, "get", "Interface", port, "ingress_policing_rate", "ingress_policing_burst"); got != "10000\n8000" {
		t.Errorf("policing %q", got)
	}
	if err := c.SetPortOtherConfig(ctx, port, map[string]string{"bps_p1_egress": "7"}, "tag"); err != nil {
		t.Fatal(err)
	}
	if got := vsctl(t, o, "get", "Port", port, "other_config"); got != `{bps_p1_egress="7", net_uuid=n1}` {
		t.Errorf("other_config %s", got)
	}
}
