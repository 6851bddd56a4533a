// Package scrape serves a streamrun host for the tools that watch it: its
// OpenTelemetry metrics for Prometheus on /metrics, and /healthz and
// /readyz for probes such as Kubernetes'.
package scrape
