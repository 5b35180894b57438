// Package wire speaks the OVSDB management protocol (RFC 7047) over one
// connection: JSON-RPC 1.0 requests and notifications (session.go) and the
// database's values, operations and results (this file). It knows nothing of
// the Open_vSwitch schema; package ovsdb builds the agent's cache and writes
// on top of it.
//
// Values are written in the protocol's full forms (a set is always
// ["set", [...]], a map ["map", [[k, v], ...]] with sorted keys), which every
// column accepts, so a transaction's text does not depend on map order.
package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Operation kinds, mutators and the one condition function the agent uses.
const (
	OpInsert = "insert"
	OpUpdate = "update"
	OpMutate = "mutate"
	OpSelect = "select"
	OpDelete = "delete"

	MutInsert = "insert"
	MutDelete = "delete"
	MutAdd    = "+="

	Equal = "=="
)

// UUID is a row's UUID, written ["uuid", "..."].
type UUID string

// MarshalJSON writes the protocol's uuid pair.
func (u UUID) MarshalJSON() ([]byte, error) { return pair("uuid", string(u)), nil }

// NamedUUID names a row inserted earlier in the same transaction, written
// ["named-uuid", "..."].
type NamedUUID string

// MarshalJSON writes the protocol's named-uuid pair.
func (u NamedUUID) MarshalJSON() ([]byte, error) { return pair("named-uuid", string(u)), nil }

func pair(kind, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(append([]byte(`["`+kind+`",`), b...), ']')
}

// Set is a set of atoms (strings, integers, booleans, UUID, NamedUUID).
type Set []any

// MarshalJSON writes ["set", [...]].
func (s Set) MarshalJSON() ([]byte, error) {
	elems := []any(s)
	if elems == nil {
		elems = []any{}
	}
	b, err := json.Marshal(elems)
	if err != nil {
		return nil, err
	}
	return append(append([]byte(`["set",`), b...), ']'), nil
}

// Map is a string-to-string map column value (external_ids, options, ...).
type Map map[string]string

// MarshalJSON writes ["map", [[k, v], ...]] in key order.
func (m Map) MarshalJSON() ([]byte, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	pairs := make([][2]string, len(keys))
	for i, k := range keys {
		pairs[i] = [2]string{k, m[k]}
	}
	b, err := json.Marshal(pairs)
	if err != nil {
		return nil, err
	}
	return append(append([]byte(`["map",`), b...), ']'), nil
}

// Condition is one [column, function, value] of a where clause.
type Condition struct {
	Column, Function string
	Value            any
}

// MarshalJSON writes the triple.
func (c Condition) MarshalJSON() ([]byte, error) {
	return json.Marshal([3]any{c.Column, c.Function, c.Value})
}

// Mutation is one [column, mutator, value] of a mutate operation.
type Mutation struct {
	Column, Mutator string
	Value           any
}

// MarshalJSON writes the triple.
func (m Mutation) MarshalJSON() ([]byte, error) {
	return json.Marshal([3]any{m.Column, m.Mutator, m.Value})
}

// Row is the column values of an insert or update.
type Row map[string]any

// Operation is one operation of a transaction.
type Operation struct {
	Op        string
	Table     string
	Where     []Condition
	Row       Row
	Mutations []Mutation
	UUIDName  string
	Columns   []string
}

// MarshalJSON writes the members the operation's kind takes; "where" is
// required by every kind but insert, even when empty.
func (o Operation) MarshalJSON() ([]byte, error) {
	m := map[string]any{"op": o.Op, "table": o.Table}
	if o.Op != OpInsert {
		where := o.Where
		if where == nil {
			where = []Condition{}
		}
		m["where"] = where
	}
	if o.Row != nil {
		m["row"] = o.Row
	}
	if o.Mutations != nil {
		m["mutations"] = o.Mutations
	}
	if o.UUIDName != "" {
		m["uuid-name"] = o.UUIDName
	}
	if o.Columns != nil {
		m["columns"] = o.Columns
	}
	return json.Marshal(m)
}

// Result is one operation's result; the server answers null for operations
// after a failed one, which decodes as the zero Result.
type Result struct {
	Count   int                          `json:"count"`
	UUID    json.RawMessage              `json:"uuid"`
	Rows    []map[string]json.RawMessage `json:"rows"`
	Error   string                       `json:"error"`
	Details string                       `json:"details"`
}

