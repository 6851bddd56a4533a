package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/subscribe"
)

// runMain measures every combination: broker x size x mode x client.
func runMain(args []string) int {
	fs := flag.NewFlagSet("clientcpu", flag.ContinueOnError)
	var (
		streamrunBin = fs.String("streamrun", "", "streamrun binary, to run the embedded broker (`streamrun broker`) in its own process")
		pulsarURL    = fs.String("pulsar", "", "Apache Pulsar's service URL (empty: the embedded broker only)")
		pulsarAdmin  = fs.String("pulsar-admin", "", "Apache Pulsar's admin URL: the topics made there are deleted at the end (empty: they stay)")
		n            = fs.Int("n", 300000, "messages per measurement")
		sizesFlag    = fs.String("sizes", "100,1024", "payload sizes in bytes, comma separated")
		verbose      = fs.Bool("v", false, "print each child's JSON line to stderr")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var sizes []int
	for _, s := range strings.Split(*sizesFlag, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || v < 1 {
			fmt.Fprintf(os.Stderr, "clientcpu: -sizes %q: want positive numbers\n", *sizesFlag)
			return 2
		}
		sizes = append(sizes, v)
	}
	if *streamrunBin == "" || *n < 1 {
		fmt.Fprintln(os.Stderr, "clientcpu: -streamrun BIN is required and -n must be positive")
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "clientcpu: %v\n", err)
		return 1
	}
	r := &runner{self: self, n: *n, sizes: sizes, verbose: *verbose}
	r.header(*streamrunBin, *pulsarURL)
	ctx := context.Background()
	stop, url, err := startEmbedded(ctx, *streamrunBin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "clientcpu: embedded broker: %v\n", err)
		return 1
	}
	err = r.broker(ctx, "embedded", url)
	stop()
	if err == nil && *pulsarURL != "" {
		r.topics = nil
		err = r.broker(ctx, "pulsar", *pulsarURL)
		if *pulsarAdmin != "" {
			err = errors.Join(err, r.deleteTopics(ctx, *pulsarAdmin))
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "clientcpu: %v\n", err)
		return 1
	}
	r.footer()
	return 0
}

type runner struct {
	self    string
	n       int
	sizes   []int
	verbose bool
	ratios  []string
	// topics made on the current broker, to delete at the end
	topics []string
}

// deleteTopics deletes the topics made on Apache Pulsar: they hold
// hundreds of MB.
func (r *runner) deleteTopics(ctx context.Context, admin string) error {
	var errs []error
	for _, t := range r.topics {
		path := strings.Replace(t, "persistent://", "/admin/v2/persistent/", 1) + "?force=true"
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, strings.TrimSuffix(admin, "/")+path, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", t, err))
			continue
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 && resp.StatusCode != http.StatusNotFound {
			errs = append(errs, fmt.Errorf("delete %s: %s", t, resp.Status))
		}
	}
	r.topics = nil
	return errors.Join(errs...)
}

// header prints the conditions.
func (r *runner) header(streamrunBin, pulsarURL string) {
	official := "?"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/apache/pulsar-client-go" {
				official = d.Version
			}
		}
	}
	fmt.Printf("client CPU per million messages, %s\n\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Printf("- machine: %d CPUs (GOMAXPROCS of each client: %d), %s, load average before: %s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), loadavg())
	fmt.Printf("- clients: streamrun (pool, subscribe) and github.com/apache/pulsar-client-go %s, each in a process of its own, measured with getrusage(RUSAGE_SELF) from after connecting and opening the producer/consumer to the last receipt/ack\n", official)
	fmt.Printf("- messages: %d per measurement; producer batching %d messages / %d bytes / %s, %d pending at most; consumer Shared, receiver queue %d, Receive+Ack one by one, acks grouped %d / %s; the consumers read a backlog published by streamrun's producer\n",
		r.n, batchMessages, batchBytes, batchDelay, maxPending, receiverQueue, ackGroupSize, ackGroupTime)
	fmt.Printf("- brokers: embedded = `%s broker --data TMP --http -` in its own process (each entry written before its receipt, no fsync)", streamrunBin)
	if pulsarURL != "" {
		fmt.Printf("; pulsar = Apache Pulsar at %s (its own configuration, shared)", pulsarURL)
	}
	fmt.Printf("\n\n| broker | size | mode | client | cpu s | cpu s / 1M msgs | elapsed s | msg/s | max RSS MiB |\n|---|---:|---|---|---:|---:|---:|---:|---:|\n")
}

