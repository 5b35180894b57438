// Package neutron holds the typed Neutron agent APIs spoken over oslo.messaging: the
// oslo.versionedobjects (OVO) primitives the server pushes and returns from bulk_pull,
// the resource cache built from them (the reference agent's RemoteResourceCache), the
// plugin and state-report RPC clients, and the consumers of the server's notifications.
package neutron

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Resource type names as they appear in versioned_object.name, bulk_pull's resource_type
// and the neutron-vo-<Type>-<version> topics.
const (
	TypePort              = "Port"
	TypeNetwork           = "Network"
	TypeSubnet            = "Subnet"
	TypeSecurityGroup     = "SecurityGroup"
	TypeSecurityGroupRule = "SecurityGroupRule"
	TypeAddressGroup      = "AddressGroup"
)

// ResourceVersions are the OVO versions this agent speaks for the types it caches (Zed /
// 2023.1). The server pushes the version an agent reported, so these select both the push
// topics we consume and what bulk_pull returns. For the types of VersionLadders they are
// the baseline: the agent negotiates newer ones with its server (versions.go).
var ResourceVersions = map[string]string{
	TypePort:              "1.7",
	TypeNetwork:           "1.1",
	TypeSubnet:            "1.1",
	TypeSecurityGroup:     "1.5",
	TypeSecurityGroupRule: "1.2",
	TypeAddressGroup:      "1.2",
	// QosPolicy 1.10 (Yoga through 2026.2): decoded here, cached and subscribed once
	// internal/qos registers it (RegisterType).
	TypeQosPolicy: "1.10",
}

// ReportedResourceVersions is the full resource_versions map the Zed reference OVS agent
// reports (every OVO type registered in its process, extensions included). The server
// keeps it per agent to decide which versions to push, so it mirrors the reference; the
// negotiated types (VersionLadders) are reported at the version agreed with the server
// (Negotiator.Reported): 2025.1 and 2026.2 report the types that are not negotiated at
// these same versions.
var ReportedResourceVersions = map[string]string{
	"AddressGroup":       "1.2",
	"Agent":              "1.1",
	"ConntrackHelper":    "1.0",
	"LocalIPAssociation": "1.0",
	"Log":                "1.0",
	"NDPProxy":           "1.0",
	"Network":            "1.1",
	"Port":               "1.7",
	"PortForwarding":     "1.3",
	"QosPolicy":          "1.10",
	"SecurityGroup":      "1.5",
	"SecurityGroupRule":  "1.2",
	"SubPort":            "1.0",
	"Subnet":             "1.1",
	"Trunk":              "1.1",
}

// CachedTypes lists the resource types the cache tracks, in the order the reference agent
// subscribes to them.
var CachedTypes = []string{TypePort, TypeSecurityGroup, TypeSecurityGroupRule, TypeNetwork, TypeSubnet, TypeAddressGroup}

// DecodableResource is a Resource that decodes its own primitive.
type DecodableResource interface {
	Resource
	json.Unmarshaler
}

// registered are the types agent features added (RegisterType).
var registered = map[string]func() DecodableResource{}

// RegisterType adds an OVO type a feature consumes (QosPolicy, Trunk,
// SubPort, …) to the cache and the push subscriptions
// (neutron-vo-<rtype>-<version>): fresh returns an empty value that decodes
// one primitive. Call it from an init function: the type list is read
// without a lock once the agent runs.
func RegisterType(rtype, version string, fresh func() DecodableResource) {
	for _, t := range CachedTypes {
		if t == rtype {
			panic("neutron: RegisterType " + rtype + ": registered twice")
		}
	}
	registered[rtype] = fresh
	ResourceVersions[rtype] = version
	CachedTypes = append(CachedTypes, rtype)
}

// PushTopic is the fanout topic the server pushes a resource type on at its
// ResourceVersions version (a negotiated type's baseline).
func PushTopic(rtype string) string {
	return PushTopicAt(rtype, ResourceVersions[rtype])
}

// PushTopicAt is the fanout topic the server pushes rtype on at version.
func PushTopicAt(rtype, version string) string {
	return "neutron-vo-" + rtype + "-" + version
}

