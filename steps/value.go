package steps

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// The results of expressions, as the message's fields take them. An
// expression typed dyn gives what it gives at run time: a value of
// another type is an error of that message.

func asBool(v ref.Val) (bool, error) {
	if b, ok := v.(types.Bool); ok {
		return bool(b), nil
	}
	return false, fmt.Errorf("gave %s, want a bool", valueType(v))
}

func asString(v ref.Val) (string, error) {
	if s, ok := v.(types.String); ok {
		return string(s), nil
	}
	return "", fmt.Errorf("gave %s, want a string", valueType(v))
}

// asPayload is bytes as they are, a string's UTF-8 bytes, or a map or
// list encoded as JSON.
func asPayload(v ref.Val) ([]byte, error) {
	switch x := v.(type) {
	case types.Bytes:
		return []byte(x), nil
	case types.String:
		return []byte(x), nil
	case traits.Mapper, traits.Lister:
		var b bytes.Buffer
		if err := writeJSON(&b, v, 0); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
	return nil, fmt.Errorf("gave %s, want bytes, a string, a map or a list", valueType(v))
}

// asTime is a timestamp, or an int of milliseconds since the epoch.
func asTime(v ref.Val) (time.Time, error) {
	switch x := v.(type) {
	case types.Timestamp:
		return x.Time, nil
	case types.Int:
		return time.UnixMilli(int64(x)), nil
	}
	return time.Time{}, fmt.Errorf("gave %s, want a timestamp or an int (milliseconds since the epoch)", valueType(v))
}

func valueType(v ref.Val) string {
	if v == nil {
		return "nothing"
	}
	return v.Type().TypeName()
}

// maxJSONDepth bounds the nesting of a payload written as JSON (CEL's own
// limits keep expressions shallower; this guards the recursion).
const maxJSONDepth = 100

// writeJSON writes v as JSON: maps with string keys as objects, lists as
// arrays, numbers, strings, bools and null as themselves, bytes as
// base64 (as encoding/json writes them), timestamps in RFC 3339 and
// durations as "1.5s".
func writeJSON(b *bytes.Buffer, v ref.Val, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("a value nested deeper than %d levels cannot be written as JSON", maxJSONDepth)
	}
	switch x := v.(type) {
	case types.Null:
		b.WriteString("null")
	case types.Bool:
		b.WriteString(strconv.FormatBool(bool(x)))
	case types.Int:
		b.WriteString(strconv.FormatInt(int64(x), 10))
	case types.Uint:
		b.WriteString(strconv.FormatUint(uint64(x), 10))
	case types.Double:
		f := float64(x)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("%v cannot be written as JSON", f)
		}
		b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	case types.String:
		writeJSONString(b, string(x))
	case types.Bytes:
		writeJSONString(b, base64.StdEncoding.EncodeToString(x))
	case types.Timestamp:
		writeJSONString(b, x.UTC().Format(time.RFC3339Nano))
	case types.Duration:
		writeJSONString(b, x.Duration.String())
	case traits.Mapper:
		// Keys sorted, so that the same map is always the same bytes.
		var keys []string
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return fmt.Errorf("a map key %s cannot be a JSON object's key: want a string", valueType(k))
			}
			keys = append(keys, string(ks))
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k)
			b.WriteByte(':')
			if err := writeJSON(b, x.Get(types.String(k)), depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case traits.Lister:
		b.WriteByte('[')
		first := true
		for it := x.Iterator(); it.HasNext() == types.True; {
			if !first {
				b.WriteByte(',')
			}
			first = false
			if err := writeJSON(b, it.Next(), depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		return fmt.Errorf("%s cannot be written as JSON", valueType(v))
	}
	return nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s) // a string always encodes
	b.Write(enc)
}
