package store

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// tmpPrefix starts every scratch file name; escape never produces a name
// starting with '.', so scratch files cannot be mistaken for data.
const tmpPrefix = ".tmp-"

// maxEscaped bounds a file name made by escape, well below the 255 bytes most
// file systems allow, so long topic names still fit.
const maxEscaped = 160

// escape turns an opaque name (topic, cursor, meta key) into one file name.
// Only [a-z0-9_-] and inner dots pass through: upper case is escaped too, so
// "T" and "t" stay apart on case-insensitive file systems (macOS). A name too
// long for a file name keeps a readable prefix plus a hash of the whole name;
// the real name is always stored inside the file, so escape need not be
// reversible.
func escape(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	s := b.String()
	if len(s) <= maxEscaped {
		return s
	}
	cut := maxEscaped - 34
	// Never cut inside a %XX escape.
	if i := strings.LastIndexByte(s[:cut], '%'); i >= cut-2 {
		cut = i
	}
	sum := sha256.Sum256([]byte(name))
	return s[:cut] + "~" + hex.EncodeToString(sum[:16])
}

// A blob file holds one small value under its real key, checked by crc32c:
//
//	"SRB1" | crc32c(rest) u32 | key length u32 | key | value
const blobMagic = "SRB1"

func encodeBlob(key string, val []byte) []byte {
	b := make([]byte, 12+len(key)+len(val))
	copy(b, blobMagic)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(key)))
	copy(b[12:], key)
	copy(b[12+len(key):], val)
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(b[8:], castagnoli))
	return b
}

func readBlob(path string) (key string, val []byte, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	bad := func(why string) (string, []byte, error) {
		return "", nil, &CorruptError{File: path, Reason: why}
	}
	if len(b) < 12 || string(b[:4]) != blobMagic {
		return bad("not a blob file")
	}
	if crc32.Checksum(b[8:], castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return bad("checksum mismatch")
	}
	n := binary.LittleEndian.Uint32(b[8:])
	if uint64(n) > uint64(len(b)-12) {
		return bad("key length past end")
	}
	return string(b[12 : 12+n]), b[12+n:], nil
}

// writeBlob replaces dir/file atomically: a reader (or a restart after
// kill -9) sees the old blob or the new one, never a mix. With sync the file
// and the directory entry are on stable storage when it returns.
func writeBlob(dir, file, key string, val []byte, sync bool) error {
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return noSpace(err)
	}
	tmp := f.Name()
	_, err = f.Write(encodeBlob(key, val))
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, file))
	}
	if err != nil {
		os.Remove(tmp)
		return noSpace(err)
	}
	if sync {
		return syncDir(dir)
	}
	return nil
}

// removeFile deletes dir/file; a missing file is not an error.
func removeFile(dir, file string, sync bool) error {
	if err := os.Remove(filepath.Join(dir, file)); err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	if sync {
		return syncDir(dir)
	}
	return nil
}

// syncDir makes renames and removals in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// readBlobDir loads every blob in dir, keyed by the name stored inside, and
// deletes scratch files a crash left behind.
func readBlobDir(dir string) (map[string][]byte, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	m := make(map[string][]byte, len(des))
	for _, de := range des {
		p := filepath.Join(dir, de.Name())
		if strings.HasPrefix(de.Name(), tmpPrefix) {
			os.Remove(p)
			continue
		}
		if de.IsDir() {
			continue
		}
		k, v, err := readBlob(p)
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

func u64bytes(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func bytesU64(path string, b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, &CorruptError{File: path, Reason: "value is not 8 bytes"}
	}
	return binary.LittleEndian.Uint64(b), nil
}
