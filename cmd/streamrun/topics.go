package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/streamrun/streamrun/pulsarwire"
)

// `streamrun topics`: topic administration over the admin REST API, the
// subset of Apache Pulsar's /admin/v2 that the embedded broker serves too,
// so the same commands work against both.

const topicsHelp = `Usage: streamrun topics SUBCOMMAND [ARGS] [flags]

Administers topics over the admin REST API of the embedded broker or of
Apache Pulsar (--admin-url, default http://127.0.0.1:8080, where both listen
by default).

Subcommands:
  list [TENANT/NAMESPACE]         topics of a namespace (default public/default)
  create TOPIC [--partitions N]   a topic; partitioned with N > 0
  delete TOPIC [--force]          a topic, partitioned or not
  stats TOPIC                     counters, rates, publishers, subscriptions
  internal-stats TOPIC            entries, size and cursors as stored
  subscriptions TOPIC             the subscriptions' names
  backlog TOPIC                   each subscription's backlog (entries) and unacked messages
  reset-cursor TOPIC --subscription S --to earliest|latest|TIME|ID
                                  move a subscription (TIME: RFC 3339 or a duration
                                  ago like 10m; ID: ledger:entry:partition[:batch], as consume prints);
                                  its consumers are disconnected and resume there

--output json prints what the server answered (stats, lists) or a small
object (create, delete, reset-cursor).

Waits: each request takes at most --timeout. Exit status: 0 done, 1 the
server refused or could not be reached, 2 bad usage.
`

// topicsFlags are the flags of `streamrun topics`.
type topicsFlags struct {
	adminURL     string
	tlsCA        string
	token        string
	output       string
	timeout      time.Duration
	partitions   int
	force        bool
	subscription string
	to           string
}

func runTopics(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCmd("topics", stdout, stderr)
	fs := pflag.NewFlagSet("streamrun topics", pflag.ContinueOnError)
	fs.SetInterspersed(true)
	var f topicsFlags
	fs.StringVar(&f.adminURL, "admin-url", "http://127.0.0.1:8080", "admin REST API: http://host:port or https://host:port")
	fs.StringVar(&f.token, "token", "", "auth token: "+secretFlagHelp)
	fs.StringVar(&f.tlsCA, "tls-ca", "", "PEM file of the CAs to trust for an https:// --admin-url (default: the system's)")
	fs.StringVarP(&f.output, "output", "o", "text", "text or json")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long each request may take")
	fs.IntVar(&f.partitions, "partitions", 0, "create: the number of partitions (0: not partitioned)")
	fs.BoolVar(&f.force, "force", false, "delete: even with producers or consumers connected")
	fs.StringVarP(&f.subscription, "subscription", "s", "", "reset-cursor: the subscription")
	fs.StringVar(&f.to, "to", "", "reset-cursor: earliest, latest, an RFC 3339 time, a duration ago (10m) or a message id ledger:entry:partition[:batch]")
	if code, done := cmd.parse(fs, args, topicsHelp); done {
		return code
	}
	a, err := f.admin()
	if err != nil {
		return cmd.fail(err)
	}
	sub := fs.Args()
	if len(sub) == 0 {
		return cmd.fail(usagef("give a subcommand: list, create, delete, stats, internal-stats, subscriptions, backlog or reset-cursor"))
	}
	op, ok := topicOps[sub[0]]
	if !ok {
		return cmd.fail(usagef("unknown subcommand %q", sub[0]))
	}
	if err := op.check(&f, fs, sub[1:]); err != nil {
		return cmd.fail(err)
	}
	if err := op.run(ctx, a, &f, sub[1:], stdout); err != nil {
		if interrupted(ctx) {
			return cmd.fail(errors.New(interruptedMsg))
		}
		return cmd.fail(err)
	}
	return exitOK
}

// topicOp is one subcommand: check validates its arguments and flags (usage
// errors), run does it.
type topicOp struct {
	check func(f *topicsFlags, fs *pflag.FlagSet, args []string) error
	run   func(ctx context.Context, a *adminClient, f *topicsFlags, args []string, w io.Writer) error
}

var topicOps = map[string]topicOp{
	"list":           {checkList, runList},
	"create":         {checkTopicArg("create", "partitions"), runCreate},
	"delete":         {checkTopicArg("delete", "force"), runDelete},
	"stats":          {checkTopicArg("stats"), runStats},
	"internal-stats": {checkTopicArg("internal-stats"), runInternalStats},
	"subscriptions":  {checkTopicArg("subscriptions"), runSubscriptions},
	"backlog":        {checkTopicArg("backlog"), runBacklog},
	"reset-cursor":   {checkReset, runReset},
}

