package testkit

import (
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
)

var nonTopicChars = regexp.MustCompile(`[^a-zA-Z0-9-]+`)

// Name is the test's name made safe for a topic or a subscription (at
// most its last 50 characters), with a random suffix, so that reruns
// against a long-lived Apache Pulsar never meet old state and a broker's
// log points back at the test.
func Name(t testing.TB) string {
	name := strings.Trim(strings.ToLower(nonTopicChars.ReplaceAllString(t.Name(), "-")), "-")
	if len(name) > 50 {
		name = name[len(name)-50:]
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return name + "-" + hex.EncodeToString(b[:])
}

// TopicName is a fresh persistent topic in public/default named Name(t).
func TopicName(t testing.TB) string {
	return "persistent://public/default/" + Name(t)
}
