//go:build !linux

package connpool

import (
	"io"
	"syscall"
)

// rawIO: not here; the connection reads and writes as net.Conn does, the
// writer goroutine writing everything.
const rawIO = false

const maxIovecs = 1024

type rawReader struct{}

func newRawReader(syscall.RawConn) *rawReader { return &rawReader{} }

func (*rawReader) Read([]byte) (int, error) { return 0, io.ErrNoProgress }

type rawWriter struct{}

func newRawWriter(syscall.RawConn) *rawWriter { return &rawWriter{} }

func (*rawWriter) tryWritev([][]byte) (int, bool) { return 0, false }
