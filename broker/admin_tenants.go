package broker

// The admin API of clusters, tenants and namespaces. Tenants and
// namespaces are accepted freely and kept in the store's metadata.

import (
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/streamrun/streamrun/pulsarwire"
)

func (c adminAPI) adminCluster(_ http.ResponseWriter, r *http.Request) (any, error) {
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

func (c adminAPI) tenantList() []string {
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
func (c adminAPI) namespaceList(tenant string) []string {
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

func (c adminAPI) adminTenants(http.ResponseWriter, *http.Request) (any, error) {
	return c.tenantList(), nil
}

func (c adminAPI) adminGetTenant(_ http.ResponseWriter, r *http.Request) (any, error) {
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

func (c adminAPI) adminPutTenant(_ http.ResponseWriter, r *http.Request) (any, error) {
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

func (c adminAPI) adminDeleteTenant(_ http.ResponseWriter, r *http.Request) (any, error) {
	t := r.PathValue("tenant")
	if !slices.Contains(c.tenantList(), t) {
		return nil, herr(http.StatusNotFound, "Tenant does not exist")
	}
	if len(c.namespaceList(t)) > 0 && t != "public" {
		return nil, herr(http.StatusConflict, "The tenant still has active namespaces")
	}
	return nil, c.store.DeleteMeta(tenantKey + t)
}

func (c adminAPI) adminNamespaces(_ http.ResponseWriter, r *http.Request) (any, error) {
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

func (c adminAPI) adminGetNamespace(_ http.ResponseWriter, r *http.Request) (any, error) {
	if !slices.Contains(c.namespaceList(""), nsName(r)) {
		return nil, herr(http.StatusNotFound, "Namespace does not exist")
	}
	return map[string]any{"replication_clusters": []string{c.opts.ClusterName}, "bundles": map[string]any{"boundaries": []string{"0x00000000", "0xffffffff"}, "numBundles": 1}}, nil
}

func (c adminAPI) adminPutNamespace(_ http.ResponseWriter, r *http.Request) (any, error) {
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

func (c adminAPI) adminDeleteNamespace(_ http.ResponseWriter, r *http.Request) (any, error) {
	ns := nsName(r)
	if !slices.Contains(c.namespaceList(""), ns) {
		return nil, herr(http.StatusNotFound, "Namespace does not exist")
	}
	if len(c.listTopics(ns)) > 0 {
		return nil, herr(http.StatusConflict, "Cannot delete non empty namespace")
	}
	return nil, c.store.DeleteMeta(namespaceKey + ns)
}
