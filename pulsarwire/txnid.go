package pulsarwire

import "strconv"

// TxnID names a transaction: Most is the coordinator that owns it (the
// partition of the coordinators' topic), Least counts within it. Its text
// form is Apache Pulsar's, "(most,least)", for example "(0,5)".
type TxnID struct {
	Most, Least uint64
}

// String returns the text form.
func (id TxnID) String() string {
	b := make([]byte, 0, 2*20+3)
	b = append(b, '(')
	b = strconv.AppendUint(b, id.Most, 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, id.Least, 10)
	return string(append(b, ')'))
}

// TxnCoordinatorTopic is the partitioned topic whose partitions name the
// transaction coordinators: partition i's owner serves coordinator i. Its
// partition count is the number of coordinators; none (0) means the
// broker has transactions off.
const TxnCoordinatorTopic = "persistent://pulsar/system/transaction_coordinator_assign"