// CheckResults returns an error naming every failed operation of a
// transaction of n operations (the server appends one more result when the
// commit itself failed, e.g. a constraint violation).
func CheckResults(res []Result, ops []Operation) error {
	var errs []string
	for i, r := range res {
		if r.Error == "" {
			continue
		}
		what := "commit"
		if i < len(ops) {
			what = fmt.Sprintf("operation %d (%s %s)", i, ops[i].Op, ops[i].Table)
		}
		e := what + ": " + r.Error
		if r.Details != "" {
			e += ": " + r.Details
		}
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		return fmt.Errorf("transaction failed: %s", strings.Join(errs, "; "))
	}
	if len(res) < len(ops) {
		return fmt.Errorf("transaction: %d results for %d operations", len(res), len(ops))
	}
	return nil
}

// The decoders below read one column value in any of the forms the
// protocol allows: a set of one element may come as the bare atom.

// String reads a string atom.
func String(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("want a string, got %s", short(raw))
	}
	return s, nil
}

// Int reads an integer atom.
func Int(raw json.RawMessage) (int, error) {
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("want an integer, got %s", short(raw))
	}
	return n, nil
}

// Bool reads a boolean atom.
func Bool(raw json.RawMessage) (bool, error) {
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, fmt.Errorf("want a boolean, got %s", short(raw))
	}
	return b, nil
}

// elems returns a set's elements: the bare atom alone, or those of
// ["set", [...]].
func elems(raw json.RawMessage) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return []json.RawMessage{raw}, nil
	}
	var tagged [2]json.RawMessage
	if err := json.Unmarshal(raw, &tagged); err != nil {
		return nil, fmt.Errorf("want a set, got %s", short(raw))
	}
	var tag string
	if err := json.Unmarshal(tagged[0], &tag); err != nil {
		return nil, fmt.Errorf("want a set, got %s", short(raw))
	}
	if tag != "set" { // a bare uuid atom
		return []json.RawMessage{raw}, nil
	}
	var es []json.RawMessage
	if err := json.Unmarshal(tagged[1], &es); err != nil {
		return nil, fmt.Errorf("want a set, got %s", short(raw))
	}
	return es, nil
}

// uuidAtom reads ["uuid", "..."].
func uuidAtom(raw json.RawMessage) (string, error) {
	var tagged [2]string
	if err := json.Unmarshal(raw, &tagged); err != nil || tagged[0] != "uuid" {
		return "", fmt.Errorf("want a uuid, got %s", short(raw))
	}
	return tagged[1], nil
}

// Strings reads a set of strings.
func Strings(raw json.RawMessage) ([]string, error) { return setOf(raw, String) }

// Ints reads a set of integers.
func Ints(raw json.RawMessage) ([]int, error) { return setOf(raw, Int) }

// UUIDs reads a set of uuids.
func UUIDs(raw json.RawMessage) ([]string, error) { return setOf(raw, uuidAtom) }

func setOf[T any](raw json.RawMessage, atom func(json.RawMessage) (T, error)) ([]T, error) {
	es, err := elems(raw)
	if err != nil {
		return nil, err
	}
	if len(es) == 0 {
		return nil, nil
	}
	out := make([]T, len(es))
	for i, e := range es {
		if out[i], err = atom(e); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// OptString reads an optional string (a set of at most one): nil when empty.
func OptString(raw json.RawMessage) (*string, error) { return optional(raw, String) }

// OptInt reads an optional integer: nil when empty.
func OptInt(raw json.RawMessage) (*int, error) { return optional(raw, Int) }

func optional[T any](raw json.RawMessage, atom func(json.RawMessage) (T, error)) (*T, error) {
	vs, err := setOf(raw, atom)
	if err != nil || len(vs) == 0 {
		return nil, err
	}
	if len(vs) > 1 {
		return nil, fmt.Errorf("want at most one value, got %d", len(vs))
	}
	return &vs[0], nil
}

// StringMap reads ["map", [[k, v], ...]] of strings; nil when empty.
func StringMap(raw json.RawMessage) (map[string]string, error) {
	var tagged [2]json.RawMessage
	if err := json.Unmarshal(raw, &tagged); err != nil {
		return nil, fmt.Errorf("want a map, got %s", short(raw))
	}
	var tag string
	var pairs [][2]string
	if json.Unmarshal(tagged[0], &tag) != nil || tag != "map" || json.Unmarshal(tagged[1], &pairs) != nil {
		return nil, fmt.Errorf("want a map of strings, got %s", short(raw))
	}
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		m[p[0]] = p[1]
	}
	return m, nil
}

func short(raw json.RawMessage) string {
	if len(raw) > 80 {
		return string(raw[:80]) + "..."
	}
	return string(raw)
}
