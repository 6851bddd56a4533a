// Package steps runs a pipeline's steps: small stateless transformations
// written in the pipeline file, evaluated in the host's process, with no
// plugin. A step is one of
//
//   - filter: keep the messages for which a boolean expression is true;
//   - map: set the payload, key, ordering key, properties or event time
//     from expressions;
//   - route: choose the topic a message is published to, by an
//     expression, with a default;
//   - dead_letter_if: send the message to the dead-letter topic when a
//     boolean expression is true, with a reason from an expression.
//
// Expressions are Google's Common Expression Language (CEL, cel.dev/cel-go):
// typed, side-effect free, not Turing complete, with a cost model that
// bounds what one evaluation may do. An Env declares what an expression
// sees of a message (payload, text, json, key, ordering_key, properties,
// topic, publish_time, event_time, message_id, redelivery_count; see
// Vars); Env.Compile parses and type-checks one expression, reporting each
// problem at its offset inside the expression, so that a loader can point
// at the line and column in its file. Compiled steps make a Chain, which a
// Runner applies to one message at a time.
//
// Every evaluation is bounded by a cost limit (Options.CostLimit, CEL's
// cost units). An expression whose worst case CEL's estimator bounds
// within the limit, for messages within Options.MaxSize, runs without the
// run-time cost tracker (it cannot exceed the limit); any other, or any
// message larger than that, runs under the tracker, which stops the
// evaluation at the limit. A run-time error (a missing JSON field, a value
// of the wrong type, the cost limit) is that message's outcome, as the
// step's OnError says: dead-lettered with the error as the reason by
// default.
//
// The package knows nothing of brokers, pipelines files or the runtime:
// package pipelines compiles a file's steps with it (so that validation
// reports bad expressions), and package runtime runs them.
package steps