// Resource is any decoded top-level OVO the cache holds.
type Resource interface {
	ResourceType() string
	ResourceID() string
	Revision() int64
}

// VersionError reports an object whose type is unknown or whose major version differs from
// the one this agent decodes.
type VersionError struct {
	Name, Version, Want string
}

func (e *VersionError) Error() string {
	if e.Want == "" {
		return fmt.Sprintf("ovo: unsupported object type %q (version %q)", e.Name, e.Version)
	}
	return fmt.Sprintf("ovo: %s version %q incompatible with supported %s", e.Name, e.Version, e.Want)
}

func major(v string) (int, bool) {
	m, _, ok := strings.Cut(v, ".")
	if !ok {
		m = v
	}
	n, err := strconv.Atoi(m)
	return n, err == nil
}

// compatible accepts any version with the same major as want: a newer minor only adds
// fields (ignored), an older one lacks some (left at their defaults).
func compatible(have, want string) bool {
	hm, ok1 := major(have)
	wm, ok2 := major(want)
	return ok1 && ok2 && hm == wm
}

var nullJSON = []byte("null")

// unwrap decodes an envelope's data into out in one pass, then checks its name and
// version (a mismatch discards what was decoded).
func unwrap(b []byte, name, version string, out any) error {
	env := struct {
		Name    string `json:"versioned_object.name"`
		Version string `json:"versioned_object.version"`
		// An interface holding a non-nil pointer: encoding/json decodes into the pointee,
		// so the data is scanned once instead of captured and decoded again.
		Data any `json:"versioned_object.data"`
	}{Data: out}
	err := json.Unmarshal(b, &env)
	if env.Name != name {
		if env.Name == "" {
			if err != nil {
				return fmt.Errorf("ovo: %s: %w", name, err)
			}
			return fmt.Errorf("ovo: expected %s object, got no versioned_object.name", name)
		}
		return fmt.Errorf("ovo: expected %s object, got %q", name, env.Name)
	}
	if !compatible(env.Version, version) {
		return &VersionError{Name: name, Version: env.Version, Want: version}
	}
	if err != nil {
		return fmt.Errorf("ovo: %s %s: %w", name, env.Version, err)
	}
	return nil
}

