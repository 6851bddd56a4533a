package broker

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// producerAccess is a topic's side of the producer access modes, as
// Apache Pulsar 4.0.8 answers them (checked against it by
// TestProducerAccessModes): one exclusive producer at a time, producers
// waiting for it to leave, and the topic epoch. Every exclusive producer
// that takes the topic without naming an epoch moves the epoch on; one
// that reconnects names the epoch it was given, and is fenced when the
// epoch moved meanwhile, which is how a producer that lost its
// connection learns that another took the topic from it. Guarded by
// topic.mu.
type producerAccess struct {
	epoch     int64     // -1: no exclusive producer ever took the topic
	exclusive *producer // the producer holding the topic exclusively
	waiting   []*producer
}

// epochKey prefixes the meta key of a topic's epoch: like Apache Pulsar,
// which keeps it in the managed ledger's properties, a restart must not
// forget it, or a producer fenced before the restart would come back.
const epochKey = "epoch/"

func (c *Cluster) loadEpoch(name string) (int64, error) {
	v, ok, err := c.store.GetMeta(epochKey + name)
	if err != nil || !ok {
		return -1, err
	}
	e, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return -1, fmt.Errorf("topic %s: stored epoch %q: %w", name, v, err)
	}
	return e, nil
}

// admitted is what addProducer decided beside an error.
type admitted struct {
	epoch  int64       // the topic epoch to answer with, -1 for none
	queued bool        // WaitForExclusive: the producer waits its turn
	fenced []*producer // producers ExclusiveWithFencing took the topic from
	failed []*producer // waiting producers it failed
}

func fencedError(format string, a ...any) error {
	return pulsarwire.NewServerError(pb.ServerError_ProducerFenced,
		"org.apache.pulsar.broker.service.BrokerServiceException$ProducerFencedException: "+fmt.Sprintf(format, a...))
}

func busyError(format string, a ...any) error {
	return pulsarwire.NewServerError(pb.ServerError_ProducerBusy,
		"org.apache.pulsar.broker.service.BrokerServiceException$ProducerBusyException: "+fmt.Sprintf(format, a...))
}

// admit applies p's access mode; t.mu held. want is the epoch p names
// (-1: none).
func (t *topic) admit(p *producer, want int64) (admitted, error) {
	a := &t.access
	exclusiveName := "null"
	if a.exclusive != nil {
		exclusiveName = a.exclusive.name
	}
	held := a.exclusive != nil || len(a.waiting) > 0
	stale := func() error {
		if want >= 0 && want < a.epoch {
			return fencedError("Topic epoch has already moved. Current epoch: %d, Producer epoch: %d", a.epoch, want)
		}
		return nil
	}
	switch p.access {
	case pb.ProducerAccessMode_Shared:
		if held {
			return admitted{}, busyError("Topic has an existing exclusive producer: %s", exclusiveName)
		}
		return admitted{epoch: a.epoch}, nil
	case pb.ProducerAccessMode_Exclusive:
		if held {
			return admitted{}, fencedError("Topic has an existing exclusive producer: %s", exclusiveName)
		}
		if len(t.producers) > 0 {
			return admitted{}, fencedError("Topic has existing shared producers")
		}
		if err := stale(); err != nil {
			return admitted{}, err
		}
	case pb.ProducerAccessMode_ExclusiveWithFencing:
		var r admitted
		if a.exclusive != nil || len(t.producers) > 0 {
			// Apache Pulsar closes the fenced producers without telling
			// their clients: a client learns it when its next SEND closes
			// the connection and its reconnect, naming the old epoch, is
			// refused.
			r.failed, a.waiting = a.waiting, nil
			for o := range t.producers {
				r.fenced = append(r.fenced, o)
				delete(t.producers, o)
			}
			a.exclusive = nil
		}
		if err := stale(); err != nil {
			return r, err
		}
		e, err := t.takeExclusive(p, want)
		r.epoch = e
		return r, err
	case pb.ProducerAccessMode_WaitForExclusive:
		if a.exclusive != nil || len(t.producers) > 0 {
			p.wantEpoch = want
			a.waiting = append(a.waiting, p)
			return admitted{epoch: -1, queued: true}, nil
		}
		if err := stale(); err != nil {
			return admitted{}, err
		}
	default:
		return admitted{}, pulsarwire.NewServerError(pb.ServerError_UnknownError,
			"org.apache.pulsar.broker.service.BrokerServiceException: Invalid producer access mode: "+p.access.String())
	}
	e, err := t.takeExclusive(p, want)
	return admitted{epoch: e}, err
}

// takeExclusive makes p the exclusive producer at epoch want, or at the
// next epoch when it names none; t.mu held.
func (t *topic) takeExclusive(p *producer, want int64) (int64, error) {
	e := want
	if e < 0 {
		e = t.access.epoch + 1
	}
	if e != t.access.epoch {
		if err := t.c.store.PutMeta(epochKey+t.name, []byte(strconv.FormatInt(e, 10))); err != nil {
			return -1, err
		}
		t.access.epoch = e
	}
	t.access.exclusive = p
	return e, nil
}

// leave takes p out of the access state once it left the producers;
// t.mu held. It returns the waiting producer whose turn came, if any,
// with its epoch or the error that kept it from the topic.
func (t *topic) leave(p *producer) (next *producer, epoch int64, err error) {
	a := &t.access
	if i := slices.Index(a.waiting, p); i >= 0 {
		a.waiting = slices.Delete(a.waiting, i, i+1)
		return nil, -1, nil
	}
	if a.exclusive == p {
		a.exclusive = nil
	}
	if t.unloaded || a.exclusive != nil || len(t.producers) > 0 || len(a.waiting) == 0 {
		return nil, -1, nil
	}
	next = a.waiting[0]
	a.waiting = a.waiting[1:]
	if epoch, err = t.takeExclusive(next, next.wantEpoch); err != nil {
		return next, -1, err
	}
	t.producers[next] = struct{}{}
	return next, epoch, nil
}

// promoted tells a waiting producer whose turn came (leave) that it
// holds the topic, or why it could not take it.
func promoted(next *producer, epoch int64, err error) {
	if next == nil {
		return
	}
	if err != nil {
		next.fenceOut()
		next.conn.sendError(next.rid, errorCode(err), errorText(err))
		return
	}
	next.ready.Store(true)
	next.conn.send(producerSuccess(next.rid, next.name, next.version, epoch, true))
}

// fenceOut forgets a producer that ExclusiveWithFencing took the topic
// from, on its connection too, without marking it closed by the broker:
// its client's next SEND closes the connection, as on Apache Pulsar.
func (p *producer) fenceOut() {
	p.closed.Store(true)
	cn := p.conn
	cn.mu.Lock()
	if cn.producers[p.id] == p {
		delete(cn.producers, p.id)
	}
	cn.mu.Unlock()
}

// failWaiting answers a waiting producer's PRODUCER with the refusal that
// fenced it, and forgets it as fenceOut does.
func (p *producer) failWaiting() {
	p.fenceOut()
	p.conn.sendError(p.rid, pb.ServerError_ProducerFenced,
		"org.apache.pulsar.broker.service.BrokerServiceException$ProducerFencedException: Fenced out")
}