func (r *runner) footer() {
	fmt.Printf("\nours / official, CPU per message (same run): \n\n")
	for _, s := range r.ratios {
		fmt.Println("- " + s)
	}
	fmt.Printf("\nload average after: %s\n", loadavg())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// broker measures every size, mode and client against one broker.
func (r *runner) broker(ctx context.Context, name, url string) error {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for i, size := range r.sizes {
		clients := []string{"streamrun", "official"}
		if i%2 == 1 { // alternate who goes first, so that drift in load does not favour one
			clients[0], clients[1] = clients[1], clients[0]
		}
		backlog := fmt.Sprintf("persistent://public/default/clientcpu-%s-%d-streamrun", run, size)
		// The consumers' subscriptions exist before the backlog is
		// published, so that no retention setting trims it.
		if err := subscribeAhead(ctx, url, backlog, clients); err != nil {
			return err
		}
		for _, mode := range []string{"produce", "consume"} {
			got := map[string]measurement{}
			for _, c := range clients {
				// Each producer publishes to a topic of its own; streamrun's
				// is the consumers' backlog.
				topic := fmt.Sprintf("persistent://public/default/clientcpu-%s-%d-%s", run, size, c)
				if mode == "consume" {
					topic = backlog
				}
				r.topics = append(r.topics, topic)
				args := []string{"measure", "-client", c, "-mode", mode, "-url", url, "-n", strconv.Itoa(r.n),
					"-size", strconv.Itoa(size), "-topic", topic, "-subscription", "cpu-" + c}
				m, err := r.child(ctx, args)
				if err != nil {
					return fmt.Errorf("%s, %d B, %s %s: %w", name, size, c, mode, err)
				}
				got[c] = m
				fmt.Printf("| %s | %d | %s | %s | %.3f | %.3f | %.2f | %.0f | %.1f |\n", name, size, mode, c, m.CPUSeconds, m.cpuPerMillion(), m.Elapsed, float64(m.N)/m.Elapsed, float64(m.MaxRSS)/(1<<20))
			}
			r.ratios = append(r.ratios, fmt.Sprintf("%s, %d B, %s: %.2fx (%.2f vs %.2f CPU s per million)", name, size, mode,
				got["streamrun"].cpuPerMillion()/got["official"].cpuPerMillion(), got["streamrun"].cpuPerMillion(), got["official"].cpuPerMillion()))
		}
	}
	return nil
}

// subscribeAhead creates one durable subscription per client on topic.
func subscribeAhead(ctx context.Context, url, topic string, clients []string) error {
	c, err := pool.New(ctx, pool.Options{ServiceURL: url})
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	for _, name := range clients {
		cons, err := subscribe.New(ctx, c, subscribe.Options{Topics: []string{topic}, Subscription: "cpu-" + name, InitialPosition: subscribe.Earliest})
		if err != nil {
			return fmt.Errorf("subscribe %s to %s: %w", name, topic, err)
		}
		if err := cons.Close(ctx); err != nil {
			return err
		}
	}
	return nil
}

// child runs one measurement in a process of its own.
func (r *runner) child(ctx context.Context, args []string) (measurement, error) {
	cmd := exec.CommandContext(ctx, r.self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return measurement{}, err
	}
	if r.verbose {
		os.Stderr.Write(out)
	}
	var m measurement
	if err := json.Unmarshal(out, &m); err != nil {
		return m, fmt.Errorf("child's output %q: %w", out, err)
	}
	return m, nil
}

// startEmbedded starts `streamrun broker` on a free port with a data
// directory of its own, and returns how to stop it and its URL.
func startEmbedded(ctx context.Context, bin string) (stop func(), url string, err error) {
	dir, err := os.MkdirTemp("", "clientcpu-broker-")
	if err != nil {
		return nil, "", err
	}
	cmd := exec.CommandContext(ctx, bin, "broker", "--listen", "127.0.0.1:0", "--http", "-", "--data", dir, "--log-level", "warn")
	// Its log (and its "interrupted" at the end) is shown only if it fails
	// to start: it would break the table on stdout's terminal.
	var logs strings.Builder
	cmd.Stderr = &logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		os.RemoveAll(dir)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return nil, "", fmt.Errorf("no ready line: %w; its log: %s", err, logs.String())
	}
	go io.Copy(io.Discard, out)
	for _, f := range strings.Fields(line) {
		if u, ok := strings.CutPrefix(f, "service_url="); ok {
			return stop, u, nil
		}
	}
	stop()
	return nil, "", errors.New("ready line without service_url: " + line)
}
