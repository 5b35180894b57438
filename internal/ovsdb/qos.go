package ovsdb

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strconv"

	"github.com/ovsagent/ovsagent/internal/ovsdb/wire"
)

// The rows the reference's QoS extension writes (ovs_lib.py): QoS and Queue rows found
// by their external_ids (the monitor does not follow these tables; they are read when
// written), Port.qos, Interface ingress_policing_*, and meter ids in Port other_config.

// QueueRow is a Queue as read.
type QueueRow struct {
	UUID        string
	ExternalIDs map[string]string
	OtherConfig map[string]string
}

// QoSRow is a QoS as read.
type QoSRow struct {
	UUID        string
	Type        string
	ExternalIDs map[string]string
	OtherConfig map[string]string
	Queues      map[int]string // queue number → Queue uuid
}

// QueueSpec is a Queue to hold: found by its external_ids "port" and "type", written
// with these external_ids and other_config.
type QueueSpec struct {
	Num         int
	ExternalIDs map[string]string
	OtherConfig map[string]string
}

// QoSSpec is a QoS to hold: found by its external_ids "id" and "_type".
type QoSSpec struct {
	Type        string // linux-htb
	ExternalIDs map[string]string
	OtherConfig map[string]string
	Queues      []QueueSpec
}

// queueMap is the QoS queues column: integer keys, uuid values.
type queueMap map[int]any

func (m queueMap) MarshalJSON() ([]byte, error) {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	pairs := make([][2]any, len(keys))
	for i, k := range keys {
		pairs[i] = [2]any{k, m[k]}
	}
	b, err := json.Marshal(pairs)
	if err != nil {
		return nil, err
	}
	return append(append([]byte(`["map",`), b...), ']'), nil
}

func selectAll(table string, cols ...string) wire.Operation {
	return wire.Operation{Op: wire.OpSelect, Table: table, Columns: append([]string{"_uuid"}, cols...)}
}

func rowUUID(r map[string]json.RawMessage) (string, error) {
	var tagged [2]string
	if err := json.Unmarshal(r["_uuid"], &tagged); err != nil || tagged[0] != "uuid" {
		return "", fmt.Errorf("bad _uuid %s", r["_uuid"])
	}
	return tagged[1], nil
}