// subcommandFlags are the flags that belong to one subcommand only.
var subcommandFlags = map[string]string{"partitions": "create", "force": "delete", "subscription": "reset-cursor", "to": "reset-cursor"}

// onlyFlags refuses a subcommand's flag given to another.
func onlyFlags(fs *pflag.FlagSet, name string, allowed ...string) error {
	var err error
	fs.Visit(func(fl *pflag.Flag) {
		if owner, ok := subcommandFlags[fl.Name]; ok && owner != name && !slices.Contains(allowed, fl.Name) && err == nil {
			err = usagef("--%s belongs to topics %s, not %s", fl.Name, owner, name)
		}
	})
	return err
}

func checkList(f *topicsFlags, fs *pflag.FlagSet, args []string) error {
	if err := onlyFlags(fs, "list"); err != nil {
		return err
	}
	switch {
	case len(args) > 1:
		return usagef("list takes one namespace, got %s", strings.Join(args, " "))
	case len(args) == 1 && strings.Count(args[0], "/") != 1:
		return usagef("list %q: want TENANT/NAMESPACE, e.g. public/default", args[0])
	}
	return nil
}

func checkTopicArg(name string, allowed ...string) func(*topicsFlags, *pflag.FlagSet, []string) error {
	return func(f *topicsFlags, fs *pflag.FlagSet, args []string) error {
		if err := onlyFlags(fs, name, allowed...); err != nil {
			return err
		}
		if len(args) != 1 {
			return usagef("%s takes one TOPIC, got %d arguments", name, len(args))
		}
		if _, err := pulsarwire.ParseTopic(args[0]); err != nil {
			return usagef("%v", err)
		}
		if name == "create" && f.partitions < 0 {
			return usagef("--partitions must not be negative, got %d", f.partitions)
		}
		return nil
	}
}

func checkReset(f *topicsFlags, fs *pflag.FlagSet, args []string) error {
	if err := checkTopicArg("reset-cursor", "subscription", "to")(f, fs, args); err != nil {
		return err
	}
	switch {
	case f.subscription == "":
		return usagef("reset-cursor needs --subscription")
	case f.to == "":
		return usagef("reset-cursor needs --to earliest, latest, TIME or ID")
	}
	_, err := parseResetTarget(f.to, time.Now())
	return err
}

// admin checks the shared flags and returns the client they describe.
func (f *topicsFlags) admin() (*adminClient, error) {
	switch {
	case f.output != "text" && f.output != "json":
		return nil, usagef("--output %q: want text or json", f.output)
	case f.timeout <= 0:
		return nil, usagef("--timeout must be positive, got %s", f.timeout)
	}
	u, err := url.Parse(f.adminURL)
	switch {
	case err == nil && (u.Scheme == "pulsar" || u.Scheme == "pulsar+ssl"):
		return nil, usagef("--admin-url %q: this is a service URL; the admin API is HTTP, e.g. http://127.0.0.1:8080", f.adminURL)
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, usagef("--admin-url %q: want http://host:port or https://host:port", f.adminURL)
	}
	tok, err := readToken(f.token)
	if err != nil {
		return nil, err
	}
	hc := httpClient()
	if f.tlsCA != "" {
		if hc, err = httpsClient(f.tlsCA); err != nil {
			return nil, usagef("--tls-ca: %v", err)
		}
	}
	return &adminClient{base: strings.TrimSuffix(f.adminURL, "/"), token: tok, timeout: f.timeout, http: hc}, nil
}

// readToken reads --token: "" (none), "file:PATH" or "env:VAR".
func readToken(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	b, err := readSecret("--token", strings.TrimPrefix(s, "token:"))
	return strings.TrimSpace(string(b)), err
}

// httpClient is the admin API's HTTP client: the default transport, no
// redirects followed silently beyond net/http's.
func httpClient() *http.Client { return &http.Client{} }

// httpsClient is httpClient trusting the CAs in caFile; host names are
// verified.
func httpsClient(caFile string) (*http.Client, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}

// adminClient makes admin REST requests.
type adminClient struct {
	base    string
	token   string
	timeout time.Duration
	http    *http.Client
}

// httpStatusError is an answer other than 2xx, with Pulsar's reason.
type httpStatusError struct {
	Status int
	Reason string
}

func (e *httpStatusError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Reason)
}

