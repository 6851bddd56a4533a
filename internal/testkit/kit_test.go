package testkit

import (
	"strings"
	"testing"
)

func TestNamesAreFreshAndSafeForTopics(t *testing.T) {
	a, b := Name(t), Name(t)
	if a == b {
		t.Fatalf("two names alike: %s", a)
	}
	if !strings.HasPrefix(a, "testnamesarefreshandsafefortopics-") {
		t.Fatalf("name %q does not start with the test's", a)
	}
	if topic := TopicName(t); !strings.HasPrefix(topic, "persistent://public/default/testnames") {
		t.Fatalf("topic %q", topic)
	}
}
