package neutron

import "sort"

// NotificationKind names a notification the reference agent synthesises from cache events
// (spec §3.2) in place of the legacy q-agent-notifier-* casts.
type NotificationKind string

// Synthesised notifications.
const (
	PortUpdate                  NotificationKind = "port_update"
	PortDelete                  NotificationKind = "port_delete"
	NetworkUpdate               NotificationKind = "network_update"
	NetworkDelete               NotificationKind = "network_delete"
	BindingDeactivate           NotificationKind = "binding_deactivate"
	BindingActivate             NotificationKind = "binding_activate"
	SecurityGroupsRuleUpdated   NotificationKind = "security_groups_rule_updated"
	SecurityGroupsMemberUpdated NotificationKind = "security_groups_member_updated"
	AddressGroupUpdated         NotificationKind = "address_group_updated"
	AddressGroupDeleted         NotificationKind = "address_group_deleted"
)

// Notification is one synthesised notification. Only the fields of its kind are set.
type Notification struct {
	Kind           NotificationKind
	PortID         string
	NetworkID      string
	Host           string   // binding_(de)activate: the host concerned; ignore if not ours
	SecurityGroups []string // security_groups_*_updated, sorted
	AddressGroupID string
	AgentRestarted bool // port_update from the initial fill
}

func sortedSet(ids ...[]string) []string {
	set := map[string]struct{}{}
	for _, l := range ids {
		for _, id := range l {
			if id != "" {
				set[id] = struct{}{}
			}
		}
	}
	out := make([]string, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Synthesize maps a cache event to the notifications the reference agent's handlers
// receive for it, in the reference's order. Pure.
func Synthesize(ev Event) []Notification {
	var out []Notification
	switch ev.Type {
	case TypePort:
		oldP, _ := ev.Old.(*Port)
		newP, _ := ev.New.(*Port)
		if ev.Kind == Deleted {
			out = append(out, Notification{Kind: PortDelete, PortID: ev.ID})
			if oldP != nil && len(oldP.SecurityGroupIDs) > 0 {
				out = append(out, Notification{Kind: SecurityGroupsMemberUpdated, SecurityGroups: sortedSet(oldP.SecurityGroupIDs)})
			}
			return out
		}
		if from, to, ok := bindingMove(oldP, newP, ev); ok {
			out = append(out,
				Notification{Kind: BindingDeactivate, PortID: ev.ID, Host: from},
				Notification{Kind: BindingActivate, PortID: ev.ID, Host: to})
		} else {
			out = append(out, Notification{Kind: PortUpdate, PortID: ev.ID, AgentRestarted: ev.AgentRestarted})
		}
		if ev.HasChanged("security_group_ids", "fixed_ips", "allowed_address_pairs") {
			var before, after []string
			if oldP != nil {
				before = oldP.SecurityGroupIDs
			}
			if newP != nil {
				after = newP.SecurityGroupIDs
			}
			if sgs := sortedSet(before, after); len(sgs) > 0 {
				out = append(out, Notification{Kind: SecurityGroupsMemberUpdated, SecurityGroups: sgs})
			}
		}
	case TypeNetwork:
		if ev.Kind == Deleted {
			out = append(out, Notification{Kind: NetworkDelete, NetworkID: ev.ID})
		} else {
			out = append(out, Notification{Kind: NetworkUpdate, NetworkID: ev.ID})
		}
	case TypeSecurityGroupRule:
		var r *SecurityGroupRule
		if ev.Kind == Deleted {
			r, _ = ev.Old.(*SecurityGroupRule)
		} else {
			r, _ = ev.New.(*SecurityGroupRule)
		}
		if r != nil && r.SecurityGroupID != "" {
			out = append(out, Notification{Kind: SecurityGroupsRuleUpdated, SecurityGroups: []string{r.SecurityGroupID}})
		}
	case TypeAddressGroup:
		if ev.Kind == Deleted {
			out = append(out, Notification{Kind: AddressGroupDeleted, AddressGroupID: ev.ID})
		} else {
			out = append(out, Notification{Kind: AddressGroupUpdated, AddressGroupID: ev.ID})
		}
	}
	return out
}

// bindingMove detects a live-migration binding switch: the ACTIVE binding moved between
// hosts and the old host keeps an INACTIVE binding.
func bindingMove(oldP, newP *Port, ev Event) (from, to string, ok bool) {
	if oldP == nil || newP == nil || !ev.HasChanged("bindings") {
		return "", "", false
	}
	was, now := oldP.ActiveBinding(), newP.ActiveBinding()
	if was == nil || now == nil || was.Host == now.Host {
		return "", "", false
	}
	if newP.BindingOn(was.Host, BindingInactive) == nil {
		return "", "", false
	}
	return was.Host, now.Host, true
}