// do sends a request and returns the body of a 2xx answer.
func (a *adminClient) do(ctx context.Context, method, path string, body any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		// net/http's error names the method and URL again.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%s %s: %w", method, a.base+path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, a.base+path, err)
	}
	if resp.StatusCode/100 != 2 {
		var r struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(b, &r) != nil || r.Reason == "" {
			r.Reason = strings.TrimSpace(string(b))
		}
		return nil, fmt.Errorf("%s %s: %w", method, path, &httpStatusError{resp.StatusCode, r.Reason})
	}
	return b, nil
}

// get decodes a GET's JSON answer into v.
func (a *adminClient) get(ctx context.Context, path string, v any) error {
	b, err := a.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

// topicPath is a topic's REST path: /admin/v2/persistent/t/ns/name.
func topicPath(t pulsarwire.Topic) string {
	domain := "persistent"
	if !t.Persistent {
		domain = "non-persistent"
	}
	return "/admin/v2/" + domain + "/" + url.PathEscape(t.Tenant) + "/" + url.PathEscape(t.Namespace) + "/" + url.PathEscape(t.Local)
}

// partitionCount is the topic's partition count, 0 when not partitioned.
func (a *adminClient) partitionCount(ctx context.Context, t pulsarwire.Topic) (int, error) {
	var md struct {
		Partitions int `json:"partitions"`
	}
	if err := a.get(ctx, topicPath(t)+"/partitions", &md); err != nil {
		return 0, err
	}
	return md.Partitions, nil
}

func mustTopic(s string) pulsarwire.Topic {
	t, _ := pulsarwire.ParseTopic(s) // checked by the subcommand's check
	return t
}

func printResult(w io.Writer, f *topicsFlags, text string, v any) error {
	if f.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	_, err := fmt.Fprintln(w, text)
	return err
}

// printRaw prints a server's JSON answer, indented, for --output json.
func printRaw(w io.Writer, b []byte) error {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

func runList(ctx context.Context, a *adminClient, f *topicsFlags, args []string, w io.Writer) error {
	ns := "public/default"
	if len(args) == 1 {
		ns = args[0]
	}
	var plain, parted []string
	if err := a.get(ctx, "/admin/v2/persistent/"+ns, &plain); err != nil {
		return err
	}
	if err := a.get(ctx, "/admin/v2/persistent/"+ns+"/partitioned", &parted); err != nil {
		return err
	}
	// A partitioned topic is listed once, not with its partitions.
	var out []string
	for _, t := range plain {
		if pt, err := pulsarwire.ParseTopic(t); err == nil {
			if i, base := pt.PartitionIndex(); i >= 0 && slices.Contains(parted, base.String()) {
				continue
			}
		}
		out = append(out, t)
	}
	out = append(out, parted...)
	slices.Sort(out)
	out = slices.Compact(out)
	if out == nil {
		out = []string{}
	}
	if f.output == "json" {
		return printResult(w, f, "", out)
	}
	for _, t := range out {
		fmt.Fprintln(w, t)
	}
	return nil
}

func runCreate(ctx context.Context, a *adminClient, f *topicsFlags, args []string, w io.Writer) error {
	t := mustTopic(args[0])
	var err error
	if f.partitions > 0 {
		_, err = a.do(ctx, http.MethodPut, topicPath(t)+"/partitions", f.partitions)
	} else {
		_, err = a.do(ctx, http.MethodPut, topicPath(t), nil)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", t, err)
	}
	text := "created " + t.String()
	if f.partitions > 0 {
		text += " with " + plural(int64(f.partitions), "partition")
	}
	return printResult(w, f, text, map[string]any{"created": t.String(), "partitions": f.partitions})
}

func runDelete(ctx context.Context, a *adminClient, f *topicsFlags, args []string, w io.Writer) error {
	t := mustTopic(args[0])
	n, err := a.partitionCount(ctx, t)
	if err != nil {
		return fmt.Errorf("delete %s: %w", t, err)
	}
	path := topicPath(t)
	if n > 0 {
		path += "/partitions"
	}
	if f.force {
		path += "?force=true"
	}
	if _, err := a.do(ctx, http.MethodDelete, path, nil); err != nil {
		return fmt.Errorf("delete %s: %w", t, err)
	}
	return printResult(w, f, "deleted "+t.String(), map[string]any{"deleted": t.String(), "partitions": n})
}

// statsOf fetches a topic's stats: partitioned-stats for a partitioned one.
func (a *adminClient) statsOf(ctx context.Context, t pulsarwire.Topic) ([]byte, error) {
	n, err := a.partitionCount(ctx, t)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		return a.do(ctx, http.MethodGet, topicPath(t)+"/partitioned-stats", nil)
	}
	return a.do(ctx, http.MethodGet, topicPath(t)+"/stats", nil)
}

// topicStatsView is what the text output shows of the stats; the field
// names are Apache Pulsar's.
type topicStatsView struct {
	MsgRateIn        float64 `json:"msgRateIn"`
	MsgThroughputIn  float64 `json:"msgThroughputIn"`
	MsgRateOut       float64 `json:"msgRateOut"`
	MsgThroughputOut float64 `json:"msgThroughputOut"`
	MsgInCounter     int64   `json:"msgInCounter"`
	BytesInCounter   int64   `json:"bytesInCounter"`
	MsgOutCounter    int64   `json:"msgOutCounter"`
	BytesOutCounter  int64   `json:"bytesOutCounter"`
	StorageSize      int64   `json:"storageSize"`
	Publishers       []struct {
		ProducerName string  `json:"producerName"`
		MsgRateIn    float64 `json:"msgRateIn"`
		Address      string  `json:"address"`
	} `json:"publishers"`
	Subscriptions map[string]struct {
		Type            string  `json:"type"`
		MsgBacklog      int64   `json:"msgBacklog"`
		UnackedMessages int64   `json:"unackedMessages"`
		MsgOutCounter   int64   `json:"msgOutCounter"`
		MsgRateOut      float64 `json:"msgRateOut"`
		Consumers       []any   `json:"consumers"`
	} `json:"subscriptions"`
}

func runStats(ctx context.Context, a *adminClient, f *topicsFlags, args []string, w io.Writer) error {
	t := mustTopic(args[0])
	b, err := a.statsOf(ctx, t)
	if err != nil {
		return fmt.Errorf("stats of %s: %w", t, err)
	}
	if f.output == "json" {
		return printRaw(w, b)
	}
	var st topicStatsView
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("stats of %s: %w", t, err)
	}
	fmt.Fprintf(w, "%s\n", t)
	fmt.Fprintf(w, "  in:  %s, %d bytes (%.1f msg/s, %.0f B/s)\n", plural(st.MsgInCounter, "message"), st.BytesInCounter, st.MsgRateIn, st.MsgThroughputIn)
	fmt.Fprintf(w, "  out: %s, %d bytes (%.1f msg/s, %.0f B/s)\n", plural(st.MsgOutCounter, "message"), st.BytesOutCounter, st.MsgRateOut, st.MsgThroughputOut)
	fmt.Fprintf(w, "  storage: %d bytes\n", st.StorageSize)
	fmt.Fprintf(w, "  publishers: %d\n", len(st.Publishers))
	for _, p := range st.Publishers {
		fmt.Fprintf(w, "    %s from %s (%.1f msg/s)\n", p.ProducerName, p.Address, p.MsgRateIn)
	}
	fmt.Fprintf(w, "  subscriptions: %d\n", len(st.Subscriptions))
	names := slices.Sorted(mapsKeys(st.Subscriptions))
	for _, n := range names {
		s := st.Subscriptions[n]
		fmt.Fprintf(w, "    %s (%s): backlog %s, unacked %s, out %s (%.1f msg/s), %s\n", n, s.Type,
			plural(s.MsgBacklog, "entry"), plural(s.UnackedMessages, "message"), plural(s.MsgOutCounter, "message"), s.MsgRateOut, plural(int64(len(s.Consumers)), "consumer"))
	}
	return nil
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func runInternalStats(ctx context.Context, a *adminClient, f *topicsFlags, args []string, w io.Writer) error {
	t := mustTopic(args[0])
	b, err := a.do(ctx, http.MethodGet, topicPath(t)+"/internalStats", nil)
	if err != nil {
		return fmt.Errorf("internal stats of %s: %w", t, err)
	}
	if f.output == "json" {
		return printRaw(w, b)
	}
	var st struct {
		NumberOfEntries    int64  `json:"numberOfEntries"`
		TotalSize          int64  `json:"totalSize"`
		LastConfirmedEntry string `json:"lastConfirmedEntry"`
		Cursors            map[string]struct {
			MarkDeletePosition  string `json:"markDeletePosition"`
			ReadPosition        string `json:"readPosition"`
			IndividuallyDeleted string `json:"individuallyDeletedMessages"`
		} `json:"cursors"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("internal stats of %s: %w", t, err)
	}
	fmt.Fprintf(w, "%s: %s, %d bytes, last %s\n", t, plural(st.NumberOfEntries, "entry"), st.TotalSize, st.LastConfirmedEntry)
	for _, n := range slices.Sorted(mapsKeys(st.Cursors)) {
		c := st.Cursors[n]
		fmt.Fprintf(w, "  %s: mark-delete %s, read %s, acknowledged past it %s\n", n, c.MarkDeletePosition, c.ReadPosition, c.IndividuallyDeleted)
	}
	return nil
}

func runSubscriptions(ctx context.Context, a *adminClient, f *topicsFlags, args []string, w io.Writer) error {
	t := mustTopic(args[0])
	var subs []string
	if err := a.get(ctx, topicPath(t)+"/subscriptions", &subs); err != nil {
		return fmt.Errorf("subscriptions of %s: %w", t, err)
	}
	slices.Sort(subs)
	if subs == nil {
		subs = []string{}
	}
	if f.output == "json" {
		return printResult(w, f, "", subs)
	}
	for _, s := range subs {
		fmt.Fprintln(w, s)
	}
	return nil
}

// backlogRow is one subscription's line of `topics backlog`.
type backlogRow struct {
	Subscription string `json:"subscription"`
	Type         string `json:"type"`
	Backlog      int64  `json:"msgBacklog"`
	Unacked      int64  `json:"unackedMessages"`
	Consumers    int    `json:"consumers"`
}

func runBacklog(ctx context.Context, a *adminClient, f *topicsFlags, args []string, w io.Writer) error {
	t := mustTopic(args[0])
	b, err := a.statsOf(ctx, t)
	if err != nil {
		return fmt.Errorf("backlog of %s: %w", t, err)
	}
	var st topicStatsView
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("backlog of %s: %w", t, err)
	}
	rows := []backlogRow{}
	for _, n := range slices.Sorted(mapsKeys(st.Subscriptions)) {
		s := st.Subscriptions[n]
		rows = append(rows, backlogRow{n, s.Type, s.MsgBacklog, s.UnackedMessages, len(s.Consumers)})
	}
	if f.output == "json" {
		return printResult(w, f, "", rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SUBSCRIPTION\tTYPE\tBACKLOG (ENTRIES)\tUNACKED\tCONSUMERS")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", r.Subscription, r.Type, r.Backlog, r.Unacked, r.Consumers)
	}
	return tw.Flush()
}

// resetTarget is where reset-cursor moves a subscription: a time (ms
// since the epoch; earliest is 0) or a message id; latest is its own.
type resetTarget struct {
	latest bool
	timeMs int64
	id     *pulsarwire.MessageID
}

// parseResetTarget reads --to: earliest, latest, RFC 3339, a duration ago,
// or ledger:entry[:partition].
func parseResetTarget(s string, now time.Time) (resetTarget, error) {
	switch strings.ToLower(s) {
	case "earliest":
		return resetTarget{timeMs: 0}, nil
	case "latest":
		return resetTarget{latest: true}, nil
	}
	if tm, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return resetTarget{timeMs: tm.UnixMilli()}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return resetTarget{timeMs: now.Add(-d).UnixMilli()}, nil
	}
	if id, err := pulsarwire.ParseMessageID(s); err == nil {
		return resetTarget{id: &id}, nil
	}
	return resetTarget{}, usagef("--to %q: want earliest, latest, an RFC 3339 time, a duration ago (10m) or a message id ledger:entry:partition[:batch]", s)
}

func runReset(ctx context.Context, a *adminClient, f *topicsFlags, args []string, w io.Writer) error {
	t := mustTopic(args[0])
	to, _ := parseResetTarget(f.to, time.Now())
	sub := topicPath(t) + "/subscription/" + url.PathEscape(f.subscription)
	var err error
	switch {
	case to.latest:
		// Everything published so far counts as acknowledged.
		_, err = a.do(ctx, http.MethodPost, sub+"/skip_all", nil)
	case to.id != nil:
		_, err = a.do(ctx, http.MethodPost, sub+"/resetcursor", map[string]any{
			"ledgerId": int64(to.id.Ledger), "entryId": int64(to.id.Entry), "partitionIndex": to.id.Partition,
		})
	default:
		_, err = a.do(ctx, http.MethodPost, sub+"/resetcursor/"+strconv.FormatInt(to.timeMs, 10), nil)
	}
	if err != nil {
		return fmt.Errorf("reset %s on %s: %w", f.subscription, t, err)
	}
	return printResult(w, f, fmt.Sprintf("reset %s on %s to %s", f.subscription, t, f.to),
		map[string]any{"topic": t.String(), "subscription": f.subscription, "to": f.to})
}
