package campaign_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// faultKind is one kind of fault the campaign injects. inject returns once
// the fault is over (at once for a kill, after a while for a slow
// consumer); recovery is counted from then.
type faultKind struct {
	name string
	// embedded: only against the embedded broker (the fault needs its
	// process or its fault API).
	embedded bool
	// ackWindow: the fault may lose acknowledgements the broker had not
	// saved yet (it stops the broker), so more than what was in flight
	// may come again.
	ackWindow bool
	// fatal: when the injection fails, the campaign ends there (the
	// broker did not come back, so nothing after would tell anything).
	fatal  bool
	inject func(ctx context.Context, e *env) (string, error)
}

var faultKinds = []faultKind{
	{name: "plugin-sigkill", inject: killPlugin},
	{name: "plugin-panic", inject: order("panic")},
	{name: "plugin-hang", inject: order("hang")},
	{name: "plugin-garbage", inject: order("garbage")},
	{name: "slow-consumer", inject: slowConsumer},
	{name: "host-kill-9", inject: killHost},
	{name: "host-sigstop", inject: stopHost},
	{name: "topic-unload", inject: unloadTopic},
	{name: "connections-dropped", embedded: true, inject: dropConnections},
	{name: "connection-dropped-at-ack", embedded: true, inject: dropAtAck},
	{name: "broker-kill-9", embedded: true, ackWindow: true, inject: killBroker},
	{name: "service-not-ready", embedded: true, inject: answerFor("ServiceNotReady")},
	{name: "too-many-requests", embedded: true, inject: answerFor("TooManyRequests")},
	{name: "lookup-to-down-broker", embedded: true, ackWindow: true, inject: brokerDown},
}

// killPlugin sends SIGKILL to one plugin process of a running host.
func killPlugin(_ context.Context, e *env) (string, error) {
	var pids []int
	for _, h := range e.hosts {
		pids = append(pids, children(h.pid())...)
	}
	if len(pids) == 0 {
		return "", fmt.Errorf("no plugin process to kill")
	}
	pid := pids[e.rng.IntN(len(pids))]
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return "", fmt.Errorf("kill plugin %d: %w", pid, err)
	}
	return fmt.Sprintf("pid %d", pid), nil
}