// peekName returns versioned_object.name and .version. oslo writes them before the data,
// so a scan of the leading string members usually finds them without touching the data;
// otherwise the whole object is decoded (skipping the data).
func peekName(b []byte) (name, version string, err error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return "", "", fmt.Errorf("expected an object")
	}
	i++
	for {
		var key, val string
		var ok bool
		i = skipSpace(b, i)
		if key, i, ok = scanString(b, i); !ok {
			break
		}
		if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
			break
		}
		i = skipSpace(b, i+1)
		if val, i, ok = scanString(b, i); !ok {
			break // a non-string member (the data) comes first
		}
		switch key {
		case "versioned_object.name":
			name = val
		case "versioned_object.version":
			version = val
		}
		if name != "" && version != "" {
			return name, version, nil
		}
		if i = skipSpace(b, i); i >= len(b) || b[i] != ',' {
			break
		}
		i++
	}
	var env struct {
		Name    string `json:"versioned_object.name"`
		Version string `json:"versioned_object.version"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return "", "", err
	}
	return env.Name, env.Version, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString reads the JSON string starting at b[i].
func scanString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			var s string
			if err := json.Unmarshal(b[i:j+1], &s); err != nil {
				return "", i, false
			}
			return s, j + 1, true
		}
	}
	return "", i, false
}

// resourceElem decodes one element of a resource list in place (no copy of its bytes).
type resourceElem struct{ r Resource }

func (e *resourceElem) UnmarshalJSON(b []byte) error {
	r, err := DecodeResource(b)
	if err != nil {
		return err
	}
	e.r = r
	return nil
}

// DecodeResource decodes one top-level versioned-object primitive of a cached type.
func DecodeResource(b []byte) (Resource, error) {
	name, version, err := peekName(b)
	if err != nil {
		return nil, fmt.Errorf("ovo: %w", err)
	}
	var r interface {
		Resource
		json.Unmarshaler
	}
	switch name {
	case TypePort:
		r = &Port{}
	case TypeNetwork:
		r = &Network{}
	case TypeSubnet:
		r = &Subnet{}
	case TypeSecurityGroup:
		r = &SecurityGroup{}
	case TypeSecurityGroupRule:
		r = &SecurityGroupRule{}
	case TypeAddressGroup:
		r = &AddressGroup{}
	case TypeQosPolicy:
		r = &QosPolicy{}
	default:
		fresh, ok := registered[name]
		if !ok {
			return nil, &VersionError{Name: name, Version: version}
		}
		r = fresh()
	}
	if err := r.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	if r.ResourceID() == "" {
		return nil, fmt.Errorf("ovo: %s without id", name)
	}
	return r, nil
}

// DecodeResourceList decodes a JSON list of primitives (push resource_list). One bad
// element fails the list: the server sends one type per list, so a bad element means a
// message we do not understand. A bulk_pull result is decoded object by object instead
// (decodePulled).
func DecodeResourceList(b []byte) ([]Resource, error) {
	var elems []resourceElem
	if err := json.Unmarshal(b, &elems); err != nil {
		return nil, fmt.Errorf("resource list: %w", err)
	}
	out := make([]Resource, len(elems))
	for i := range elems {
		out[i] = elems[i].r
	}
	return out, nil
}

// BadObject is one object of a bulk_pull reply that could not be decoded.
type BadObject struct {
	ID  string // its id where it could be read, else ""
	Err error
}

// BadObjectsError is a bulk_pull reply some objects of which could not be decoded. The
// server answered: the objects that could be decoded are returned with this error, so
// that one object the agent cannot read costs that object alone, not the rest of the
// reply (a bulk_pull of ports is a batch of the agent's ports). It is an ErrBadReply.
type BadObjectsError struct {
	Type    string
	Objects []BadObject
}

func (e *BadObjectsError) Error() string {
	if len(e.Objects) == 0 {
		return fmt.Sprintf("neutron: bulk_pull %s: undecodable reply", e.Type)
	}
	b := e.Objects[0]
	return fmt.Sprintf("neutron: bulk_pull %s: objects that could not be decoded: %d (first, id %q: %v)", e.Type, len(e.Objects), b.ID, b.Err)
}

// Unwrap makes it an ErrBadReply.
func (e *BadObjectsError) Unwrap() error { return ErrBadReply }

// SplitPullError sorts the error of a pull (Fill, Ensure, a Puller's), wrapped or joined
// as it may be: the objects the server returned that could not be decoded (an answer,
// if one the agent cannot use), and whether anything else failed: the pull itself (an
// RPC error, a timeout, the broker down, an error the server raised), an outage that says
// nothing about the objects asked for.
func SplitPullError(err error) (bad []BadObject, failed bool) {
	failed = splitPullError(err, &bad)
	return bad, failed
}

func splitPullError(err error, bad *[]BadObject) bool {
	if err == nil {
		return false
	}
	if b, ok := err.(*BadObjectsError); ok {
		*bad = append(*bad, b.Objects...)
		return false
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		failed := false
		for _, e := range u.Unwrap() {
			if splitPullError(e, bad) {
				failed = true
			}
		}
		return failed
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			return splitPullError(inner, bad)
		}
	}
	return true
}

// pulledElem decodes one element of a bulk_pull result in place, keeping a decoding
// error as the element's instead of failing the list.
type pulledElem struct {
	r   Resource
	bad *BadObject
}

func (e *pulledElem) UnmarshalJSON(b []byte) error {
	r, err := DecodeResource(b)
	if err != nil {
		e.bad = &BadObject{ID: objectID(b), Err: err}
		return nil
	}
	e.r = r
	return nil
}

// objectID reads the id of a primitive that did not decode, "" when it cannot.
func objectID(b []byte) string {
	var env struct {
		Data struct {
			ID string `json:"id"`
		} `json:"versioned_object.data"`
	}
	if json.Unmarshal(b, &env) != nil {
		return ""
	}
	return env.Data.ID
}

// decodePulled decodes a bulk_pull result of rtype: the objects it could decode, and a
// *BadObjectsError naming the others (nil when there are none). A result that is not a
// list at all is one bad object without id.
func decodePulled(rtype string, b []byte) ([]Resource, error) {
	var elems []pulledElem
	if err := json.Unmarshal(b, &elems); err != nil {
		return nil, &BadObjectsError{Type: rtype, Objects: []BadObject{{Err: fmt.Errorf("resource list: %w", err)}}}
	}
	out := make([]Resource, 0, len(elems))
	var bad []BadObject
	for _, e := range elems {
		if e.bad != nil {
			bad = append(bad, *e.bad)
			continue
		}
		out = append(out, e.r)
	}
	if len(bad) > 0 {
		return out, &BadObjectsError{Type: rtype, Objects: bad}
	}
	return out, nil
}

// Push event types.
const (
	EventUpdated = "updated"
	EventDeleted = "deleted"
)

// Push is a decoded neutron-vo-* push(resource_list, event_type).
type Push struct {
	EventType string
	Resources []Resource
}

// DecodePush decodes the args of a push cast.
func DecodePush(args []byte) (*Push, error) {
	// resource_list decodes in the same pass as the args (no copy, no second scan).
	var a struct {
		ResourceList *[]resourceElem `json:"resource_list"`
		EventType    string          `json:"event_type"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf("push: resource list: %w", err)
	}
	switch a.EventType {
	case EventUpdated, EventDeleted, "created":
	default:
		return nil, fmt.Errorf("push: unknown event_type %q", a.EventType)
	}
	if a.ResourceList == nil {
		return nil, fmt.Errorf("push: missing resource_list")
	}
	rs := make([]Resource, len(*a.ResourceList))
	for i, e := range *a.ResourceList {
		rs[i] = e.r
	}
	et := a.EventType
	if et == "created" {
		et = EventUpdated
	}
	return &Push{EventType: et, Resources: rs}, nil
}

