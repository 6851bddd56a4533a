package pulsarwire

import (
	"bufio"
	"errors"
	"strings"
	"testing"
)

// An HTTP answer read as a frame (a service URL pointing at an admin
// port) is named as such, not as a frame of 1213486160 bytes.
func TestReaderNamesAnHTTPAnswer(t *testing.T) {
	r := NewReader(bufio.NewReader(strings.NewReader("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")), MaxFrameSize(DefaultMaxMessageSize))
	_, err := r.Next()
	if !errors.Is(err, ErrHTTP) || strings.Contains(err.Error(), "1213486160") {
		t.Fatalf("got %v, want ErrHTTP", err)
	}
}
