package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The admin REST API: the subset of Apache Pulsar's /admin/v2 that
// pulsar-admin needs for the basics (clusters, tenants, namespaces, topics
// and partitioned topics, subscriptions, stats), JSON shaped like Pulsar's,
// errors as {"reason": "..."} with Pulsar's status codes.

type httpError struct {
	code   int
	reason string
}

func (e *httpError) Error() string { return e.reason }

func herr(code int, format string, args ...any) error {
	return &httpError{code, fmt.Sprintf(format, args...)}
}

// adminAPI serves the admin REST API. It embeds the cluster whose state
// its handlers read and change, so that they are not methods of Cluster:
// the handlers live in admin_*.go, one file per resource.
type adminAPI struct{ *Cluster }

type adminFunc func(w http.ResponseWriter, r *http.Request) (any, error)

func (c adminAPI) adminHandler() http.Handler {
	mux := http.NewServeMux()
	h := func(pattern string, f adminFunc) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if !c.adminAuth(w, r) {
				return
			}
			c.log.Debug("admin request", "method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery)
			v, err := f(w, r)
			if err != nil {
				var he *httpError
				if !errors.As(err, &he) {
					he = &httpError{http.StatusInternalServerError, err.Error()}
				}
				c.log.Debug("admin request failed", "method", r.Method, "path", r.URL.Path, "status", he.code, "reason", he.reason)
				writeJSON(w, he.code, map[string]string{"reason": he.reason})
				return
			}
			if v == nil {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			writeJSON(w, http.StatusOK, v)
		})
	}
	const tp = "/admin/v2/persistent/{tenant}/{ns}/{topic}"
	h("GET /admin/v2/clusters", func(http.ResponseWriter, *http.Request) (any, error) {
		return []string{c.opts.ClusterName}, nil
	})
	h("GET /admin/v2/clusters/{cluster}", c.adminCluster)
	h("GET /admin/v2/brokers/health", func(w http.ResponseWriter, _ *http.Request) (any, error) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "ok")
		return struct{}{}, errWritten
	})
	h("GET /admin/v2/brokers/configuration/runtime", func(http.ResponseWriter, *http.Request) (any, error) {
		return map[string]string{
			"clusterName":                c.opts.ClusterName,
			"maxMessageSize":             strconv.Itoa(c.opts.MaxMessageSize),
			"allowAutoTopicCreation":     strconv.FormatBool(!c.opts.DisableTopicAutoCreation),
			"allowAutoTopicCreationType": "non-partitioned",
		}, nil
	})
	h("GET /admin/v2/brokers/{cluster}", func(http.ResponseWriter, *http.Request) (any, error) {
		var out []string
		for _, u := range c.BrokerURLs() {
			out = append(out, strings.TrimPrefix(u, "pulsar://"))
		}
		return out, nil
	})
	// Non-persistent topics are not served: their lists are empty.
	empty := func(http.ResponseWriter, *http.Request) (any, error) { return []string{}, nil }
	h("GET /admin/v2/non-persistent/{tenant}/{ns}", empty)
	h("GET /admin/v2/non-persistent/{tenant}/{ns}/partitioned", empty)
	h("GET /admin/v2/tenants", c.adminTenants)
	h("GET /admin/v2/tenants/{tenant}", c.adminGetTenant)
	h("PUT /admin/v2/tenants/{tenant}", c.adminPutTenant)
	h("POST /admin/v2/tenants/{tenant}", c.adminPutTenant)
	h("DELETE /admin/v2/tenants/{tenant}", c.adminDeleteTenant)
	h("GET /admin/v2/namespaces/{tenant}", c.adminNamespaces)
	h("GET /admin/v2/namespaces/{tenant}/{ns}", c.adminGetNamespace)
	h("PUT /admin/v2/namespaces/{tenant}/{ns}", c.adminPutNamespace)
	h("DELETE /admin/v2/namespaces/{tenant}/{ns}", c.adminDeleteNamespace)
	h("GET /admin/v2/namespaces/{tenant}/{ns}/topics", c.adminListTopics)
	h("GET /admin/v2/namespaces/{tenant}/{ns}/compactionThreshold", c.adminGetCompactionThreshold)
	h("PUT /admin/v2/namespaces/{tenant}/{ns}/compactionThreshold", c.adminSetCompactionThreshold)
	h("DELETE /admin/v2/namespaces/{tenant}/{ns}/compactionThreshold", c.adminDeleteCompactionThreshold)
	h("GET /admin/v2/namespaces/{tenant}/{ns}/permissions", c.adminGetPermissions)
	h("POST /admin/v2/namespaces/{tenant}/{ns}/permissions/{role}", c.adminGrant)
	h("DELETE /admin/v2/namespaces/{tenant}/{ns}/permissions/{role}", c.adminRevoke)
	h("GET /admin/v2/persistent/{tenant}/{ns}", c.adminListTopics)
	h("GET /admin/v2/persistent/{tenant}/{ns}/partitioned", c.adminListPartitioned)
	h("PUT "+tp, c.adminCreateTopic)
	h("DELETE "+tp, c.adminDeleteTopic)
	h("GET "+tp+"/partitions", c.adminGetPartitions)
	h("PUT "+tp+"/partitions", c.adminCreatePartitioned)
	h("POST "+tp+"/partitions", c.adminUpdatePartitions)
	h("DELETE "+tp+"/partitions", c.adminDeletePartitioned)
	h("GET "+tp+"/subscriptions", c.adminSubscriptions)
	h("PUT "+tp+"/subscription/{sub}", c.adminCreateSubscription)
	h("DELETE "+tp+"/subscription/{sub}", c.adminDeleteSubscription)
	h("POST "+tp+"/subscription/{sub}/skip_all", c.adminClearBacklog)
	h("POST "+tp+"/subscription/{sub}/resetcursor/{timestamp}", c.adminResetCursor)
	h("POST "+tp+"/subscription/{sub}/resetcursor", c.adminResetCursorToID)
	h("PUT "+tp+"/unload", c.adminUnload)
	h("GET "+tp+"/stats", c.adminStats)
	h("GET "+tp+"/partitioned-stats", c.adminPartitionedStats)
	h("GET "+tp+"/internalStats", c.adminInternalStats)
	h("PUT "+tp+"/compaction", c.adminCompact)
	h("GET "+tp+"/compaction", c.adminCompactionStatus)
	h("GET /lookup/v2/topic/persistent/{tenant}/{ns}/{topic}", c.adminLookup)
	c.transactionRoutes(h)
	c.adminRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"reason": "Not supported by the streamrun broker: " + r.Method + " " + r.URL.Path})
	})
	return limitBody(mux)
}

// errWritten: the handler wrote its own response.
var errWritten = &httpError{0, ""}

func writeJSON(w http.ResponseWriter, code int, v any) {
	if code == 0 {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

const (
	tenantKey    = "tenant/"
	namespaceKey = "namespace/"
)

// sortedNames returns m's keys in order, never nil: Pulsar's admin API
// answers an empty list as [], and pulsar-admin does not read null.
func sortedNames[V any](m map[string]V) []string {
	return append([]string{}, slices.Sorted(maps.Keys(m))...)
}
