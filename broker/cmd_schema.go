package broker

import (
	"bytes"
	"encoding/binary"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/streamrun/streamrun/pulsarwire"
	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Schemas are kept per topic as a list of definitions; a definition's
// version is its index, on the wire as 8 bytes big-endian (Apache Pulsar's
// long version). Every schema is accepted: compatibility checks are left
// to Apache Pulsar, this broker only remembers and hands back.

func schemaVersion(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }

func (t *topic) registerSchema(sch *pb.Schema) ([]byte, error) {
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(sch)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, s := range t.schemas {
		if bytes.Equal(s, data) {
			return schemaVersion(i), nil
		}
	}
	i := len(t.schemas)
	if err := t.c.store.PutMeta(schemaKey(t.name)+strconv.Itoa(i), data); err != nil {
		return nil, err
	}
	t.schemas = append(t.schemas, data)
	return schemaVersion(i), nil
}

// schema returns the definition of a version (nil: the latest).
func (t *topic) schema(version []byte) (*pb.Schema, []byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.schemas) == 0 {
		return nil, nil, false
	}
	i := len(t.schemas) - 1
	if len(version) == 8 {
		v := binary.BigEndian.Uint64(version)
		if v >= uint64(len(t.schemas)) {
			return nil, nil, false
		}
		i = int(v)
	}
	sch := new(pb.Schema)
	if err := proto.Unmarshal(t.schemas[i], sch); err != nil {
		return nil, nil, false
	}
	return sch, schemaVersion(i), true
}

func (cn *conn) handleGetSchema(m *pb.CommandGetSchema) {
	rid := m.GetRequestId()
	t, err := pulsarwire.ParseTopic(m.GetTopic())
	if err != nil {
		cn.getSchemaFailed(rid, pb.ServerError_InvalidTopicName, err.Error())
		return
	}
	tp, err := cn.c.topicFor(t, false)
	if err != nil {
		cn.getSchemaFailed(rid, pb.ServerError_TopicNotFound, "Topic not found or no-schema")
		return
	}
	sch, ver, ok := tp.schema(m.GetSchemaVersion())
	if !ok {
		cn.getSchemaFailed(rid, pb.ServerError_TopicNotFound, "Topic not found or no-schema")
		return
	}
	cn.send(&pb.CommandGetSchemaResponse{RequestId: proto.Uint64(rid), Schema: sch, SchemaVersion: ver})
}

func (cn *conn) handleGetOrCreateSchema(m *pb.CommandGetOrCreateSchema) {
	rid := m.GetRequestId()
	t, err := pulsarwire.ParseTopic(m.GetTopic())
	if err != nil {
		cn.getOrCreateSchemaFailed(rid, pb.ServerError_InvalidTopicName, err.Error())
		return
	}
	tp, err := cn.c.topicFor(t, true)
	if err != nil {
		cn.getOrCreateSchemaFailed(rid, errorCode(err), errorText(err))
		return
	}
	ver, err := tp.registerSchema(m.GetSchema())
	if err != nil {
		cn.getOrCreateSchemaFailed(rid, pb.ServerError_IncompatibleSchema, err.Error())
		return
	}
	cn.send(&pb.CommandGetOrCreateSchemaResponse{RequestId: proto.Uint64(rid), SchemaVersion: ver})
}
