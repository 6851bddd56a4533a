// Package rawsock reads and writes a non-blocking socket by raw system
// calls on Linux. A system call the Go runtime sees costs its monitor
// thread's hand-overs of the P and 20 µs polling; on a socket that is
// non-blocking, read(2) and write(2) never wait in the kernel, so the
// runtime need not be told (docs/benchmarks/design.md, "System calls the Go
// runtime need not see").
// EAGAIN still waits on the poller through syscall.RawConn, so deadlines
// and a Close that ends a blocked call behave as with net.Conn, and the
// descriptor cannot be closed under a call. Elsewhere the conn is used
// as it is.
package rawsock
