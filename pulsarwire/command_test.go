package pulsarwire

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/streamrun/streamrun/pulsarwire/pb"
)

// Every kind whose BaseCommand field exists is in the table, and Wrap and
// Body agree with the descriptors: the field whose number is the type.
func TestTheCommandTableIsTheDescriptors(t *testing.T) {
	base := (&pb.BaseCommand{}).ProtoReflect().Descriptor()
	values := base.Enums().ByName("Type").Values()
	modelled := 0
	for i := 0; i < values.Len(); i++ {
		typ := pb.BaseCommand_Type(values.Get(i).Number())
		f := base.Fields().ByNumber(protoreflect.FieldNumber(typ))
		if f == nil {
			if Describe(typ).Answer != 0 || Describe(typ).Type != typ {
				t.Errorf("%s has no field but a description %+v", typ, Describe(typ))
			}
			continue
		}
		modelled++
		m := (&pb.BaseCommand{}).ProtoReflect().NewField(f).Message().Interface()
		c := Wrap(m)
		if c.GetType() != typ {
			t.Errorf("Wrap(%T) is a %s, want %s", m, c.GetType(), typ)
		}
		if Body(c) != m {
			t.Errorf("Body of a %s is %v, want what was wrapped", typ, Body(c))
		}
		if Body(&pb.BaseCommand{Type: typ.Enum()}) != nil {
			t.Errorf("Body of a %s without its field is not nil", typ)
		}
		_, hasRID := RequestID(c)
		if hasRID {
			t.Errorf("an empty %s has a request id", typ)
		}
		if ok := SetRequestID(c, 77); ok != (f.Message().Fields().ByName("request_id") != nil && !Describe(typ).IsAnswer) {
			t.Errorf("SetRequestID on a %s: %v", typ, ok)
		} else if rid, _ := RequestID(c); ok && rid != 77 {
			t.Errorf("%s: request id %d after setting 77", typ, rid)
		}
	}
	if modelled < 35 {
		t.Fatalf("only %d kinds modelled", modelled)
	}
}

// Each request knows its answer and how it is refused.
func TestRequestsKnowTheirAnswers(t *testing.T) {
	for req, want := range map[pb.BaseCommand_Type][2]pb.BaseCommand_Type{
		pb.BaseCommand_CONNECT:                 {pb.BaseCommand_CONNECTED, 0},
		pb.BaseCommand_LOOKUP:                  {pb.BaseCommand_LOOKUP_RESPONSE, pb.BaseCommand_LOOKUP_RESPONSE},
		pb.BaseCommand_PARTITIONED_METADATA:    {pb.BaseCommand_PARTITIONED_METADATA_RESPONSE, pb.BaseCommand_PARTITIONED_METADATA_RESPONSE},
		pb.BaseCommand_PRODUCER:                {pb.BaseCommand_PRODUCER_SUCCESS, pb.BaseCommand_ERROR},
		pb.BaseCommand_SUBSCRIBE:               {pb.BaseCommand_SUCCESS, pb.BaseCommand_ERROR},
		pb.BaseCommand_SEND:                    {pb.BaseCommand_SEND_RECEIPT, pb.BaseCommand_SEND_ERROR},
		pb.BaseCommand_ACK:                     {pb.BaseCommand_ACK_RESPONSE, pb.BaseCommand_ACK_RESPONSE},
		pb.BaseCommand_FLOW:                    {0, 0},
		pb.BaseCommand_SEEK:                    {pb.BaseCommand_SUCCESS, pb.BaseCommand_ERROR},
		pb.BaseCommand_GET_TOPICS_OF_NAMESPACE: {pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE, pb.BaseCommand_ERROR},
		pb.BaseCommand_GET_SCHEMA:              {pb.BaseCommand_GET_SCHEMA_RESPONSE, pb.BaseCommand_GET_SCHEMA_RESPONSE},
		pb.BaseCommand_CONSUMER_STATS:          {pb.BaseCommand_CONSUMER_STATS_RESPONSE, pb.BaseCommand_CONSUMER_STATS_RESPONSE},
		pb.BaseCommand_PING:                    {pb.BaseCommand_PONG, 0},
	} {
		d := Describe(req)
		if d.Answer != want[0] || d.Failure != want[1] || d.IsAnswer {
			t.Errorf("%s: answer %s, failure %s, answer itself %v; want %s, %s", req, d.Answer, d.Failure, d.IsAnswer, want[0], want[1])
		}
		if want[0] != 0 && !Describe(want[0]).IsAnswer {
			t.Errorf("%s is not marked an answer", want[0])
		}
	}
}

