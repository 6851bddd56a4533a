package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamrun/streamrun/broker/brokertest"
)

// image is what the Dockerfile says the container runs: its entry point,
// its default arguments (CMD) and its health check's command, each in
// exec form.
type image struct {
	entrypoint, cmd, health []string
}

// imageBinary is where the image holds streamrun.
const imageBinary = "/usr/local/bin/streamrun"

// readImage reads the final stage's ENTRYPOINT, CMD and HEALTHCHECK of
// the repository's Dockerfile.
func readImage(t *testing.T) image {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var im image
	exec := func(what, s string) []string {
		var v []string
		if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &v); err != nil || len(v) == 0 {
			t.Fatalf("the Dockerfile's %s %q is not in exec form (a JSON list): %v", what, s, err)
		}
		return v
	}
	// Instructions, continuation lines joined.
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch word {
		case "ENTRYPOINT":
			im.entrypoint = exec(word, rest)
		case "CMD":
			im.cmd = exec(word, rest)
		case "HEALTHCHECK":
			_, check, ok := strings.Cut(rest, " CMD ")
			if !ok {
				t.Fatalf("the Dockerfile's HEALTHCHECK %q has no CMD", rest)
			}
			im.health = exec("HEALTHCHECK CMD", check)
		}
	}
	if im.entrypoint == nil || im.cmd == nil || im.health == nil {
		t.Fatalf("the Dockerfile lacks an ENTRYPOINT, CMD or HEALTHCHECK: %+v", im)
	}
	return im
}

// runArgs are the arguments of `streamrun run` the image's entry point
// gives, then args (what a container's arguments, or CMD, add).
func (im image) runArgs(t *testing.T, args ...string) []string {
	t.Helper()
	if len(im.entrypoint) < 2 || im.entrypoint[0] != imageBinary || im.entrypoint[1] != "run" {
		t.Fatalf("the image's entry point %q is not %s run", im.entrypoint, imageBinary)
	}
	return append(append([]string(nil), im.entrypoint[2:]...), args...)
}

// telemetryAddr is the --telemetry-addr that run args give (the last
// one, as for any flag given twice), "" for none.
func telemetryAddr(t *testing.T, args []string) string {
	t.Helper()
	var rc runConfig
	fs := newRunFlags(&rc)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("streamrun run %q: %v", args, err)
	}
	return rc.telemetryAddr
}

// The image's health check asks the readiness endpoint of the run its
// entry point starts, on loopback, whatever the file says (Apache Pulsar
// or the embedded broker): `streamrun health` on the address the entry
// point's --telemetry-addr serves. Every flag is one the command has,
// and the default argument is the file the docs say to mount.
func TestTheImagesHealthCheckAsksItsOwnRun(t *testing.T) {
	im := readImage(t)
	args := im.runArgs(t, im.cmd...)
	addr := telemetryAddr(t, args)
	if host, _, err := net.SplitHostPort(addr); err != nil || host != "127.0.0.1" {
		t.Fatalf("the image's run serves telemetry on %q (%v), want a port on 127.0.0.1", addr, err)
	}
	if len(im.cmd) != 1 || im.cmd[0] != "/pipelines/pipeline.yaml" {
		t.Errorf("the image's default argument %q, want the file /pipelines/pipeline.yaml alone", im.cmd)
	}
	if len(im.health) < 2 || im.health[0] != imageBinary || im.health[1] != "health" {
		t.Fatalf("the health check %q is not %s health", im.health, imageBinary)
	}
	u := healthURL(t, im.health)
	if u.Host != addr || u.Path != "/readyz" {
		t.Errorf("the health check asks %s, want /readyz of the run's telemetry listener %s", u, addr)
	}
	// Its flags are health's: against nothing listening, it fails as a
	// check (1), not as a usage error (2).
	h := withHost(im.health[2:], freeAddr(t))
	if code, _, stderr := runArgs(append([]string{"health"}, h...)...); code != 1 || !strings.Contains(stderr, "connection refused") {
		t.Errorf("streamrun health %q against nothing: exit %d, %q; want 1, connection refused", h, code, stderr)
	}
}

// healthURL is the --url of a health check's command.
func healthURL(t *testing.T, health []string) *url.URL {
	t.Helper()
	for i, a := range health {
		v, ok := strings.CutPrefix(a, "--url=")
		if !ok && a == "--url" && i+1 < len(health) {
			v, ok = health[i+1], true
		}
		if ok {
			u, err := url.Parse(v)
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
	}
	t.Fatalf("the health check %q names no --url", health)
	return nil
}

// withHost is args with host:port of the telemetry listener (in
// --telemetry-addr and a --url) replaced by addr: the image's own port
// may be taken on a machine running tests.
func withHost(args []string, addr string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--telemetry-addr="):
			a = "--telemetry-addr=" + addr
		case strings.HasPrefix(a, "http://"):
			if u, err := url.Parse(a); err == nil {
				u.Host = addr
				a = u.String()
			}
		}
		out[i] = a
	}
	return out
}

// The image's run and health check, as the Dockerfile gives them (the
// telemetry port moved to a free one), pass once the run's pipelines
// consume: against a broker at a service URL (Apache Pulsar with
// STREAMRUN_PULSAR_URL, else an embedded broker of the test's standing
// in) and with the run's own embedded broker; and fail once the run is
// gone.
func TestTheImagesHealthCheckPassesOnARunAgainstAnyBroker(t *testing.T) {
	im := readImage(t)
	bin := buildStreamrun(t)
	serviceURL := brokertest.PulsarURL()
	if serviceURL == "" {
		serviceURL = brokertest.Start(t).ServiceURL()
	}
	for _, tc := range []struct{ name, serviceURL string }{
		{"service URL", serviceURL},
		{"embedded broker", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in, out := fmt.Sprintf("image-in-%d", time.Now().UnixNano()), fmt.Sprintf("image-out-%d", time.Now().UnixNano())
			src := taggerPipeline(t, tc.serviceURL, in, out, "shared", 10, 1, "0s")
			if tc.serviceURL == "" {
				src = strings.Replace(src, "service_url: \n", "", 1)
			}
			file := writePipelineFile(t, dir, "pipeline.yaml", src)
			addr := freeAddr(t)
			args := withHost(im.runArgs(t, file), addr)
			p := startProc(t, "streamrun run", dir, bin, nil, append([]string{"run"}, args...)...)
			check := append([]string{"health"}, withHost(im.health[2:], addr)...)
			brokertest.Eventually(t, 2*time.Minute, "the image's health check to pass", func() bool {
				code, _, _ := runArgs(check...)
				return code == 0
			})
			p.signal(t, syscall.SIGINT)
			if code := p.wait(t, time.Minute); code != 0 {
				t.Fatalf("exit %d after SIGINT", code)
			}
			if code, _, stderr := runArgs(check...); code != 1 {
				t.Errorf("the health check once the run is gone: exit %d (%s), want 1", code, stderr)
			}
		})
	}
}

// freeAddr is a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
