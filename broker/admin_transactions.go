package broker

import (
	"net/http"
	"strconv"
	"time"

	"github.com/streamrun/streamrun/pulsarwire"
)

// The admin API's transaction endpoints a user reaches for first, as
// Apache Pulsar 4.0.8 answers them under /admin/v3/transactions: the
// coordinators, their stats, a transaction's metadata, the slow ones.
// With transactions off every one answers 503, in Pulsar's words.

func (c adminAPI) transactionRoutes(h func(string, adminFunc)) {
	const base = "/admin/v3/transactions"
	h("GET "+base+"/coordinators", c.adminTxnCoordinators)
	h("GET "+base+"/coordinatorStats", c.adminTxnCoordinatorStats)
	h("GET "+base+"/transactionMetadata/{most}/{least}", c.adminTxnMetadata)
	h("GET "+base+"/slowTransactions/{timeout}", c.adminSlowTxns)
}

// txnsOn refuses when transactions are off.
func (c adminAPI) txnsOn() error {
	if c.txns == nil {
		return herr(http.StatusServiceUnavailable, "This Broker is not configured with transactionCoordinatorEnabled=true.")
	}
	return nil
}

// txnCoordinatorInfo is one coordinator in the list.
type txnCoordinatorInfo struct {
	ID               int    `json:"id"`
	BrokerServiceURL string `json:"brokerServiceUrl"`
}

func (c adminAPI) adminTxnCoordinators(http.ResponseWriter, *http.Request) (any, error) {
	if err := c.txnsOn(); err != nil {
		return nil, err
	}
	owner := c.broker(c.OwnerOf(txnCoordinatorPartition(txnCoordinatorID)))
	return []txnCoordinatorInfo{{ID: txnCoordinatorID, BrokerServiceURL: owner.url()}}, nil
}

// txnCoordinatorStats is Apache Pulsar's TransactionCoordinatorStats.
type txnCoordinatorStats struct {
	State            string `json:"state"`
	LeastSigBits     uint64 `json:"leastSigBits"`
	LowWaterMark     uint64 `json:"lowWaterMark"`
	OngoingTxnSize   int    `json:"ongoingTxnSize"`
	RecoverStartTime int64  `json:"recoverStartTime"`
	RecoverEndTime   int64  `json:"recoverEndTime"`
}

// adminTxnCoordinatorStats answers the stats of every coordinator, by id,
// or of the one ?coordinatorId= names.
func (c adminAPI) adminTxnCoordinatorStats(_ http.ResponseWriter, r *http.Request) (any, error) {
	if err := c.txnsOn(); err != nil {
		return nil, err
	}
	last, low, ongoing := c.txns.stats()
	st := txnCoordinatorStats{State: "Ready", LeastSigBits: last, LowWaterMark: low, OngoingTxnSize: ongoing,
		RecoverStartTime: c.txns.started.UnixMilli(), RecoverEndTime: c.txns.started.UnixMilli()}
	if q := r.URL.Query().Get("coordinatorId"); q != "" {
		if id, err := strconv.Atoi(q); err != nil || id != txnCoordinatorID {
			return nil, herr(http.StatusNotFound, "Transaction coordinator not found! coordinator id : %s", q)
		}
		return st, nil
	}
	return map[string]txnCoordinatorStats{"0": st}, nil
}

func (c adminAPI) adminTxnMetadata(_ http.ResponseWriter, r *http.Request) (any, error) {
	if err := c.txnsOn(); err != nil {
		return nil, err
	}
	most, err1 := strconv.ParseUint(r.PathValue("most"), 10, 64)
	least, err2 := strconv.ParseUint(r.PathValue("least"), 10, 64)
	if err1 != nil || err2 != nil {
		return nil, herr(http.StatusBadRequest, "a transaction id is two numbers: /transactionMetadata/{mostSigBits}/{leastSigBits}, got %s/%s",
			r.PathValue("most"), r.PathValue("least"))
	}
	id := pulsarwire.TxnID{Most: most, Least: least}
	m, ok := c.txns.metadata(id)
	if !ok {
		return nil, herr(http.StatusNotFound, "%s", txnNotFoundMessage(id))
	}
	return m, nil
}

// adminSlowTxns lists the transactions open for longer than {timeout}
// milliseconds, by id.
func (c adminAPI) adminSlowTxns(_ http.ResponseWriter, r *http.Request) (any, error) {
	if err := c.txnsOn(); err != nil {
		return nil, err
	}
	ms, err := strconv.ParseInt(r.PathValue("timeout"), 10, 64)
	if err != nil || ms < 0 {
		return nil, herr(http.StatusBadRequest, "timeout %q: want milliseconds", r.PathValue("timeout"))
	}
	if q := r.URL.Query().Get("coordinatorId"); q != "" && q != strconv.Itoa(txnCoordinatorID) {
		return map[string]txnMetadata{}, nil
	}
	return c.txns.slow(time.Duration(ms) * time.Millisecond), nil
}
