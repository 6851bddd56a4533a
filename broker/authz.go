package broker

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Authorization as Apache Pulsar's default provider does it for
// namespaces: a role may produce to or consume from a namespace's topics
// when the namespace's permissions grant it that action; superuser roles
// may do everything, the admin API included. See docs/security.md.

// The actions a namespace permission may grant (Apache Pulsar's
// AuthAction); only produce and consume gate anything here.
const (
	actionProduce = "produce"
	actionConsume = "consume"
)

var knownActions = []string{actionProduce, actionConsume, "functions", "sources", "sinks", "packages"}

// permissionsKey prefixes the store's meta keys of namespace permissions:
// permissionsKey + "tenant/ns" holds {"role": ["produce", ...]}.
const permissionsKey = "permissions/"

func (c *Cluster) authzOn() bool { return c.opts.Authorization }

func (c *Cluster) superUser(role string) bool {
	return slices.Contains(c.opts.SuperUserRoles, role)
}

// permissions reads a namespace's grants; none when it has none.
func (c *Cluster) permissions(ns string) (map[string][]string, error) {
	b, ok, err := c.store.GetMeta(permissionsKey + ns)
	if err != nil || !ok {
		return map[string][]string{}, err
	}
	out := map[string][]string{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("permissions of %s: %w", ns, err)
	}
	return out, nil
}

// allowed reports whether role may do action on topic t.
func (c *Cluster) allowed(role string, t pulsarwire.Topic, action string) bool {
	return c.allowedIn(role, t.NamespaceName(), action)
}

// allowedIn reports whether role may do action in namespace ns.
func (c *Cluster) allowedIn(role, ns, action string) bool {
	if !c.authzOn() || c.superUser(role) {
		return true
	}
	perms, err := c.permissions(ns)
	if err != nil {
		c.log.Warn("permissions unreadable: refusing", "namespace", ns, "err", err)
		return false
	}
	return slices.Contains(perms[role], action)
}

// authorize answers whether the connection's role may do action on t,
// and when not, the AuthorizationError text Apache Pulsar sends.
func (cn *conn) authorize(t pulsarwire.Topic, action string) (pb.ServerError, string, bool) {
	if cn.c.allowed(cn.principal, t, action) {
		return 0, "", true
	}
	cn.log.Info("refused: not authorized", "role", cn.principal, "topic", t.String(), "action", action)
	return pb.ServerError_AuthorizationError, fmt.Sprintf("Client with role %q is not authorized to %s on %s", cn.principal, action, t.String()), false
}

// authorizeLookup: a lookup needs either action, as in Apache Pulsar.
func (cn *conn) authorizeLookup(t pulsarwire.Topic) (pb.ServerError, string, bool) {
	if cn.c.allowed(cn.principal, t, actionProduce) || cn.c.allowed(cn.principal, t, actionConsume) {
		return 0, "", true
	}
	return pb.ServerError_AuthorizationError, fmt.Sprintf("Client with role %q is not authorized to lookup %s", cn.principal, t.String()), false
}

// adminAuthorized decides an admin request of role: with authorization on
// only superusers use the admin API, except a topic's lookup, which
// needs produce or consume there.
func (c *Cluster) adminAuthorized(r *http.Request, role string) bool {
	if !c.authzOn() || c.superUser(role) {
		return true
	}
	if strings.HasPrefix(r.URL.Path, "/lookup/") {
		t, err := pulsarwire.ParseTopic("persistent://" + nsName(r) + "/" + r.PathValue("topic"))
		return err == nil && (c.allowed(role, t, actionProduce) || c.allowed(role, t, actionConsume))
	}
	return false
}
