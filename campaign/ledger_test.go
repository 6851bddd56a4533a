package campaign_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamrun/streamrun/pool"
	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/subscribe"
)

// pipe is one pipeline of the campaign and its ledger: every message
// published to its input carries the id "<pipeline>:<seq>" as payload,
// and the ledger follows each seq from publish to receipt to output.
type pipe struct {
	name    string
	typ     string // the pipeline file's source.type
	exactly bool   // guarantee: exactly_once (no duplicate allowed)
	// changelog is the keyed state's topic of a counting pipeline (the
	// chaos handler counts each key's messages); "" for the others.
	changelog string
	// win is the ledger of a window pipeline (windows_test.go): its
	// inputs as the broker stored them, its windows' fires and its late
	// messages; nil for the others.
	win        *winLedger
	partitions int // of the input topic; 0: not partitioned
	in, out    string

	mu      sync.Mutex
	pubAt   []int64 // unix ns of each publish call, by seq
	receipt []uint8 // receiptPending, receiptOK, receiptFailed
	outs    []int32 // distinct output messages seen, by seq
	// inputs are the input messages (by id, propInputID) each seq came
	// out of. A publish whose receipt was lost with its connection is
	// sent again, and a broker without deduplication (the embedded
	// broker; Apache Pulsar unless it is turned on) stores it twice: two
	// inputs of one seq, each rightly put out once. Their outputs beyond
	// the first are copies, counted apart from duplicates.
	inputs    map[int][]string
	copies    int64 // outputs of a second (third...) input of one seq
	dupAt     []time.Time
	outIDs    map[pulsarwire.MessageID]struct{}
	processed int64 // output messages seen, duplicates included
	unknown   []string
	// counted holds, for a counting pipeline, how many distinct output
	// messages carried each count of each key: key → count → outputs.
	counted map[string]map[int]int
	pubErr  string // the first publish error, for the report

	maxSeq atomic.Int64 // highest seq seen at the output; -1 before any
	done   int          // every seq below is settled: out, or its publish failed
	wg     sync.WaitGroup
}

const (
	receiptPending = iota
	receiptOK
	receiptFailed
)

func newPipe(name, typ string, partitions int, in, out string) *pipe {
	p := &pipe{name: name, typ: typ, partitions: partitions, in: in, out: out, outIDs: make(map[pulsarwire.MessageID]struct{}), inputs: map[int][]string{}, counted: map[string]map[int]int{}}
	p.maxSeq.Store(-1)
	return p
}

// next is the seq the next publish gets.
func (p *pipe) next() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int64(len(p.pubAt))
}

// publish sends rate messages a second until ctx ends. A publish that
// blocks (the producer reconnecting) holds the loop; missed ticks are
// skipped, not made up.
func (p *pipe) publish(ctx context.Context, cl *pool.Client, rate int) {
	const tick = 20 * time.Millisecond
	per := max(rate*int(tick)/int(time.Second), 1)
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		for range per {
			p.send(ctx, cl, 0)
		}
	}
}

// burst publishes n messages of about size bytes as fast as the producer
// takes them: a backlog for the slow consumer.
func (p *pipe) burst(ctx context.Context, cl *pool.Client, n, size int) {
	for range n {
		if ctx.Err() != nil {
			return
		}
		p.send(ctx, cl, size)
	}
}

// send publishes the next seq, padded to about size bytes ("name:seq|...").
func (p *pipe) send(ctx context.Context, cl *pool.Client, size int) {
	p.mu.Lock()
	seq := len(p.pubAt)
	p.pubAt = append(p.pubAt, time.Now().UnixNano())
	p.receipt = append(p.receipt, receiptPending)
	p.outs = append(p.outs, 0)
	p.mu.Unlock()
	payload := []byte(p.name + ":" + strconv.Itoa(seq))
	if pad := size - len(payload) - 1; pad > 0 {
		payload = append(append(payload, '|'), bytes.Repeat([]byte{'x'}, pad)...)
	}
	p.wg.Add(1)
	m := pool.Message{Key: keyOf(seq), Payload: payload}
	if p.win != nil {
		m.Key, m.EventTime = winKeyOf(seq), time.UnixMilli(eventTimeOf(seq))
	}
	cl.PublishAsync(ctx, p.in, m,
		func(_ pulsarwire.MessageID, err error) {
			p.mu.Lock()
			if err != nil {
				p.receipt[seq] = receiptFailed
				if p.pubErr == "" {
					p.pubErr = err.Error()
				}
			} else {
				p.receipt[seq] = receiptOK
			}
			p.mu.Unlock()
			p.wg.Done()
		})
}

// keys is how many keys the messages of a pipeline spread over.
const keys = 64

// keyOf is the key of the message of seq.
func keyOf(seq int) string { return "k" + strconv.Itoa(seq%keys) }

