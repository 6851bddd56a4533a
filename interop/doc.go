// Package interop holds streamrun's interoperability suite: the official
// Apache Pulsar clients (Go, and the Java tools and Python client when they
// are installed) run unchanged against a broker and assert behaviour.
//
// The suite is its own module so that github.com/apache/pulsar-client-go
// never becomes a dependency of github.com/streamrun/streamrun.
//
// By default the broker under test is streamrun's embedded broker, started
// in-process; STREAMRUN_INTEROP_TARGET=pulsar points the same tests at a
// running Apache Pulsar instead, which is how every test is first proven
// right. See README.md for how to run it and KNOWN_GAPS.md for what the
// embedded broker does differently today.
package interop
