package broker

// The admin API of namespace permissions (grant, revoke, read), kept in
// the store's metadata and read by authz.go.

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
)

func (c adminAPI) adminGetPermissions(_ http.ResponseWriter, r *http.Request) (any, error) {
	if err := c.namespaceMustExist(r); err != nil {
		return nil, err
	}
	return c.permissions(nsName(r))
}

// adminGrant sets a role's actions on a namespace; the body is a JSON
// array of actions, as pulsar-admin namespaces grant-permission sends.
func (c adminAPI) adminGrant(_ http.ResponseWriter, r *http.Request) (any, error) {
	if err := c.namespaceMustExist(r); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		return nil, herr(http.StatusBadRequest, "read body: %v", err)
	}
	var actions []string
	if err := json.Unmarshal(body, &actions); err != nil {
		return nil, herr(http.StatusBadRequest, "body: want a JSON array of actions (%s): %v", strings.Join(knownActions, ", "), err)
	}
	for _, a := range actions {
		if !slices.Contains(knownActions, a) {
			return nil, herr(http.StatusBadRequest, "unknown action %q: want one of %s", a, strings.Join(knownActions, ", "))
		}
	}
	// Listed in AuthAction's order, as Apache Pulsar lists them.
	slices.SortFunc(actions, func(a, b string) int { return slices.Index(knownActions, a) - slices.Index(knownActions, b) })
	return nil, c.updatePermissions(nsName(r), func(p map[string][]string) { p[r.PathValue("role")] = slices.Compact(actions) })
}

func (c adminAPI) adminRevoke(_ http.ResponseWriter, r *http.Request) (any, error) {
	if err := c.namespaceMustExist(r); err != nil {
		return nil, err
	}
	return nil, c.updatePermissions(nsName(r), func(p map[string][]string) { delete(p, r.PathValue("role")) })
}

func (c adminAPI) namespaceMustExist(r *http.Request) error {
	if !slices.Contains(c.namespaceList(""), nsName(r)) {
		return herr(http.StatusNotFound, "Namespace does not exist")
	}
	return nil
}

// updatePermissions applies f to a namespace's grants under the
// cluster's lock, so that two admin requests do not lose one another.
func (c adminAPI) updatePermissions(ns string, f func(map[string][]string)) error {
	c.permMu.Lock()
	defer c.permMu.Unlock()
	p, err := c.permissions(ns)
	if err != nil {
		return err
	}
	p = maps.Clone(p)
	f(p)
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return c.store.PutMeta(permissionsKey+ns, b)
}
