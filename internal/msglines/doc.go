// Package msglines holds messages as lines of text, the one format of
// the programs' inputs and outputs: `streamrun run --input` and
// `streamrun produce --input` read a file's lines as messages (Lines,
// Decoder), `streamrun consume` prints the messages it receives (Writer),
// and what consume prints as JSON, produce reads back. Source is what
// produce publishes: an input's lines or the messages it makes
// (Generated), a fixed payload the broker would refuse refused first.
package msglines
