package feature

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/openflow"
)

// src is a flow source of the given kinds that gives each owner one flow
// on bridge "br" whose priority is its index in the call.
type src struct {
	name  string
	kinds []string
	got   [][]string
}

func (s *src) Name() string     { return s.name }
func (s *src) Kinds() []string  { return s.kinds }
func (s *src) Owners() []string { return []string{s.kinds[0] + ":x"} }
func (s *src) Flows(owners []string) (map[string]map[string][]openflow.Flow, map[string]error) {
	s.got = append(s.got, owners)
	out := map[string]map[string][]openflow.Flow{}
	for i, o := range owners {
		out[o] = map[string][]openflow.Flow{"br": {{Priority: uint16(i)}}}
	}
	return out, nil
}

type plain struct{ name string }

func (p plain) Name() string { return p.name }

func TestSetDispatchesOwnersByKind(t *testing.T) {
	pipe := &src{name: "pipeline", kinds: []string{"base", "port", "net", "tun"}}
	fw := &src{name: "firewall", kinds: []string{"fw"}}
	qos := &src{name: "qos", kinds: []string{"qos"}}
	s, err := NewSet(pipe, fw, plain{"reporter-only"}, qos)
	if err != nil {
		t.Fatal(err)
	}
	groups, unknown := s.Dispatch([]string{"qos:p1", "fw:port:p1", "port:p1", "base", "tun:fd00::1", "fw:conj:3", "dvr:x"})
	var got []string
	for _, g := range groups {
		got = append(got, g.Source.Name()+"="+strings.Join(g.Owners, ","))
	}
	want := []string{"pipeline=base,port:p1,tun:fd00::1", "firewall=fw:conj:3,fw:port:p1", "qos=qos:p1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("groups = %q, want %q", got, want)
	}
	if !reflect.DeepEqual(unknown, []string{"dvr:x"}) {
		t.Errorf("unknown = %q, want dvr:x", unknown)
	}
	flows, errs := s.Compute([]string{"qos:p1", "port:p1", "dvr:x"})
	if len(flows) != 2 || flows["qos:p1"]["br"] == nil || flows["port:p1"]["br"] == nil {
		t.Errorf("flows = %v, want qos:p1 and port:p1", flows)
	}
	if len(errs) != 1 || errs["dvr:x"] == nil {
		t.Errorf("errs = %v, want dvr:x without a source", errs)
	}
	if !reflect.DeepEqual(qos.got, [][]string{{"qos:p1"}}) {
		t.Errorf("qos was asked %q, want only its owner", qos.got)
	}
	if got := s.AllOwners(); !reflect.DeepEqual(got, []string{"base:x", "fw:x", "qos:x"}) {
		t.Errorf("AllOwners = %q", got)
	}
	if !s.Has("reporter-only") || s.Has("trunk") {
		t.Errorf("Has: registered names wrong")
	}
}

func TestSetRefusesConflicts(t *testing.T) {
	for name, fs := range map[string][]Feature{
		"kind twice": {&src{name: "a", kinds: []string{"port"}}, &src{name: "b", kinds: []string{"net", "port"}}},
		"name twice": {plain{"a"}, plain{"a"}},
		"no name":    {plain{""}},
		"empty kind": {&src{name: "a", kinds: []string{""}}},
	} {
		if _, err := NewSet(fs...); err == nil {
			t.Errorf("%s: NewSet succeeded", name)
		}
	}
}

func TestOwnerKind(t *testing.T) {
	for owner, want := range map[string]string{"base": "base", "fw:port:x": "fw", "tun:fd00::1": "tun", "qos:": "qos"} {
		if got := OwnerKind(owner); got != want {
			t.Errorf("OwnerKind(%q) = %q, want %q", owner, got, want)
		}
	}
}
