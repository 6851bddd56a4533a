package pipelines

import (
	"fmt"
	"strings"
)

// expand replaces ${VAR} and ${VAR:-default} in s with the variable's
// value (the default when it is unset or empty) and $$ with a literal $.
// Any other $ is itself, so "orders-.*$" needs no escaping. A default is
// taken literally: it holds no further expansion and ends at the first
// '}'. The result is not read as YAML again.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '{':
		default:
			b.WriteByte(c)
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("%q: ${ without a closing } (write $${ for a literal ${)", s)
		}
		inner := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(inner, ":-")
		if !validVarName(name) {
			return "", fmt.Errorf("${%s}: %q is not a variable name (letters, digits and '_', not starting with a digit; write $$ for a literal $)", inner, name)
		}
		v, ok := lookup(name)
		switch {
		case hasDef && v == "":
			v = def
		case !ok:
			return "", fmt.Errorf("${%s} is not set (write ${%s:-default} to give a default)", name, name)
		}
		b.WriteString(v)
		i += end
	}
	return b.String(), nil
}

func validVarName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
