package pipelinetest

import (
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/streamrun/streamrun/pool"
)

// message is the input as published.
func (in *Input) message() (pool.Message, error) {
	m := pool.Message{Key: in.Key, Properties: in.Properties}
	switch {
	case in.Text != nil:
		m.Payload = []byte(*in.Text)
	case in.JSON != nil:
		b, err := json.Marshal(in.JSON)
		if err != nil {
			return m, err
		}
		m.Payload = b
	case in.Base64 != nil:
		b, err := base64.StdEncoding.DecodeString(*in.Base64)
		if err != nil {
			return m, err
		}
		m.Payload = b
	}
	if in.EventTime != "" {
		t, err := time.Parse(time.RFC3339Nano, in.EventTime)
		if err != nil {
			return m, err
		}
		m.EventTime = t
	}
	return m, nil
}
