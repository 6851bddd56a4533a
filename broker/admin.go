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

	"github.com/streamrun/streamrun/pulsarwire"
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

type adminFunc func(w http.ResponseWriter, r *http.Request) (any, error)

func (c *Cluster) adminHandler() http.Handler {
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
	h("GET /lookup/v2/topic/persistent/{tenant}/{ns}/{topic}", c.adminLookup)
	if c.opts.FaultAPI {
		c.faultRoutes(h)
	}
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

func (c *Cluster) adminCluster(_ http.ResponseWriter, r *http.Request) (any, error) {
	if r.PathValue("cluster") != c.opts.ClusterName {
		return nil, herr(http.StatusNotFound, "Cluster does not exist")
	}
	return setURLs("serviceUrl", c.adminURL, "serviceUrlTls", c.adminURLTLS,
		"brokerServiceUrl", c.ServiceURL(), "brokerServiceUrlTls", c.ServiceURLTLS()), nil
}

// setURLs maps names to the URLs that are set: as Apache Pulsar does, a
// listener that is off (the plain ones in TLS-only mode) is left out, not
// answered as "".
func setURLs(kv ...string) map[string]string {
	out := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			out[kv[i]] = kv[i+1]
		}
	}
	return out
}

// ---------------------------------------------------------------- tenants

const (
	tenantKey    = "tenant/"
	namespaceKey = "namespace/"
)

