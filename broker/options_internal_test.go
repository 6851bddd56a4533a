package broker

import (
	"net"
	"testing"
)

// The default addresses are loopback, and so is an address without a
// host; "0.0.0.0" is kept as asked.
func TestDefaultAddressesAreLoopback(t *testing.T) {
	o := Options{TLSCertFile: "c.pem"}.withDefaults()
	for name, addr := range map[string]string{"Listen": o.Listen, "HTTP": o.HTTP, "TLSListen": o.TLSListen} {
		if h, _, _ := net.SplitHostPort(addr); !net.ParseIP(h).IsLoopback() {
			t.Errorf("default %s %q is not loopback", name, addr)
		}
	}
	o = Options{Listen: ":7000", HTTP: ":0", HTTPS: ":8443", TLSListen: "0.0.0.0:7001"}.withDefaults()
	if o.Listen != "127.0.0.1:7000" || o.HTTP != "127.0.0.1:0" || o.HTTPS != "127.0.0.1:8443" || o.TLSListen != "0.0.0.0:7001" {
		t.Errorf("withDefaults: %q %q %q %q", o.Listen, o.HTTP, o.HTTPS, o.TLSListen)
	}
	if o := (Options{HTTP: "-", Listen: "-"}).withDefaults(); o.HTTP != "-" || o.Listen != "-" || o.HTTPS != "" {
		t.Errorf("off stays off: %q %q %q", o.Listen, o.HTTP, o.HTTPS)
	}
}
