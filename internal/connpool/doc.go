// Package connpool is the Pulsar client's connection layer: one pooled
// connection per broker address, each with its reader and writer
// goroutines, request ids matched to answers, consumer and producer ids
// routed to their handlers, keep-alive, lookups (with redirects and
// proxies) and the id allocators.
//
// It is internal so that the wire stays out of package pool's API: pool
// builds producers on it, and package subscribe builds consumers on it.
// A *pool.Client is a *Pool (pool defines type Client connpool.Pool), so
// subscribe gets a client's pool with (*connpool.Pool)(client); Config
// carries what the pool needs from package pool (its error types and
// its own state), so that nothing here imports pool.
//
// The rules it implements are those of docs/contract.md §3 (the client's
// connections); docs/ARCHITECTURE.md shows where it sits.
package connpool