func (c *Cluster) tenantList() []string {
	set := map[string]bool{"public": true, "pulsar": true}
	if ms, err := c.store.ListMeta(tenantKey); err == nil {
		for k := range ms {
			set[strings.TrimPrefix(k, tenantKey)] = true
		}
	}
	for _, ns := range c.namespaceList("") {
		set[strings.SplitN(ns, "/", 2)[0]] = true
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// namespaceList lists "tenant/ns" names: created ones, public/default, and
// those of existing topics.
func (c *Cluster) namespaceList(tenant string) []string {
	set := map[string]bool{"public/default": true}
	if ms, err := c.store.ListMeta(namespaceKey); err == nil {
		for k := range ms {
			set[strings.TrimPrefix(k, namespaceKey)] = true
		}
	}
	add := func(name string) {
		if t, err := pulsarwire.ParseTopic(name); err == nil {
			set[t.NamespaceName()] = true
		}
	}
	for _, n := range c.store.Topics() {
		add(n)
	}
	if ms, err := c.store.ListMeta(partitionsKey); err == nil {
		for k := range ms {
			add(strings.TrimPrefix(k, partitionsKey))
		}
	}
	var out []string
	for ns := range set {
		if tenant == "" || strings.HasPrefix(ns, tenant+"/") {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

func (c *Cluster) adminTenants(http.ResponseWriter, *http.Request) (any, error) {
	return c.tenantList(), nil
}

func (c *Cluster) adminGetTenant(_ http.ResponseWriter, r *http.Request) (any, error) {
	if !slices.Contains(c.tenantList(), r.PathValue("tenant")) {
		return nil, herr(http.StatusNotFound, "Tenant does not exist")
	}
	return map[string]any{"adminRoles": []string{}, "allowedClusters": []string{c.opts.ClusterName}}, nil
}

// tenantInfo is the body of a tenant's PUT or POST, as Pulsar's TenantInfo.
type tenantInfo struct {
	AdminRoles      []string `json:"adminRoles"`
	AllowedClusters []string `json:"allowedClusters"`
}

func (c *Cluster) adminPutTenant(_ http.ResponseWriter, r *http.Request) (any, error) {
	t := r.PathValue("tenant")
	if err := checkName("tenant", t, true); err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(r.Body)
	if err := decodeJSON("tenant info", body, &tenantInfo{}); err != nil {
		return nil, err
	}
	if r.Method == http.MethodPut && slices.Contains(c.tenantList(), t) {
		return nil, herr(http.StatusConflict, "Tenant already exists")
	}
	return nil, c.store.PutMeta(tenantKey+t, []byte("{}"))
}

func (c *Cluster) adminDeleteTenant(_ http.ResponseWriter, r *http.Request) (any, error) {
	t := r.PathValue("tenant")
	if !slices.Contains(c.tenantList(), t) {
		return nil, herr(http.StatusNotFound, "Tenant does not exist")
	}
	if len(c.namespaceList(t)) > 0 && t != "public" {
		return nil, herr(http.StatusConflict, "The tenant still has active namespaces")
	}
	return nil, c.store.DeleteMeta(tenantKey + t)
}

func (c *Cluster) adminNamespaces(_ http.ResponseWriter, r *http.Request) (any, error) {
	t := r.PathValue("tenant")
	if !slices.Contains(c.tenantList(), t) {
		return nil, herr(http.StatusNotFound, "Tenant does not exist")
	}
	out := c.namespaceList(t)
	if out == nil {
		out = []string{}
	}
	return out, nil
}

func nsName(r *http.Request) string { return r.PathValue("tenant") + "/" + r.PathValue("ns") }

func (c *Cluster) adminGetNamespace(_ http.ResponseWriter, r *http.Request) (any, error) {
	if !slices.Contains(c.namespaceList(""), nsName(r)) {
		return nil, herr(http.StatusNotFound, "Namespace does not exist")
	}
	return map[string]any{"replication_clusters": []string{c.opts.ClusterName}, "bundles": map[string]any{"boundaries": []string{"0x00000000", "0xffffffff"}, "numBundles": 1}}, nil
}

func (c *Cluster) adminPutNamespace(_ http.ResponseWriter, r *http.Request) (any, error) {
	if err := checkName("tenant", r.PathValue("tenant"), true); err != nil {
		return nil, err
	}
	if err := checkName("namespace", r.PathValue("ns"), true); err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(r.Body)
	if err := decodeJSON("namespace policies", body, &map[string]any{}); err != nil {
		return nil, err
	}
	if slices.Contains(c.namespaceList(""), nsName(r)) {
		return nil, herr(http.StatusConflict, "Namespace already exists")
	}
	return nil, c.store.PutMeta(namespaceKey+nsName(r), []byte("{}"))
}

func (c *Cluster) adminDeleteNamespace(_ http.ResponseWriter, r *http.Request) (any, error) {
	ns := nsName(r)
	if !slices.Contains(c.namespaceList(""), ns) {
		return nil, herr(http.StatusNotFound, "Namespace does not exist")
	}
	if len(c.listTopics(ns)) > 0 {
		return nil, herr(http.StatusConflict, "Cannot delete non empty namespace")
	}
	return nil, c.store.DeleteMeta(namespaceKey + ns)
}

// ---------------------------------------------------------------- topics

// topicName is the topic a request's path names; a name that is a path
// step ("." or ".."), over-long or otherwise invalid gets 412.
func topicName(r *http.Request) (pulsarwire.Topic, error) {
	full := "persistent://" + nsName(r) + "/" + r.PathValue("topic")
	if len(full) > maxTopicNameBytes {
		return pulsarwire.Topic{}, herr(http.StatusPreconditionFailed, "Invalid topic name: %d bytes, the limit is %d", len(full), maxTopicNameBytes)
	}
	if err := checkName("tenant", r.PathValue("tenant"), true); err != nil {
		return pulsarwire.Topic{}, err
	}
	if err := checkName("namespace", r.PathValue("ns"), true); err != nil {
		return pulsarwire.Topic{}, err
	}
	if l := r.PathValue("topic"); l == "." || l == ".." {
		return pulsarwire.Topic{}, herr(http.StatusPreconditionFailed, "Invalid topic name %q", l)
	}
	t, err := pulsarwire.ParseTopic(full)
	if err != nil {
		return t, herr(http.StatusPreconditionFailed, "Invalid topic name: %v", err)
	}
	return t, nil
}

func (c *Cluster) adminListTopics(_ http.ResponseWriter, r *http.Request) (any, error) {
	out := c.listTopics(nsName(r))
	if out == nil {
		out = []string{}
	}
	return out, nil
}

func (c *Cluster) adminListPartitioned(_ http.ResponseWriter, r *http.Request) (any, error) {
	return sortedNames(c.partitionedTopics(nsName(r))), nil
}

func (c *Cluster) adminCreateTopic(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	if _, ok := c.partitions(t.String()); ok || c.topicExists(t) {
		return nil, herr(http.StatusConflict, "This topic already exists")
	}
	if _, err := c.store.Topic(t.String()); err != nil {
		return nil, err
	}
	return nil, nil
}

func (c *Cluster) adminDeleteTopic(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	force := r.URL.Query().Get("force") == "true"
	switch err := c.deleteTopic(t.String(), force); {
	case errors.Is(err, errTopicNotFound):
		return nil, herr(http.StatusNotFound, "Topic not found")
	case errors.Is(err, errTopicBusy):
		return nil, herr(http.StatusPreconditionFailed, "Topic has active producers/subscriptions")
	case err != nil:
		return nil, err
	}
	return nil, nil
}

type partitionedMetadata struct {
	Partitions int  `json:"partitions"`
	Deleted    bool `json:"deleted"`
}

func (c *Cluster) adminGetPartitions(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	n, _ := c.partitions(t.String())
	return partitionedMetadata{Partitions: n}, nil
}

func readCount(r *http.Request) (int, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<10))
	if err != nil {
		return 0, herr(http.StatusBadRequest, "read body: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(body)))
	if err != nil {
		return 0, herr(http.StatusBadRequest, "The number of partitions must be a number, got %q", body)
	}
	return n, nil
}

func (c *Cluster) adminCreatePartitioned(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	n, err := readCount(r)
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, herr(http.StatusNotAcceptable, "Number of partitions should be more than 0")
	}
	if _, ok := c.partitions(t.String()); ok || c.topicExists(t) {
		return nil, herr(http.StatusConflict, "This topic already exists")
	}
	return nil, c.createPartitions(t, 0, n)
}

// createPartitions creates partitions [from, to) and records the count.
func (c *Cluster) createPartitions(t pulsarwire.Topic, from, to int) error {
	for i := from; i < to; i++ {
		if _, err := c.store.Topic(t.Partition(i).String()); err != nil {
			return err
		}
	}
	return c.setPartitions(t.String(), to)
}

func (c *Cluster) adminUpdatePartitions(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	n, err := readCount(r)
	if err != nil {
		return nil, err
	}
	cur, ok := c.partitions(t.String())
	if !ok {
		return nil, herr(http.StatusNotFound, "Partitioned topic does not exist")
	}
	if n <= cur {
		return nil, herr(http.StatusUnprocessableEntity, "Desired partitions %d should be greater than current partitions %d", n, cur)
	}
	return nil, c.createPartitions(t, cur, n)
}

func (c *Cluster) adminDeletePartitioned(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	n, ok := c.partitions(t.String())
	if !ok {
		return nil, herr(http.StatusNotFound, "Partitioned topic does not exist")
	}
	force := r.URL.Query().Get("force") == "true"
	if !force {
		for i := 0; i < n; i++ {
			if tp := c.loaded(t.Partition(i).String()); tp != nil && tp.connected() {
				return nil, herr(http.StatusPreconditionFailed, "Topic has active producers/subscriptions")
			}
		}
	}
	for i := 0; i < n; i++ {
		if err := c.deleteTopic(t.Partition(i).String(), true); err != nil && !errors.Is(err, errTopicNotFound) {
			return nil, err
		}
	}
	return nil, c.store.DeleteMeta(partitionsKey + t.String())
}

// partitionsOf lists the topics behind a name: its partitions when it is
// partitioned, else itself.
func (c *Cluster) partitionsOf(t pulsarwire.Topic) []pulsarwire.Topic {
	if n, ok := c.partitions(t.String()); ok {
		out := make([]pulsarwire.Topic, n)
		for i := range out {
			out[i] = t.Partition(i)
		}
		return out
	}
	return []pulsarwire.Topic{t}
}

func (c *Cluster) adminSubscriptions(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	found := false
	for _, p := range c.partitionsOf(t) {
		tp, err := c.topicFor(p, false)
		if err != nil {
			continue
		}
		found = true
		for _, s := range tp.subscriptions() {
			set[s.name] = true
		}
	}
	if !found {
		return nil, herr(http.StatusNotFound, "Topic not found")
	}
	return sortedNames(set), nil
}

func (c *Cluster) adminCreateSubscription(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	sub := r.PathValue("sub")
	if err := checkName("subscription", sub, false); err != nil {
		return nil, err
	}
	body, _ := io.ReadAll(r.Body)
	if err := checkJSON("message id", body); err != nil {
		return nil, err
	}
	earliest := strings.Contains(string(body), "earliest") || strings.Contains(string(body), `"ledgerId":-1`)
	for _, p := range c.partitionsOf(t) {
		tp, err := c.topicFor(p, true)
		if err != nil {
			return nil, herr(http.StatusNotFound, "Topic not found")
		}
		tp.mu.Lock()
		_, exists := tp.subs[sub]
		tp.mu.Unlock()
		if exists {
			return nil, herr(http.StatusConflict, "Subscription already exists for topic")
		}
		tp.ensureSubscription(sub)
		if s := tp.subscription(sub); s != nil && earliest {
			s.mu.Lock()
			s.reset(tp.log.First())
			s.mu.Unlock()
			s.save()
		}
	}
	return nil, nil
}

func (c *Cluster) adminDeleteSubscription(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	force := r.URL.Query().Get("force") == "true"
	found := false
	for _, p := range c.partitionsOf(t) {
		tp, err := c.topicFor(p, false)
		if err != nil {
			continue
		}
		switch err := tp.deleteSubscription(r.PathValue("sub"), force); {
		case err == nil:
			found = true
		case errors.Is(err, errSubscriptionBusy):
			return nil, herr(http.StatusPreconditionFailed, "Subscription has active connected consumers")
		case errors.Is(err, errSubscriptionNotFound):
		default:
			return nil, err
		}
	}
	if !found {
		return nil, herr(http.StatusNotFound, "Subscription not found")
	}
	return nil, nil
}

// adminUnload (pulsar-admin topics unload) unloads a topic, or each
// partition of a partitioned one, as Apache Pulsar does: its producers
// and consumers get CLOSE_PRODUCER / CLOSE_CONSUMER and look it up again;
// the cursors are saved first. A topic that exists but is not loaded has
// nothing to close. With ?destinationBroker= (an index or a broker's
// host:port) the topic moves to that broker (MoveTopic).
func (c *Cluster) adminUnload(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	found := false
	for _, p := range c.partitionsOf(t) {
		found = found || c.topicExists(p)
	}
	if !found {
		return nil, herr(http.StatusNotFound, "Topic %s not found", t.String())
	}
	if dest := r.URL.Query().Get("destinationBroker"); dest != "" {
		i := c.brokerIndex(dest)
		if i < 0 {
			return nil, herr(http.StatusBadRequest, "destinationBroker %q: no such broker (want an index or one of %v)", dest, c.BrokerURLs())
		}
		return nil, c.MoveTopic(t.String(), i)
	}
	for _, p := range c.partitionsOf(t) {
		c.unloadTopic(p.String())
	}
	return nil, nil
}

func (c *Cluster) adminLookup(_ http.ResponseWriter, r *http.Request) (any, error) {
	t, err := topicName(r)
	if err != nil {
		return nil, err
	}
	s := c.broker(c.OwnerOf(t.String()))
	return setURLs("brokerUrl", s.url(), "httpUrl", c.adminURL, "brokerUrlTls", s.tlsURL(), "httpUrlTls", c.adminURLTLS), nil
}

// eachSubscription runs f on the named subscription of a topic or of each
// of its partitions; 404 when there is none.
func (c *Cluster) eachSubscription(r *http.Request, f func(*subscription) error) error {
	t, err := topicName(r)
	if err != nil {
		return err
	}
	found := false
	for _, p := range c.partitionsOf(t) {
		tp, err := c.topicFor(p, false)
		if err != nil {
			continue
		}
		if s := tp.subscription(r.PathValue("sub")); s != nil {
			found = true
			if err := f(s); err != nil {
				return err
			}
		}
	}
	if !found {
		return herr(http.StatusNotFound, "Subscription not found")
	}
	return nil
}

// adminClearBacklog (pulsar-admin topics clear-backlog) acknowledges
// everything published so far; consumers stay connected.
func (c *Cluster) adminClearBacklog(_ http.ResponseWriter, r *http.Request) (any, error) {
	return nil, c.eachSubscription(r, func(s *subscription) error {
		end := s.t.log.Next()
		s.mu.Lock()
		s.reset(end)
		s.mu.Unlock()
		s.save()
		s.wakeup()
		return nil
	})
}

// adminResetCursor (pulsar-admin topics reset-cursor --time) moves the
// subscription to the first message published at or after the time and,
// as Apache Pulsar, disconnects its consumers so they resume from there.
func (c *Cluster) adminResetCursor(_ http.ResponseWriter, r *http.Request) (any, error) {
	ms, err := strconv.ParseInt(r.PathValue("timestamp"), 10, 64)
	if err != nil {
		return nil, herr(http.StatusPreconditionFailed, "Invalid timestamp %q", r.PathValue("timestamp"))
	}
	return nil, c.eachSubscription(r, func(s *subscription) error {
		pos, err := s.t.log.SeekTime(ms)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.reset(pos)
		s.mu.Unlock()
		s.closeAll()
		s.save()
		return nil
	})
}

// sortedNames returns m's keys in order, never nil: Pulsar's admin API
// answers an empty list as [], and pulsar-admin does not read null.
func sortedNames[V any](m map[string]V) []string {
	return append([]string{}, slices.Sorted(maps.Keys(m))...)
}
