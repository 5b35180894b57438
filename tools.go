//go:build tools

// Package tools pins dependencies that packages are still being written against;
// it is never built. Remove an import once a real package uses it.
package tools

import (
	_ "github.com/google/uuid"
	_ "github.com/rabbitmq/amqp091-go"
	_ "gopkg.in/ini.v1"
)