func TestRefusalsHaveTheShapeTheClientWaitsFor(t *testing.T) {
	code, msg := pb.ServerError_ServiceNotReady, "not now"
	lookup := Refusal(Wrap(&pb.CommandLookupTopic{Topic: proto.String("t"), RequestId: proto.Uint64(5)}), code, msg)
	if r, ok := lookup.(*pb.CommandLookupTopicResponse); !ok || r.GetRequestId() != 5 ||
		r.GetResponse() != pb.CommandLookupTopicResponse_Failed || r.GetError() != code || r.GetMessage() != msg {
		t.Errorf("LOOKUP refused with %v", lookup)
	}
	send := Refusal(Wrap(&pb.CommandSend{ProducerId: proto.Uint64(3), SequenceId: proto.Uint64(9)}), code, msg)
	if r, ok := send.(*pb.CommandSendError); !ok || r.GetProducerId() != 3 || r.GetSequenceId() != 9 || r.GetError() != code {
		t.Errorf("SEND refused with %v", send)
	}
	sub := Refusal(Wrap(&pb.CommandSubscribe{Topic: proto.String("t"), RequestId: proto.Uint64(6)}), code, msg)
	if r, ok := sub.(*pb.CommandError); !ok || r.GetRequestId() != 6 || r.GetError() != code || r.GetMessage() != msg {
		t.Errorf("SUBSCRIBE refused with %v", sub)
	}
	stats := Refusal(Wrap(&pb.CommandConsumerStats{ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(7)}), code, msg)
	if r, ok := stats.(*pb.CommandConsumerStatsResponse); !ok || r.GetRequestId() != 7 || r.GetErrorCode() != code || r.GetErrorMessage() != msg {
		t.Errorf("CONSUMER_STATS refused with %v", stats)
	}
}

func TestAcksAndUnmodelledKindsAreRefusedByTheirRules(t *testing.T) {
	code, msg := pb.ServerError_ServiceNotReady, "not now"
	// An ACK is answered only when it asked for an answer.
	if r := Refusal(Wrap(&pb.CommandAck{ConsumerId: proto.Uint64(1)}), code, msg); r != nil {
		t.Errorf("an ACK without a request id refused with %v", r)
	}
	ack := Refusal(Wrap(&pb.CommandAck{ConsumerId: proto.Uint64(1), RequestId: proto.Uint64(8)}), code, msg)
	if r, ok := ack.(*pb.CommandAckResponse); !ok || r.GetConsumerId() != 1 || r.GetRequestId() != 8 || r.GetError() != code {
		t.Errorf("ACK refused with %v", ack)
	}
	for _, m := range []proto.Message{&pb.CommandFlow{}, &pb.CommandSuccess{RequestId: proto.Uint64(1)}, &pb.CommandPing{}} {
		if r := Refusal(Wrap(m), code, msg); r != nil {
			t.Errorf("%T refused with %v", m, r)
		}
	}
	// A kind this package does not model: ERROR, with the request id
	// read from its body's field 1.
	body := protowire.AppendTag(nil, 1, protowire.VarintType)
	body = protowire.AppendVarint(body, 42)
	raw := protowire.AppendTag(nil, protowire.Number(pb.BaseCommand_WATCH_TOPIC_LIST), protowire.BytesType)
	raw = protowire.AppendBytes(raw, body)
	watch := &pb.BaseCommand{Type: pb.BaseCommand_WATCH_TOPIC_LIST.Enum()}
	watch.ProtoReflect().SetUnknown(raw)
	if rid, ok := RequestID(watch); !ok || rid != 42 {
		t.Errorf("WATCH_TOPIC_LIST request id %d, %v", rid, ok)
	}
	if r, ok := Refusal(watch, code, msg).(*pb.CommandError); !ok || r.GetRequestId() != 42 {
		t.Errorf("WATCH_TOPIC_LIST refused with %v", r)
	}
	// A transaction request is refused in its own answer, with the
	// transaction id it named.
	add := Wrap(&pb.CommandAddPartitionToTxn{RequestId: proto.Uint64(5), TxnidMostBits: proto.Uint64(1), TxnidLeastBits: proto.Uint64(9)})
	r, ok := Refusal(add, pb.ServerError_TransactionNotFound, msg).(*pb.CommandAddPartitionToTxnResponse)
	if !ok || r.GetRequestId() != 5 || r.GetTxnidMostBits() != 1 || r.GetTxnidLeastBits() != 9 || r.GetError() != pb.ServerError_TransactionNotFound {
		t.Errorf("ADD_PARTITION_TO_TXN refused with %v", r)
	}
	if err := Refused(Wrap(r)); !errors.Is(err, ErrTransactionNotFound) {
		t.Errorf("Refused(%v) = %v, want TransactionNotFound", r, err)
	}
	if d := Describe(pb.BaseCommand_TC_CLIENT_CONNECT_REQUEST); d.Answer != pb.BaseCommand_TC_CLIENT_CONNECT_RESPONSE {
		t.Errorf("TC_CLIENT_CONNECT_REQUEST is answered by %v", d.Answer)
	}
}

