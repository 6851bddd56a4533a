// Package storecmp runs broker/store's benchmark workloads on pebble, to
// decide how the embedded broker stores its logs (see broker/store/doc.go).
// It is a module of its own so that pebble never enters the main module's
// dependencies. Run: cd bench/storecmp && go test -bench . -run '^$'
package storecmp
