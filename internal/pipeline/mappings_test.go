package pipeline

import "testing"

// TestMappings: a mapping is created with its first port (Network in the
// state, its VLAN), kept while a port is on it, and released with its VLAN
// once idle; the release callback sees the Network still in the state.
func TestMappings(t *testing.T) {
	s := NewState(Config{})
	m := NewMappings(s)
	a, b := Seg("net-a", 5), Seg("net-b", 6)
	va, err := m.Allocate(a)
	if err != nil || va != 1 {
		t.Fatalf("allocate a: %d %v", va, err)
	}
	if !m.Join("p1", a, TypeVXLAN, "", va) || m.Join("p2", a, TypeVXLAN, "", va) {
		t.Fatal("created reported wrong: want true for the first port only")
	}
	if n := s.Networks[a]; n == nil || n.LocalVLAN != 1 || n.Type != TypeVXLAN || m.Ports(a) != 2 {
		t.Fatalf("network %+v, ports %d", n, m.Ports(a))
	}
	vb, _ := m.Allocate(b)
	m.Join("p3", b, TypeVLAN, "physnet1", vb)
	m.Leave("p1", a)
	released := map[NetKey]bool{}
	m.ReleaseIdle(func(k NetKey) { released[k] = s.Networks[k] != nil })
	if len(released) != 0 || s.Networks[a] == nil {
		t.Fatalf("released %v with a port left", released)
	}
	m.Leave("p2", a)
	m.ReleaseIdle(func(k NetKey) { released[k] = s.Networks[k] != nil })
	if len(released) != 1 || !released[a] {
		t.Fatalf("released %v, want net-a seen in the state at the callback", released)
	}
	if s.Networks[a] != nil || s.Networks[b] == nil {
		t.Fatal("wrong networks left in the state")
	}
	if _, ok := m.VLAN(a); ok {
		t.Error("VLAN of a released mapping still allocated")
	}
	if v, _ := m.Allocate(Seg("net-c", 7)); v != 1 {
		t.Errorf("freed VLAN 1 not reused: got %d", v)
	}
}
