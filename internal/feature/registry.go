package feature

import (
	"fmt"
	"sort"

	"github.com/ovsagent/ovsagent/internal/openflow"
)

// Set is the registered features in registration order, with their flow
// sources by owner kind.
type Set struct {
	all    []Feature
	byKind map[string]FlowSource
	srcs   []FlowSource
}

// NewSet registers fs in order. It fails on a feature without a name, two
// features of one name, or two flow sources claiming one owner kind: an
// owner must have exactly one source.
func NewSet(fs ...Feature) (*Set, error) {
	s := &Set{byKind: map[string]FlowSource{}}
	names := map[string]bool{}
	for _, f := range fs {
		if f == nil {
			continue
		}
		n := f.Name()
		if n == "" {
			return nil, fmt.Errorf("feature: %T has no name", f)
		}
		if names[n] {
			return nil, fmt.Errorf("feature: %q registered twice", n)
		}
		names[n] = true
		s.all = append(s.all, f)
		src, ok := f.(FlowSource)
		if !ok {
			continue
		}
		for _, k := range src.Kinds() {
			if k == "" {
				return nil, fmt.Errorf("feature: %q claims an empty owner kind", n)
			}
			if o, ok := s.byKind[k]; ok {
				return nil, fmt.Errorf("feature: owner kind %q claimed by both %q and %q", k, o.Name(), n)
			}
			s.byKind[k] = src
		}
		s.srcs = append(s.srcs, src)
	}
	return s, nil
}

// All returns the features in registration order.
func (s *Set) All() []Feature { return s.all }

// Sources returns the flow sources in registration order.
func (s *Set) Sources() []FlowSource { return s.srcs }

// Has reports whether a feature of that name is registered.
func (s *Set) Has(name string) bool {
	for _, f := range s.all {
		if f.Name() == name {
			return true
		}
	}
	return false
}

// SourceOf returns the flow source owning owner (by its kind).
func (s *Set) SourceOf(owner string) (FlowSource, bool) {
	src, ok := s.byKind[OwnerKind(owner)]
	return src, ok
}

// Dispatch groups owners by their source, in registration order of the
// sources and sorted within each; owners of no registered kind are
// returned apart (a programming error: the caller logs and drops them).
func (s *Set) Dispatch(owners []string) (groups []Group, unknown []string) {
	by := map[FlowSource][]string{}
	for _, o := range owners {
		src, ok := s.SourceOf(o)
		if !ok {
			unknown = append(unknown, o)
			continue
		}
		by[src] = append(by[src], o)
	}
	for _, src := range s.srcs {
		if os := by[src]; len(os) > 0 {
			sort.Strings(os)
			groups = append(groups, Group{Source: src, Owners: os})
		}
	}
	sort.Strings(unknown)
	return groups, unknown
}

// Group is the owners of one source.
type Group struct {
	Source FlowSource
	Owners []string
}

// Compute asks each source for its owners among owners (dispatched by
// kind) and merges the answers: owner → bridge → flows, and the owners
// that failed, an owner of no registered kind among them.
func (s *Set) Compute(owners []string) (map[string]map[string][]openflow.Flow, map[string]error) {
	groups, unknown := s.Dispatch(owners)
	flows := map[string]map[string][]openflow.Flow{}
	errs := map[string]error{}
	for _, g := range groups {
		fs, es := g.Source.Flows(g.Owners)
		for o, bf := range fs {
			flows[o] = bf
		}
		for o, err := range es {
			errs[o] = fmt.Errorf("%s: %w", g.Source.Name(), err)
		}
	}
	for _, o := range unknown {
		errs[o] = fmt.Errorf("no feature owns the kind %q", OwnerKind(o))
	}
	return flows, errs
}

// AllOwners returns every source's owners.
func (s *Set) AllOwners() []string {
	var out []string
	for _, src := range s.srcs {
		out = append(out, src.Owners()...)
	}
	return out
}
