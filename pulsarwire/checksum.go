package pulsarwire

import "hash/crc32"

// castagnoli is a read-only lookup table; crc32 uses hardware CRC32C
// instructions behind it where the CPU has them.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC32C (Castagnoli) the protocol puts after 0x0e01.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
