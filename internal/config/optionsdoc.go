package config

import (
	"fmt"
	"strings"
)

// RenderOptionsDoc renders docs/options.md from the option table.
func RenderOptionsDoc() string {
	var b strings.Builder
	b.WriteString("# Options: what ovs-agent does with each option of the reference agent\n\n")
	b.WriteString("Generated from `internal/config/options.go` (`UPDATE_OPTIONS_DOC=1 go test ./internal/config -run TestOptionsDoc`);\n")
	b.WriteString("a test fails when the two differ, and another when an option of the reference has no row.\n\n")
	b.WriteString("- **honoured**: applied as the reference applies it.\n")
	b.WriteString("- **refused**: any value but the default stops `ovs-agent` and `ovs-agent check-config` with exit 1 and one\n")
	b.WriteString("  line naming option, value and why. Nothing that is refused is ever reported to neutron-server as active.\n")
	b.WriteString("- **partly refused**: the values named in the last column are refused, the others honoured.\n")
	b.WriteString("- **no effect**: the reference reads it for machinery ovs-agent does not have; any value is accepted.\n\n")
	b.WriteString("Options of other sections (and server options in a shared neutron.conf) are ignored, as oslo.config ignores\n")
	b.WriteString("options nobody registered.\n\n")
	b.WriteString("The `transport_url` query sets `[oslo_messaging_rabbit]` options, as oslo.messaging's rabbit driver does\n")
	b.WriteString("(`rabbit://user:pass@host:5671/?ssl=1`): such a value wins over the files and goes through this table the\n")
	b.WriteString("same way; a name that is not an option of that section is refused. A password holding `/`, `?`, `#`, `,`\n")
	b.WriteString("or `%` must be percent-encoded (`%2F`, `%3F`, `%23`, `%2C`, `%25`): the shapes an unencoded one produces\n")
	b.WriteString("are refused, and no part of the URL after the scheme is shown when it does not parse.\n")
	section := ""
	for _, o := range OptionTable() {
		if o.Section != section {
			section = o.Section
			fmt.Fprintf(&b, "\n## [%s]\n\n| option | reference default | status | why / refused values | effect shown by |\n|---|---|---|---|---|\n", section)
		}
		why := o.Why
		if o.Refuse != "" && o.Status == Partial {
			why = fmt.Sprintf("%s (refused e.g.: `%s`)", why, o.Refuse)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", o.Name, cell(o.Default), o.Status, strings.ReplaceAll(why, "|", "\\|"), cell(o.Proof))
	}
	return b.String()
}

func cell(v string) string {
	if v == "" {
		return ""
	}
	return "`" + v + "`"
}
