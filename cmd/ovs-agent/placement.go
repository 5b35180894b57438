package main

import (
	"context"
	"net"
	"os"
	"strings"
	"time"

	"github.com/ovsagent/ovsagent/internal/config"
	"github.com/ovsagent/ovsagent/internal/neutron"
)

// placementConfigurations fills report_state's resource_provider_* keys
// from the options (internal/config placement.go): neutron-server creates
// the placement inventories from them.
func placementConfigurations(cfg *config.Config, hypervisor string, c *neutron.AgentConfigurations) {
	pl := cfg.OVS.Placement
	c.ResourceProviderBandwidths = rates(pl.Bandwidths)
	c.ResourceProviderPacketProcessingWithoutDirection = rates(pl.PPWithoutDirection)
	c.ResourceProviderPacketProcessingWithDirection = rates(pl.PPWithDirection)
	c.ResourceProviderInventoryDefaults = pl.InventoryDefaults
	c.ResourceProviderPacketProcessingInventoryDefaults = pl.PPInventoryDefaults
	c.ResourceProviderHypervisors = cfg.RPHypervisors(hypervisor)
}

func rates(r config.RPRates) map[string]any {
	out := make(map[string]any, len(r))
	for name, dirs := range r {
		out[name] = dirs
	}
	return out
}

// hypervisorHostname is the reference's get_hypervisor_hostname (libvirt's
// virGetHostnameImpl, what nova names the compute node's resource provider):
// the host name when it is a "localhost..." or dotted name, else its
// canonical name from the resolver when that is not "localhost...", else
// the host name.
func hypervisorHostname(ctx context.Context) string {
	h, err := os.Hostname()
	if err != nil || strings.HasPrefix(h, "localhost") || strings.Contains(h, ".") {
		return h
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cname, err := net.DefaultResolver.LookupCNAME(ctx, h)
	cname = strings.TrimSuffix(cname, ".")
	if err != nil || cname == "" || strings.HasPrefix(cname, "localhost") {
		return h
	}
	return cname
}