func TestRefusedReadsTheServersError(t *testing.T) {
	for _, tc := range []struct {
		m    proto.Message
		want pb.ServerError // -1: no refusal
	}{
		{&pb.CommandError{RequestId: proto.Uint64(1), Error: pb.ServerError_ConsumerBusy.Enum(), Message: proto.String("busy")}, pb.ServerError_ConsumerBusy},
		{&pb.CommandSuccess{RequestId: proto.Uint64(1)}, -1},
		{&pb.CommandLookupTopicResponse{RequestId: proto.Uint64(1), Response: pb.CommandLookupTopicResponse_Connect.Enum()}, -1},
		{&pb.CommandLookupTopicResponse{RequestId: proto.Uint64(1), Response: pb.CommandLookupTopicResponse_Failed.Enum(), Error: pb.ServerError_TopicNotFound.Enum()}, pb.ServerError_TopicNotFound},
		{&pb.CommandPartitionedTopicMetadataResponse{RequestId: proto.Uint64(1), Error: pb.ServerError_ServiceNotReady.Enum()}, pb.ServerError_ServiceNotReady},
		{&pb.CommandGetSchemaResponse{RequestId: proto.Uint64(1), ErrorCode: pb.ServerError_TopicNotFound.Enum()}, pb.ServerError_TopicNotFound},
		{&pb.CommandAckResponse{ConsumerId: proto.Uint64(1)}, -1},
		{&pb.CommandAckResponse{ConsumerId: proto.Uint64(1), Error: pb.ServerError_NotAllowedError.Enum()}, pb.ServerError_NotAllowedError},
	} {
		err := Refused(Wrap(tc.m))
		var se *ServerError
		switch {
		case tc.want < 0 && err != nil:
			t.Errorf("%T: refused with %v", tc.m, err)
		case tc.want >= 0 && (!errors.As(err, &se) || se.Code != tc.want):
			t.Errorf("%T: %v, want %s", tc.m, err, tc.want)
		}
	}
}

func TestIdsAndTopicsAreFoundByName(t *testing.T) {
	sub := Wrap(&pb.CommandSubscribe{Topic: proto.String("t"), ConsumerId: proto.Uint64(4)})
	if name, ok := TopicOf(sub); !ok || name != "t" {
		t.Errorf("SUBSCRIBE topic %q", name)
	}
	if id, ok := ConsumerID(sub); !ok || id != 4 {
		t.Errorf("SUBSCRIBE consumer %d", id)
	}
	if _, ok := ProducerID(sub); ok {
		t.Error("SUBSCRIBE has a producer id")
	}
	send := Wrap(&pb.CommandSend{ProducerId: proto.Uint64(2)})
	if id, ok := ProducerID(send); !ok || id != 2 {
		t.Errorf("SEND producer %d", id)
	}
	if _, ok := TopicOf(send); ok {
		t.Error("SEND names a topic")
	}
}

// commands_gen.go is what internal/cmdgen writes from the descriptors
// now: an edit of commands.proto without go generate fails here.
func TestTheGeneratedTableIsCurrent(t *testing.T) {
	out := filepath.Join(t.TempDir(), "commands_gen.go")
	cmd := exec.Command("go", "run", "./internal/cmdgen", "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cmdgen: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("commands_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatal("commands_gen.go is stale: run go generate ./pulsarwire")
	}
}
