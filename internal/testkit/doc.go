// Package testkit holds the test helpers that need no broker: waiting on
// a condition (Eventually, Context), logs shown only when a test fails
// (LogWriter, SyncBuffer), log records kept to wait on (Records), fresh
// names for topics (Name, TopicName) and the example plugins built once
// (BuildPlugins).
//
// It is internal and imports nothing of the module, so that any package's
// tests can use it, plugin/host's included, without pulling a broker in.
// Package broker/brokertest re-exports all of it with the embedded broker
// and the Apache Pulsar target: the modules outside this one (interop,
// bench), which cannot import internal packages, use brokertest.
package testkit
