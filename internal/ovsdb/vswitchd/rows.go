// Package vswitchd holds the rows of the Open_vSwitch database the agent
// monitors: for each table, the columns it reads (and no others: Interface
// statistics and status change every few seconds and would wake the agent
// for nothing), and how one column's value is decoded from the protocol.
// The schema is the one OVS 3.1 installs (schema 8.3.1, ../vswitch.ovsschema);
// a test checks every column here against it.
//
// A row is immutable once cached: an update decodes into a copy.
package vswitchd

import (
	"encoding/json"
	"fmt"

	"github.com/ovsagent/ovsagent/internal/ovsdb/wire"
)

// Table names.
const (
	OpenvSwitchTable = "Open_vSwitch"
	BridgeTable      = "Bridge"
	PortTable        = "Port"
	InterfaceTable   = "Interface"
	ControllerTable  = "Controller"
)

// Columns are the monitored columns of each table.
var Columns = map[string][]string{
	OpenvSwitchTable: {"bridges", "cur_cfg", "next_cfg", "datapath_types", "iface_types", "ovs_version", "external_ids", "other_config"},
	BridgeTable:      {"name", "ports", "datapath_type", "fail_mode", "protocols", "other_config", "external_ids", "controller", "mcast_snooping_enable", "datapath_id"},
	PortTable:        {"name", "interfaces", "tag", "vlan_mode", "trunks", "other_config", "external_ids"},
	InterfaceTable:   {"name", "type", "ofport", "options", "external_ids", "error", "other_config"},
	ControllerTable:  {"target", "inactivity_probe", "connection_mode"},
}

// OpenvSwitch is the database's root row.
type OpenvSwitch struct {
	UUID          string
	Bridges       []string
	CurCfg        int
	NextCfg       int
	DatapathTypes []string
	IfaceTypes    []string
	OVSVersion    *string
	ExternalIDs   map[string]string
	OtherConfig   map[string]string
}

// SetColumn decodes one monitored column.
func (r *OpenvSwitch) SetColumn(col string, v json.RawMessage) error {
	var err error
	switch col {
	case "bridges":
		r.Bridges, err = wire.UUIDs(v)
	case "cur_cfg":
		r.CurCfg, err = wire.Int(v)
	case "next_cfg":
		r.NextCfg, err = wire.Int(v)
	case "datapath_types":
		r.DatapathTypes, err = wire.Strings(v)
	case "iface_types":
		r.IfaceTypes, err = wire.Strings(v)
	case "ovs_version":
		r.OVSVersion, err = wire.OptString(v)
	case "external_ids":
		r.ExternalIDs, err = wire.StringMap(v)
	case "other_config":
		r.OtherConfig, err = wire.StringMap(v)
	}
	return columnErr(OpenvSwitchTable, col, err)
}

// Bridge is a Bridge row.
type Bridge struct {
	UUID                string
	Name                string
	Ports               []string
	DatapathType        string
	FailMode            *string
	Protocols           []string
	OtherConfig         map[string]string
	ExternalIDs         map[string]string
	Controller          []string
	McastSnoopingEnable bool
	DatapathID          *string
}

// SetColumn decodes one monitored column.
func (r *Bridge) SetColumn(col string, v json.RawMessage) error {
	var err error
	switch col {
	case "name":
		r.Name, err = wire.String(v)
	case "ports":
		r.Ports, err = wire.UUIDs(v)
	case "datapath_type":
		r.DatapathType, err = wire.String(v)
	case "fail_mode":
		r.FailMode, err = wire.OptString(v)
	case "protocols":
		r.Protocols, err = wire.Strings(v)
	case "other_config":
		r.OtherConfig, err = wire.StringMap(v)
	case "external_ids":
		r.ExternalIDs, err = wire.StringMap(v)
	case "controller":
		r.Controller, err = wire.UUIDs(v)
	case "mcast_snooping_enable":
		r.McastSnoopingEnable, err = wire.Bool(v)
	case "datapath_id":
		r.DatapathID, err = wire.OptString(v)
	}
	return columnErr(BridgeTable, col, err)
}

// Port is a Port row.
type Port struct {
	UUID        string
	Name        string
	Interfaces  []string
	Tag         *int
	VLANMode    *string
	Trunks      []int
	OtherConfig map[string]string
	ExternalIDs map[string]string
}

// SetColumn decodes one monitored column.
func (r *Port) SetColumn(col string, v json.RawMessage) error {
	var err error
	switch col {
	case "name":
		r.Name, err = wire.String(v)
	case "interfaces":
		r.Interfaces, err = wire.UUIDs(v)
	case "tag":
		r.Tag, err = wire.OptInt(v)
	case "vlan_mode":
		r.VLANMode, err = wire.OptString(v)
	case "trunks":
		r.Trunks, err = wire.Ints(v)
	case "other_config":
		r.OtherConfig, err = wire.StringMap(v)
	case "external_ids":
		r.ExternalIDs, err = wire.StringMap(v)
	}
	return columnErr(PortTable, col, err)
}

// Interface is an Interface row.
type Interface struct {
	UUID        string
	Name        string
	Type        string
	Ofport      *int
	Options     map[string]string
	ExternalIDs map[string]string
	Error       *string
	// OtherConfig carries a bound port's tx-steering port hint (porthints).
	OtherConfig map[string]string
}

// SetColumn decodes one monitored column.
func (r *Interface) SetColumn(col string, v json.RawMessage) error {
	var err error
	switch col {
	case "name":
		r.Name, err = wire.String(v)
	case "type":
		r.Type, err = wire.String(v)
	case "ofport":
		r.Ofport, err = wire.OptInt(v)
	case "options":
		r.Options, err = wire.StringMap(v)
	case "external_ids":
		r.ExternalIDs, err = wire.StringMap(v)
	case "error":
		r.Error, err = wire.OptString(v)
	case "other_config":
		r.OtherConfig, err = wire.StringMap(v)
	}
	return columnErr(InterfaceTable, col, err)
}

// Controller is a Controller row.
type Controller struct {
	UUID            string
	Target          string
	InactivityProbe *int
	ConnectionMode  *string
}

// SetColumn decodes one monitored column.
func (r *Controller) SetColumn(col string, v json.RawMessage) error {
	var err error
	switch col {
	case "target":
		r.Target, err = wire.String(v)
	case "inactivity_probe":
		r.InactivityProbe, err = wire.OptInt(v)
	case "connection_mode":
		r.ConnectionMode, err = wire.OptString(v)
	}
	return columnErr(ControllerTable, col, err)
}

func columnErr(table, col string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s.%s: %w", table, col, err)
}
