// Package securitytest holds the end-to-end security tests: TLS with host
// name verification, TLS only, token authentication, namespace
// authorization and the admin API over HTTPS, run against an embedded
// broker configured for all of them and, when STREAMRUN_PULSAR_SECURE_URL
// is set, against an Apache Pulsar standalone configured the same way
// (scripts/pulsar start --name secure). See docs/security.md.
package securitytest