// order drops a one-shot order for the chaos handler of a random pipeline
// and waits until a batch took it.
func order(what string) func(context.Context, *env) (string, error) {
	return func(ctx context.Context, e *env) (string, error) {
		p := e.pipes[e.rng.IntN(len(e.pipes))]
		f := filepath.Join(e.control, what+"."+p.name)
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			return "", err
		}
		for deadline := time.Now().Add(time.Minute); ; {
			if _, err := os.Stat(f); os.IsNotExist(err) {
				return p.name, nil
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				os.Remove(f)
				return "", fmt.Errorf("no batch of %s took the %s order within 1m", p.name, what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// slowConsumer makes every pipeline's handler slow for e.slowFor while a
// burst of e.burst messages of burstSize bytes per pipeline lands on top
// of the steady load: the backlog grows on the broker, and the hosts must
// hold no more than their in-flight limit. Recovery is the backlog
// drained.
func slowConsumer(ctx context.Context, e *env) (string, error) {
	for _, p := range e.pipes {
		if err := os.WriteFile(filepath.Join(e.control, "slow."+p.name), nil, 0o644); err != nil {
			return "", err
		}
	}
	var wg sync.WaitGroup
	for _, p := range e.pipes {
		wg.Add(1)
		go func() { defer wg.Done(); p.burst(ctx, e.client, e.burst, burstSize) }()
	}
	sleepCtx(ctx, e.slowFor)
	wg.Wait()
	for _, p := range e.pipes {
		os.Remove(filepath.Join(e.control, "slow."+p.name))
	}
	return fmt.Sprintf("all pipelines for %s, %d×%d B burst each", e.slowFor, e.burst, burstSize), nil
}

// rankAim orders the Exclusive pipelines whose holder killHost aims at.
func rankAim(p *pipe) int {
	switch {
	case p.win != nil:
		return 0
	case p.exactly:
		return 1
	}
	return 2
}

// killHost is kill -9 of one host process: the other host on the same
// subscriptions must finish its work (an Exclusive consumer waiting takes
// over). It is started again once the campaign saw recovery.
//
// Every other time, the first included, it kills the host whose consumer
// holds an Exclusive subscription, so that the waiting one must take over:
// that of each Exclusive pipeline in turn (eo-window's and eo-counter's,
// whose windows and keyed state the other host must read back, then the
// exclusive one's).
func killHost(_ context.Context, e *env) (string, error) {
	h := e.hosts[e.rng.IntN(len(e.hosts))]
	why := ""
	var excl []*pipe
	for _, p := range e.pipes {
		if p.typ == "exclusive" {
			excl = append(excl, p)
		}
	}
	// The exactly_once ones first, the window pipeline first of them: a
	// short run kills a host two or three times.
	slices.SortStableFunc(excl, func(a, b *pipe) int { return rankAim(a) - rankAim(b) })
	if e.hostKills%2 == 0 && len(excl) > 0 {
		p := excl[e.hostKills/2%len(excl)]
		why = fmt.Sprintf(" (the holder of %s's Exclusive subscription not found)", p.name)
		if x := e.exclusiveHolder(p); x != nil {
			h, why = x, fmt.Sprintf(" (held the Exclusive subscription of %s)", p.name)
		}
	}
	e.hostKills++
	if err := h.signal(syscall.SIGKILL); err != nil {
		return "", err
	}
	e.restart = append(e.restart, h)
	return h.name + why, nil
}

// stopHost stops a host with SIGSTOP for longer than the exactly_once
// pipelines' transaction timeout, then lets it go on (SIGCONT): the
// broker aborts its open transactions meanwhile, and the host finds out
// at its next commit.
func stopHost(ctx context.Context, e *env) (string, error) {
	h := e.hosts[e.rng.IntN(len(e.hosts))]
	pid := h.pid()
	if pid <= 0 {
		return "", fmt.Errorf("%s is not running", h.name)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return "", err
	}
	sleepCtx(ctx, txnTimeout+2*time.Second)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s stopped for %s", h.name, txnTimeout+2*time.Second), nil
}

// exclusiveHolder is the host whose consumer is the Exclusive pipeline
// p's (nil when not found): the broker's stats give the consumer's
// address, the host is the process holding that socket.
func (e *env) exclusiveHolder(p *pipe) *proc {
	var st struct {
		Subscriptions map[string]struct {
			Consumers []struct {
				Address string `json:"address"`
			} `json:"consumers"`
		} `json:"subscriptions"`
	}
	if err := e.admin(http.MethodGet, "/admin/v2/persistent/"+strings.TrimPrefix(p.in, "persistent://")+"/stats", &st); err != nil {
		return nil
	}
	for _, c := range st.Subscriptions["campaign"].Consumers {
		_, port, _ := strings.Cut(strings.TrimPrefix(c.Address, "/"), ":")
		n, err := strconv.Atoi(port)
		if err != nil {
			continue
		}
		var pids []int
		for _, h := range e.hosts {
			pids = append(pids, h.pid())
		}
		pid := ownerOfPort(n, pids)
		for _, h := range e.hosts {
			if pid != 0 && h.pid() == pid {
				return h
			}
		}
	}
	return nil
}

// unloadTopic unloads one input or output topic (a partition of a
// partitioned one); on the embedded broker it also moves it to another
// broker, as an unload with a destination broker does.
func unloadTopic(_ context.Context, e *env) (string, error) {
	p := e.pipes[e.rng.IntN(len(e.pipes))]
	topic := p.out
	if e.rng.IntN(2) == 0 {
		topic = p.in
		if p.partitions > 0 {
			topic = fmt.Sprintf("%s-partition-%d", p.in, e.rng.IntN(p.partitions))
		}
	}
	short := strings.TrimPrefix(topic, "persistent://")
	q := ""
	detail := topic
	if e.broker != nil {
		var look struct {
			BrokerURL string `json:"brokerUrl"`
		}
		if err := e.admin(http.MethodGet, "/lookup/v2/topic/persistent/"+short, &look); err != nil {
			return "", err
		}
		from := -1
		for i, u := range e.brokerURLs {
			if u == look.BrokerURL {
				from = i
			}
		}
		to := (from + 1 + e.rng.IntN(len(e.brokerURLs)-1)) % len(e.brokerURLs)
		q = "?destinationBroker=" + strconv.Itoa(to)
		detail += fmt.Sprintf(" broker %d → %d", from, to)
	}
	return detail, e.admin(http.MethodPut, "/admin/v2/persistent/"+short+"/unload"+q, nil)
}

// dropConnections closes every client connection of every broker.
func dropConnections(_ context.Context, e *env) (string, error) {
	return "all brokers", e.admin(http.MethodPost, "/admin/v2/streamrun/brokers/-1/drop-connections", nil)
}

// dropAtAck closes the connection of the next ACK the brokers receive
// instead of handling it: the acknowledgements on their way are lost with
// it, so their messages come again.
func dropAtAck(ctx context.Context, e *env) (string, error) {
	var r struct{ ID int }
	if err := e.adminBody(http.MethodPost, "/admin/v2/streamrun/faults", `{"command":"ACK","drop":true,"count":1}`, &r); err != nil {
		return "", err
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		var fired map[string]int
		if err := e.admin(http.MethodGet, "/admin/v2/streamrun/faults", &fired); err != nil {
			return "", err
		}
		if fired[strconv.Itoa(r.ID)] >= 1 {
			_ = e.admin(http.MethodDelete, fmt.Sprintf("/admin/v2/streamrun/faults/%d", r.ID), nil)
			return "one connection", nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = e.admin(http.MethodDelete, fmt.Sprintf("/admin/v2/streamrun/faults/%d", r.ID), nil)
			return "", fmt.Errorf("no ACK reached the brokers within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killBroker is kill -9 of the broker process and its restart on the same
// ports and --data directory.
func killBroker(_ context.Context, e *env) (string, error) {
	if err := e.broker.signal(syscall.SIGKILL); err != nil {
		return "", err
	}
	return "restarted with --data", e.broker.start("streamrun broker ready")
}

// answerFor has the broker answer lookups, metadata, producers and
// subscriptions with code for e.answerFor, after dropping every connection
// so that the clients must come back through it.
func answerFor(code string) func(context.Context, *env) (string, error) {
	return func(ctx context.Context, e *env) (string, error) {
		var ids []int
		defer func() {
			for _, id := range ids {
				_ = e.admin(http.MethodDelete, fmt.Sprintf("/admin/v2/streamrun/faults/%d", id), nil)
			}
		}()
		for _, cmd := range []string{"LOOKUP", "PARTITIONED_METADATA", "PRODUCER", "SUBSCRIBE"} {
			var r struct{ ID int }
			body := fmt.Sprintf(`{"command":%q,"error":%q,"message":"campaign: %s for a while"}`, cmd, code, code)
			if err := e.adminBody(http.MethodPost, "/admin/v2/streamrun/faults", body, &r); err != nil {
				return "", err
			}
			ids = append(ids, r.ID)
		}
		if err := e.admin(http.MethodPost, "/admin/v2/streamrun/brokers/-1/drop-connections", nil); err != nil {
			return "", err
		}
		sleepCtx(ctx, e.answerFor)
		return fmt.Sprintf("%s for %s", code, e.answerFor), nil
	}
}

// brokerDown stops one broker of the process for e.answerFor: lookups
// still redirect its topics to it, so clients are sent to a broker that is
// down until it is back.
func brokerDown(_ context.Context, e *env) (string, error) {
	i := 1 + e.rng.IntN(len(e.brokerURLs)-1) // broker 0 is the service URL: keep lookups answering
	path := fmt.Sprintf("/admin/v2/streamrun/brokers/%d/restart?down=%s", i, e.answerFor)
	return fmt.Sprintf("broker %d down for %s", i, e.answerFor), e.admin(http.MethodPost, path, nil)
}

// admin calls the admin REST API, decoding a JSON answer into out.
func (e *env) admin(method, path string, out any) error {
	return e.adminBody(method, path, "", out)
}

func (e *env) adminBody(method, path, body string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.adminURL+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil && len(b) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}
