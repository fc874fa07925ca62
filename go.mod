module github.com/pico-go/pico

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/trace v1.47.0
	pgregory.net/rapid v1.3.0
)

require github.com/cespare/xxhash/v2 v2.3.0 // indirect
