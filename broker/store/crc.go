package store

import (
	"encoding/binary"
	"hash/crc32"
)

// Deriving a record's checksum from a checksum its data already carries,
// instead of reading the data a second time: a message's own crc32c covers
// all of it but a few bytes. crc32cCombine gives crc32c(A‖B) from
// crc32c(A), crc32c(B) and len(B), by arithmetic on polynomials over GF(2)
// modulo the Castagnoli polynomial (bit-reflected, as crc32 computes).

const castagnoliReflected = 0x82f63b78

// combineMinBytes is the smallest known-sum rest worth combining: below it
// the table look-ups cost about as much as the checksum itself.
const combineMinBytes = 2 << 10

// multModP returns a·b modulo the polynomial, both reflected.
func multModP(a, b uint32) uint32 {
	m := uint32(1) << 31
	var p uint32
	for {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				break
			}
		}
		m >>= 1
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReflected
		} else {
			b >>= 1
		}
	}
	return p
}

// x2n holds x^(2^k) modulo the polynomial, for k < 32.
var x2n = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = multModP(p, p)
	}
	return t
}()

// xPow8n returns x^(8n) modulo the polynomial: what shifting a checksum
// over n more bytes multiplies it by.
func xPow8n(n uint64) uint32 {
	p := uint32(1) << 31 // x^0
	k := 3               // 8n = n·2^3
	for n != 0 {
		if n&1 != 0 {
			p = multModP(x2n[k&31], p)
		}
		n >>= 1
		k++
	}
	return p
}

// crc32cCombine returns crc32c(A‖B) given crc1 = crc32c(A),
// crc2 = crc32c(B) and n = len(B).
func crc32cCombine(crc1, crc2 uint32, n uint64) uint32 {
	return multModP(xPow8n(n), crc1) ^ crc2
}

// putRecordHeaderKnown is putRecordHeader for data whose crc32c from byte
// skip on is restSum, already known (and checked) by the caller.
func putRecordHeaderKnown(b []byte, publishTime int64, data []byte, skip int, restSum uint32) {
	binary.LittleEndian.PutUint32(b[0:], uint32(len(data)))
	binary.LittleEndian.PutUint64(b[8:], uint64(publishTime))
	c := crc32.Update(0, castagnoli, b[0:4])
	c = crc32.Update(c, castagnoli, b[8:16])
	c = crc32.Update(c, castagnoli, data[:skip])
	binary.LittleEndian.PutUint32(b[4:], crc32cCombine(c, restSum, uint64(len(data)-skip)))
}