// QoSState reads every QoS and Queue row.
func (c *Client) QoSState(ctx context.Context) ([]QoSRow, []QueueRow, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.transactRaw(ctx, []wire.Operation{
		selectAll("QoS", "type", "external_ids", "other_config", "queues"),
		selectAll("Queue", "external_ids", "other_config"),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("ovsdb: read QoS rows: %w", err)
	}
	var qoss []QoSRow
	for _, r := range res[0].Rows {
		q := QoSRow{Queues: map[int]string{}}
		if q.UUID, err = rowUUID(r); err != nil {
			return nil, nil, fmt.Errorf("ovsdb: QoS: %w", err)
		}
		if q.Type, err = wire.String(r["type"]); err != nil {
			return nil, nil, fmt.Errorf("ovsdb: QoS %s type: %w", q.UUID, err)
		}
		if q.ExternalIDs, err = wire.StringMap(r["external_ids"]); err != nil {
			return nil, nil, fmt.Errorf("ovsdb: QoS %s: %w", q.UUID, err)
		}
		if q.OtherConfig, err = wire.StringMap(r["other_config"]); err != nil {
			return nil, nil, fmt.Errorf("ovsdb: QoS %s: %w", q.UUID, err)
		}
		var tagged [2]json.RawMessage
		var pairs [][2]json.RawMessage
		if json.Unmarshal(r["queues"], &tagged) != nil || json.Unmarshal(tagged[1], &pairs) != nil {
			return nil, nil, fmt.Errorf("ovsdb: QoS %s queues %s", q.UUID, r["queues"])
		}
		for _, p := range pairs {
			n, err := wire.Int(p[0])
			if err != nil {
				return nil, nil, fmt.Errorf("ovsdb: QoS %s queue number: %w", q.UUID, err)
			}
			var u [2]string
			if json.Unmarshal(p[1], &u) != nil || u[0] != "uuid" {
				return nil, nil, fmt.Errorf("ovsdb: QoS %s queue %d: %s", q.UUID, n, p[1])
			}
			q.Queues[n] = u[1]
		}
		qoss = append(qoss, q)
	}
	var queues []QueueRow
	for _, r := range res[1].Rows {
		q := QueueRow{}
		if q.UUID, err = rowUUID(r); err != nil {
			return nil, nil, fmt.Errorf("ovsdb: Queue: %w", err)
		}
		if q.ExternalIDs, err = wire.StringMap(r["external_ids"]); err != nil {
			return nil, nil, fmt.Errorf("ovsdb: Queue %s: %w", q.UUID, err)
		}
		if q.OtherConfig, err = wire.StringMap(r["other_config"]); err != nil {
			return nil, nil, fmt.Errorf("ovsdb: Queue %s: %w", q.UUID, err)
		}
		queues = append(queues, q)
	}
	return qoss, queues, nil
}

func findQoS(rows []QoSRow, id, typ string) *QoSRow {
	for i := range rows {
		if rows[i].ExternalIDs["id"] == id && rows[i].ExternalIDs["_type"] == typ {
			return &rows[i]
		}
	}
	return nil
}

func findQueue(rows []QueueRow, port, typ string) *QueueRow {
	for i := range rows {
		if rows[i].ExternalIDs["port"] == port && rows[i].ExternalIDs["type"] == typ {
			return &rows[i]
		}
	}
	return nil
}

// EnsureQoS makes the QoS row of spec (found by external_ids id and _type) hold
// exactly spec's queues (each found by external_ids port and type), creating or
// updating rows, and sets it as the qos of ports. One transaction; nothing is written
// when everything is already so.
func (c *Client) EnsureQoS(ctx context.Context, spec QoSSpec, ports ...string) error {
	id, typ := spec.ExternalIDs["id"], spec.ExternalIDs["_type"]
	if id == "" || typ == "" {
		return fmt.Errorf("ovsdb: ensure QoS: external_ids id and _type are required")
	}
	qoss, queues, err := c.QoSState(ctx)
	if err != nil {
		return err
	}
	var ops []wire.Operation
	refs := queueMap{}
	for i, q := range spec.Queues {
		have := findQueue(queues, q.ExternalIDs["port"], q.ExternalIDs["type"])
		switch {
		case have == nil:
			name := "queue" + strconv.Itoa(i)
			ops = append(ops, wire.Operation{Op: wire.OpInsert, Table: "Queue", UUIDName: name,
				Row: wire.Row{"external_ids": wire.Map(q.ExternalIDs), "other_config": wire.Map(q.OtherConfig)}})
			refs[q.Num] = wire.NamedUUID(name)
		default:
			if !mapsEqual(have.OtherConfig, q.OtherConfig) {
				ops = append(ops, updateOp("Queue", byUUID(have.UUID), wire.Row{"other_config": wire.Map(q.OtherConfig)}))
			}
			refs[q.Num] = wire.UUID(have.UUID)
		}
	}
	var qosRef any
	if have := findQoS(qoss, id, typ); have == nil {
		ops = append(ops, wire.Operation{Op: wire.OpInsert, Table: "QoS", UUIDName: "qos",
			Row: wire.Row{"type": spec.Type, "external_ids": wire.Map(spec.ExternalIDs),
				"other_config": wire.Map(spec.OtherConfig), "queues": refs}})
		qosRef = wire.NamedUUID("qos")
	} else {
		qosRef = wire.UUID(have.UUID)
		same := len(have.Queues) == len(refs)
		for n, u := range have.Queues {
			if r, ok := refs[n].(wire.UUID); !ok || string(r) != u {
				same = false
			}
		}
		if !same {
			ops = append(ops, updateOp("QoS", byUUID(have.UUID), wire.Row{"queues": refs}))
		}
	}
	for _, p := range ports {
		cur, err := c.portQoS(ctx, p)
		if err != nil {
			return fmt.Errorf("ovsdb: ensure QoS %s: %w", id, err)
		}
		if u, ok := qosRef.(wire.UUID); ok && cur == string(u) {
			continue
		}
		ops = append(ops, updateOp("Port", byName(p), wire.Row{"qos": qosRef}))
	}
	if len(ops) == 0 {
		return nil
	}
	return c.transact(ctx, fmt.Sprintf("ensure QoS %s/%s", typ, id), ops, false)
}

// portQoS is a Port's qos ("" for none); the monitor does not follow the column.
func (c *Client) portQoS(ctx context.Context, port string) (string, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.transactRaw(ctx, []wire.Operation{{Op: wire.OpSelect, Table: "Port", Where: byName(port), Columns: []string{"qos"}}})
	if err != nil {
		return "", err
	}
	if len(res[0].Rows) != 1 {
		return "", fmt.Errorf("port %s: %w", port, ErrNotFound)
	}
	us, err := wire.UUIDs(res[0].Rows[0]["qos"])
	if err != nil || len(us) == 0 {
		return "", err
	}
	return us[0], nil
}

// DeleteQoS removes the QoS row found by (id, typ), clears Port.qos wherever it is
// used and deletes its queues. Nothing to delete is no error.
func (c *Client) DeleteQoS(ctx context.Context, id, typ string) error {
	qoss, _, err := c.QoSState(ctx)
	if err != nil {
		return err
	}
	have := findQoS(qoss, id, typ)
	if have == nil {
		return nil
	}
	ops := []wire.Operation{
		updateOp("Port", []wire.Condition{{Column: "qos", Function: "includes", Value: wire.UUID(have.UUID)}}, wire.Row{"qos": wire.Set{}}),
		{Op: wire.OpDelete, Table: "QoS", Where: byUUID(have.UUID)},
	}
	for _, u := range have.Queues {
		ops = append(ops, wire.Operation{Op: wire.OpDelete, Table: "Queue", Where: byUUID(u)})
	}
	return c.transact(ctx, fmt.Sprintf("delete QoS %s/%s", typ, id), ops, false)
}

// SetIngressPolicing sets an Interface's ingress_policing_rate and _burst (kbps, kb;
// 0 and 0 turn policing off), as the reference's _set_egress_bw_limit_for_port.
func (c *Client) SetIngressPolicing(ctx context.Context, iface string, rate, burst int64) error {
	if rate < 0 || burst < 0 {
		return fmt.Errorf("ovsdb: ingress policing of %s: negative rate %d or burst %d", iface, rate, burst)
	}
	return c.transact(ctx, "set ingress policing of "+iface, []wire.Operation{
		updateOp("Interface", byName(iface), wire.Row{"ingress_policing_rate": rate, "ingress_policing_burst": burst}),
	}, false)
}

// SetPortOtherConfig sets and removes keys of a Port's other_config, leaving the
// others (the agent's binding keys, an operator's) alone: where the reference keeps a
// port's meter ids.
func (c *Client) SetPortOtherConfig(ctx context.Context, port string, set map[string]string, del ...string) error {
	v, err := c.readView(ctx, true)
	if err != nil {
		return err
	}
	p := v.portByName[port]
	if p == nil {
		return fmt.Errorf("ovsdb: other_config of port %s: %w", port, ErrNotFound)
	}
	want := maps.Clone(p.OtherConfig)
	if want == nil {
		want = map[string]string{}
	}
	for _, k := range del {
		delete(want, k)
	}
	maps.Copy(want, set)
	if mapsEqual(want, p.OtherConfig) {
		return nil
	}
	return c.transact(ctx, "set other_config of "+port, []wire.Operation{
		updateOp("Port", byUUID(p.UUID), wire.Row{"other_config": wire.Map(want)}),
	}, false)
}
