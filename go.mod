module github.com/ovsagent/ovsagent

go 1.26.8

require (
	github.com/google/uuid v1.6.0
	github.com/rabbitmq/amqp091-go v1.17.0
	golang.org/x/crypto v0.57.0
	gopkg.in/ini.v1 v1.68.0
)

require (
	github.com/stretchr/testify v1.12.1 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
