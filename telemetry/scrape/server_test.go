package scrape

import "testing"

// A bare port listens on loopback; a host given is kept.
func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{":9464": "127.0.0.1:9464", "0.0.0.0:9464": "0.0.0.0:9464", "[::1]:1": "[::1]:1"} {
		if got, err := ListenAddr(in); err != nil || got != want {
			t.Errorf("ListenAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ListenAddr("9464"); err == nil {
		t.Error("ListenAddr(\"9464\") accepted a port without a colon")
	}
}