// MiscDict is a DictOfMiscValuesField: a dict the server serialises as a JSON string
// (binding profile, vif_details); a plain object or null is accepted too.
//
// It is kept as the dict's JSON object text, interned, and decoded when read: the agent
// reads one key of one of them (a profile's migrating_to), and a decoded map per binding
// is a map per port in the cache, where the text of a host's vif_details is one
// string shared by all its ports. The zero value is an unset (null) dict.
type MiscDict struct{ js string }

// MiscDictOf makes a MiscDict of m (nil: unset).
func MiscDictOf(m map[string]any) MiscDict {
	if m == nil {
		return MiscDict{}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return MiscDict{}
	}
	return MiscDict{intern(string(b))}
}

// emptyDict is what most bindings' profile is.
const emptyDict = "{}"

// UnmarshalJSON implements json.Unmarshaler.
func (d *MiscDict) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, nullJSON) {
		*d = MiscDict{}
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if strings.TrimSpace(s) == "" {
			*d = MiscDict{}
			return nil
		}
		b = []byte(s)
	}
	if bytes.Equal(bytes.TrimSpace(b), []byte(emptyDict)) {
		*d = MiscDict{emptyDict}
		return nil
	}
	// Decoded once to accept exactly what a dict field accepts (an object, or null).
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("dict field: %w", err)
	}
	if m == nil {
		*d = MiscDict{}
		return nil
	}
	*d = MiscDict{intern(string(b))}
	return nil
}

// Map decodes the dict (nil when unset).
func (d MiscDict) Map() map[string]any {
	if d.js == "" {
		return nil
	}
	var m map[string]any
	if json.Unmarshal([]byte(d.js), &m) != nil {
		return nil // cannot happen: the text was decoded when it was stored
	}
	return m
}

// Get is the value of key, nil if absent.
func (d MiscDict) Get(key string) any {
	if d.js == "" || d.js == emptyDict {
		return nil
	}
	return d.Map()[key]
}

// MarshalJSON renders the dict as an object (keys sorted), null when unset: as the map
// it replaced did.
func (d MiscDict) MarshalJSON() ([]byte, error) { return json.Marshal(d.Map()) }

// FlexString accepts a JSON string or number (an IP protocol may be "tcp" or 6).
type FlexString string

// UnmarshalJSON implements json.Unmarshaler.
func (s *FlexString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, nullJSON) {
		*s = ""
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = FlexString(v)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("expected string or number: %w", err)
	}
	*s = FlexString(n.String())
	return nil
}
