package pulsarwire

import (
	"fmt"
	"strconv"
	"strings"
)

// Topic is a parsed topic name: domain://tenant/namespace/local.
type Topic struct {
	Persistent bool
	Tenant     string
	Namespace  string
	// Local is the name inside the namespace, partition suffix included.
	Local string
}

// PartitionSuffix joins a partitioned topic's name and a partition index.
const PartitionSuffix = "-partition-"

// ParseTopic reads a topic name the way Pulsar clients do: "name" means
// persistent://public/default/name, "tenant/ns/name" means
// persistent://tenant/ns/name, and full names keep their domain.
func ParseTopic(s string) (Topic, error) {
	bad := func(why string) (Topic, error) {
		return Topic{}, fmt.Errorf("topic name %q: %s", s, why)
	}
	if s == "" {
		return bad("empty")
	}
	t := Topic{Persistent: true}
	rest := s
	if i := strings.Index(s, "://"); i >= 0 {
		switch s[:i] {
		case "persistent":
		case "non-persistent":
			t.Persistent = false
		default:
			return bad("domain must be persistent or non-persistent")
		}
		rest = s[i+3:]
	} else if !strings.Contains(s, "/") {
		rest = "public/default/" + s
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) != 3 {
		return bad("want tenant/namespace/name")
	}
	t.Tenant, t.Namespace, t.Local = parts[0], parts[1], parts[2]
	for _, p := range []struct{ what, v string }{{"tenant", t.Tenant}, {"namespace", t.Namespace}} {
		if p.v == "" {
			return bad(p.what + " is empty")
		}
		for _, r := range p.v {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_=:.", r)) {
				return bad(fmt.Sprintf("%s %q has %q (allowed: letters, digits, - _ = : .)", p.what, p.v, r))
			}
		}
	}
	if t.Local == "" {
		return bad("name is empty")
	}
	for _, r := range t.Local {
		if r < 0x20 || r == 0x7f {
			return bad(fmt.Sprintf("name has control character %q", r))
		}
	}
	if strings.Contains(t.Local, "/") {
		return bad("name has '/' (a v1 name with a cluster is not supported)")
	}
	return t, nil
}

// String is the full name, e.g. persistent://public/default/orders.
func (t Topic) String() string {
	d := "persistent"
	if !t.Persistent {
		d = "non-persistent"
	}
	return d + "://" + t.Tenant + "/" + t.Namespace + "/" + t.Local
}

// NamespaceName is "tenant/namespace".
func (t Topic) NamespaceName() string { return t.Tenant + "/" + t.Namespace }

// Partition returns the topic of partition i.
func (t Topic) Partition(i int) Topic {
	t.Local = t.Local + PartitionSuffix + strconv.Itoa(i)
	return t
}

// PartitionIndex returns the partition index and the partitioned topic's
// name, or -1 and t when t is not a partition.
func (t Topic) PartitionIndex() (int, Topic) {
	i := strings.LastIndex(t.Local, PartitionSuffix)
	if i < 0 {
		return -1, t
	}
	n, err := strconv.Atoi(t.Local[i+len(PartitionSuffix):])
	if err != nil || n < 0 {
		return -1, t
	}
	base := t
	base.Local = t.Local[:i]
	return n, base
}
