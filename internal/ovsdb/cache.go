package ovsdb

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ovsagent/ovsagent/internal/ovsdb/vswitchd"
)

// tables is the monitor's copy of the database: the monitored columns of
// each row, by UUID. Rows are never changed in place (an update decodes into
// a copy), so a view may hold them without a lock.
type tables struct {
	root    map[string]*vswitchd.OpenvSwitch
	bridges map[string]*vswitchd.Bridge
	ports   map[string]*vswitchd.Port
	ifaces  map[string]*vswitchd.Interface
	ctls    map[string]*vswitchd.Controller
}

func newTables() tables {
	return tables{
		root:    map[string]*vswitchd.OpenvSwitch{},
		bridges: map[string]*vswitchd.Bridge{},
		ports:   map[string]*vswitchd.Port{},
		ifaces:  map[string]*vswitchd.Interface{},
		ctls:    map[string]*vswitchd.Controller{},
	}
}

// rowUpdate is a <row-update> of the monitor protocol: "new" is absent for a
// deleted row; "old" is not needed, the cache has it.
type rowUpdate struct {
	New map[string]json.RawMessage `json:"new"`
}

// apply applies a <table-updates> object (the monitor's initial content or
// one "update" notification) and returns the tables it touched. A row that
// does not decode is left as it was (or out, if new) and named in the error;
// the other rows are applied.
func (t *tables) apply(raw json.RawMessage) (map[string]bool, error) {
	var u map[string]map[string]rowUpdate
	if err := json.Unmarshal(raw, &u); err != nil {
		return nil, fmt.Errorf("table updates: %w", err)
	}
	touched := make(map[string]bool, len(u))
	var errs []error
	for table, rows := range u {
		if len(rows) == 0 {
			continue
		}
		touched[table] = true
		switch table {
		case vswitchd.OpenvSwitchTable:
			errs = append(errs, applyRows(t.root, rows, func(r *vswitchd.OpenvSwitch, id string) { r.UUID = id }))
		case vswitchd.BridgeTable:
			errs = append(errs, applyRows(t.bridges, rows, func(r *vswitchd.Bridge, id string) { r.UUID = id }))
		case vswitchd.PortTable:
			errs = append(errs, applyRows(t.ports, rows, func(r *vswitchd.Port, id string) { r.UUID = id }))
		case vswitchd.InterfaceTable:
			errs = append(errs, applyRows(t.ifaces, rows, func(r *vswitchd.Interface, id string) { r.UUID = id }))
		case vswitchd.ControllerTable:
			errs = append(errs, applyRows(t.ctls, rows, func(r *vswitchd.Controller, id string) { r.UUID = id }))
		}
	}
	return touched, errors.Join(errs...)
}

// applyRows applies one table's row updates. A modified row starts from its
// cached copy, so a server that sends only the changed columns (as
// monitor_cond's update2 would) and one that sends them all (monitor) both
// give the full row.
func applyRows[T any, P interface {
	*T
	SetColumn(string, json.RawMessage) error
}](m map[string]*T, rows map[string]rowUpdate, setUUID func(*T, string)) error {
	var errs []error
	for id, ru := range rows {
		if ru.New == nil {
			delete(m, id)
			continue
		}
		var r T
		if old := m[id]; old != nil {
			r = *old
		}
		setUUID(&r, id)
		var bad error
		for col, v := range ru.New {
			if err := P(&r).SetColumn(col, v); err != nil {
				bad = fmt.Errorf("row %s: %w", id, err)
				break
			}
		}
		if bad != nil {
			errs = append(errs, bad)
			continue
		}
		m[id] = &r
	}
	return errors.Join(errs...)
}