// record takes one message from the output topic. A redelivery to the
// collector (same message id) is not a duplicate; the same seq from the
// same input message under a new message id is; the same seq from
// another input message is a copy of the publish (inputs).
func (p *pipe) record(m *subscribe.Message, at time.Time) {
	if p.win != nil {
		p.recordWindow(m, at)
		return
	}
	id, rest, _ := strings.Cut(string(m.Payload), "|")
	name, s, ok := strings.Cut(id, ":")
	seq, err := strconv.Atoi(s)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !ok || err != nil || name != p.name || seq < 0 || seq >= len(p.pubAt) {
		if len(p.unknown) < 10 {
			p.unknown = append(p.unknown, fmt.Sprintf("%.60q", m.Payload))
		}
		return
	}
	mid := m.ID
	mid.BatchSize = 0
	if _, dup := p.outIDs[mid]; dup {
		return
	}
	p.outIDs[mid] = struct{}{}
	if p.changelog != "" {
		// "<key>=<count>": the count the handler saw for seq's key.
		k, c, _ := strings.Cut(rest, "=")
		n, err := strconv.Atoi(c)
		if k != keyOf(seq) || err != nil {
			if len(p.unknown) < 10 {
				p.unknown = append(p.unknown, fmt.Sprintf("%.60q (want the count of key %s)", m.Payload, keyOf(seq)))
			}
		} else {
			if p.counted[k] == nil {
				p.counted[k] = map[int]int{}
			}
			p.counted[k][n]++
		}
	}
	p.processed++
	p.outs[seq]++
	in, seen := m.Properties[propInputID], p.inputs[seq]
	switch {
	case len(seen) > 0 && in != "" && !slices.Contains(seen, in):
		p.copies++
		p.inputs[seq] = append(seen, in)
	case len(seen) > 0:
		p.dupAt = append(p.dupAt, at)
	default:
		p.inputs[seq] = []string{in}
	}
	if int64(seq) > p.maxSeq.Load() {
		p.maxSeq.Store(int64(seq))
	}
}

// caughtUp reports whether every seq below want is settled (came out, or
// its publish failed) and one at or above want came out: the pipeline
// repaired what a fault did and carries new messages.
func (p *pipe) caughtUp(want int64) bool {
	if p.maxSeq.Load() < want {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.done < len(p.pubAt) && (p.outs[p.done] > 0 || p.receipt[p.done] == receiptFailed) {
		p.done++
	}
	return int64(p.done) >= want
}

// missing lists receipted seqs with no output yet (at most limit of them)
// and counts them all.
func (p *pipe) missing(limit int) ([]int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	n := 0
	for seq, r := range p.receipt {
		if r == receiptOK && p.outs[seq] == 0 {
			n++
			if len(out) < limit {
				out = append(out, seq)
			}
		}
	}
	return out, n
}

// pipeCounts is a pipeline's line of the ledger.
type pipeCounts struct {
	Pipeline      string `json:"pipeline"`
	Type          string `json:"type"`
	Guarantee     string `json:"guarantee"`
	Partitions    int    `json:"partitions"`
	Published     int    `json:"published"`
	Receipted     int    `json:"receipted"`
	PublishFailed int    `json:"publish_failed"`
	Processed     int64  `json:"processed"`
	Output        int    `json:"output"`
	Duplicated    int64  `json:"duplicated"`
	// InputCopies: outputs of a publish the broker stored twice (its
	// receipt lost, sent again), each of its inputs put out once; not
	// duplicates of the pipeline.
	InputCopies    int64  `json:"input_copies"`
	Lost           int    `json:"lost"`
	UnreceiptedOut int    `json:"unreceipted_output"`
	FirstPubError  string `json:"first_publish_error,omitempty"`
}

func (p *pipe) counts() pipeCounts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := pipeCounts{Pipeline: p.name, Type: p.typ, Guarantee: "at_least_once", Partitions: p.partitions, Published: len(p.pubAt), Processed: p.processed, FirstPubError: p.pubErr}
	if p.exactly {
		c.Guarantee = "exactly_once"
	}
	for seq, r := range p.receipt {
		switch r {
		case receiptOK:
			c.Receipted++
			if p.outs[seq] == 0 {
				c.Lost++
			}
		case receiptFailed:
			c.PublishFailed++
		}
		if p.outs[seq] > 0 {
			c.Output++
			if r != receiptOK {
				c.UnreceiptedOut++
			}
		}
	}
	c.InputCopies = p.copies
	c.Duplicated = c.Processed - int64(c.Output) - p.copies
	if p.win != nil {
		// Processed counts window results; a seq is out once it is in a
		// window or the late topic (windows_test.go).
		c.InputCopies, c.Duplicated = p.win.copies(), p.win.duplicated()
	}
	return c
}

// collect reads p's output topic from its start into the ledger until ctx
// ends.
func (p *pipe) collect(ctx context.Context, cl *pool.Client, errs func(string)) {
	collectTopic(ctx, cl, p.name, p.out, p.record, errs, nil)
}

// collectTopic reads topic from its start on the subscription "ledger"
// and hands each message to record until ctx ends. A consumer that fails
// is replaced: the collector must outlive every fault, or the ledger
// would call messages lost that are not. subscribed, when set, is called
// after each subscribe.
func collectTopic(ctx context.Context, cl *pool.Client, name, topic string, record func(*subscribe.Message, time.Time), errs func(string), subscribed func()) {
	buf := make([]*subscribe.Message, 500)
	for ctx.Err() == nil {
		cons, err := subscribe.New(ctx, cl, subscribe.Options{
			Topics: []string{topic}, Subscription: "ledger", InitialPosition: subscribe.Earliest, ReceiverQueue: 2000,
		})
		if err != nil {
			if ctx.Err() == nil {
				errs(fmt.Sprintf("collector %s: subscribe %s: %v", name, topic, err))
				sleepCtx(ctx, time.Second)
			}
			continue
		}
		if subscribed != nil {
			subscribed()
		}
		for {
			n, err := cons.ReceiveBatch(ctx, buf)
			if err != nil {
				if ctx.Err() == nil {
					errs(fmt.Sprintf("collector %s: receive %s: %v", name, topic, err))
				}
				break
			}
			now := time.Now()
			for _, m := range buf[:n] {
				record(m, now)
				cons.Ack(ctx, m)
			}
		}
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cons.Close(cctx)
		cancel()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
