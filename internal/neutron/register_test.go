package neutron

import (
	"encoding/json"
	"slices"
	"testing"
)

// testTrunk is a feature's OVO type as a test registers it.
type testTrunk struct {
	ID string `json:"id"` // the cache compares fields by their json names (changedFields)
}

func (*testTrunk) ResourceType() string { return "Trunk" }
func (t *testTrunk) ResourceID() string { return t.ID }
func (*testTrunk) Revision() int64      { return 0 }
func (t *testTrunk) UnmarshalJSON(b []byte) error {
	var w struct {
		Data struct {
			ID string `json:"id"`
		} `json:"versioned_object.data"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	t.ID = w.Data.ID
	return nil
}

// A type a feature registers is decoded from a push, held by the cache and
// subscribed to; unregistered, the same push is refused.
func TestRegisteredTypePushedIntoCache(t *testing.T) {
	push := []byte(`{"resource_list": [{"versioned_object.name": "Trunk", "versioned_object.version": "1.1", "versioned_object.namespace": "versionedobjects", "versioned_object.data": {"id": "t1"}}], "event_type": "updated"}`)
	if _, err := DecodePush(push); err == nil {
		t.Fatalf("an unregistered type decoded")
	}
	saved := slices.Clone(CachedTypes)
	t.Cleanup(func() { CachedTypes = saved; delete(registered, "Trunk"); delete(ResourceVersions, "Trunk") })
	RegisterType("Trunk", "1.1", func() DecodableResource { return &testTrunk{} })

	p, err := DecodePush(push)
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event
	c := NewCache(CacheOptions{OnEvent: func(ev Event) { evs = append(evs, ev) }})
	c.ApplyPush(p)
	if r, ok := c.Get("Trunk", "t1").(*testTrunk); !ok || r.ID != "t1" {
		t.Errorf("cache holds %v, want trunk t1", c.Get("Trunk", "t1"))
	}
	if len(evs) != 1 || evs[0].Type != "Trunk" || evs[0].ID != "t1" {
		t.Errorf("events = %+v, want one for trunk t1", evs)
	}
	var topics []string
	for _, s := range (ConsumerConfig{Cache: c}).Subscriptions() {
		topics = append(topics, s.Topic)
	}
	if !slices.Contains(topics, PushTopic("Trunk")) {
		t.Errorf("subscriptions %q lack %s", topics, PushTopic("Trunk"))
	}
}
