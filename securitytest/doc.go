// Package securitytest holds the end-to-end security tests: TLS with host
// name verification, TLS only, token authentication, namespace
// authorization and the admin API over HTTPS, run against an embedded
// broker configured for all of them and, when STREAMRUN_PULSAR_SECURE_URL
// is set, against an Apache Pulsar standalone configured the same way
// (scripts/pulsar start --name secure). The token tests run once per
// algorithm (HS256, RS256, ES256); against Apache Pulsar, for the one it
// was started with (--token-alg). See docs/security.md.
package securitytest
