package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Segment file layout:
//
//	header: "SRSEG\x00\x00\x01" | base id u64          (16 bytes)
//	record: length u32 | crc32c u32 | publish time i64 | data
//
// Integers are little-endian. The crc covers length, publish time and data.
// A record's id is its segment's base id plus its position; the base id is
// also in the file name (%020d.seg) so a directory listing sorts by id.
const (
	segMagic      = "SRSEG\x00\x00\x01"
	segHeaderSize = 16
	recHeaderSize = 16
	segSuffix     = ".seg"

	// MaxEntryBytes bounds one entry (Pulsar's own default limit is 5 MiB).
	MaxEntryBytes = 256 << 20

	// indexEvery is the gap in bytes between points of the sparse index: a
	// read of an old entry starts at most this far before it.
	indexEvery = 64 << 10
)

// indexPoint marks a record that starts a block of the sparse index.
// maxTime is the largest publish time in the block (up to the next point),
// which lets SeekTime skip whole blocks even if times are not monotonic.
type indexPoint struct {
	id      uint64
	off     int64
	maxTime int64
}

// addToIndex accounts for the record id at byte off: it starts a new point
// once the last one is indexEvery bytes behind, else raises the last
// point's maxTime.
func addToIndex(index []indexPoint, id uint64, off, publishTime int64) []indexPoint {
	if k := len(index); k > 0 && off-index[k-1].off < indexEvery {
		index[k-1].maxTime = max(index[k-1].maxTime, publishTime)
		return index
	}
	return append(index, indexPoint{id: id, off: off, maxTime: publishTime})
}

// segment is one file of a topic's log (or, in memory mode, the one virtual
// segment whose size counts bytes and which has no file).
//
// Fields other than the noted ones are guarded by the owning Log's mu.
type segment struct {
	base    uint64
	path    string // "" in memory mode
	size    int64  // bytes of whole records plus header
	index   []indexPoint
	maxTime int64 // largest publish time in the segment
	indexed bool  // index and maxTime are built (sealed segments index lazily)

	refs    int  // readers using the file now
	removed bool // trimmed: unlink once refs drops to 0

	fileMu sync.Mutex // guards f and serializes lazy indexing
	f      *os.File
}

func segName(base uint64) string { return fmt.Sprintf("%020d%s", base, segSuffix) }

func parseSegName(name string) (uint64, bool) {
	s, ok := strings.CutSuffix(name, segSuffix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// file opens the segment for reading on first use; sealed segments found at
// open stay closed until something reads them, so idle history holds no
// descriptors.
func (sg *segment) file() (*os.File, error) {
	sg.fileMu.Lock()
	defer sg.fileMu.Unlock()
	if sg.f == nil {
		f, err := os.Open(sg.path)
		if err != nil {
			return nil, err
		}
		sg.f = f
	}
	return sg.f, nil
}

// destroy closes the file and, for a trimmed segment, deletes it. Only called
// once no reader holds a reference.
func (sg *segment) destroy(unlink bool) {
	sg.fileMu.Lock()
	if sg.f != nil {
		sg.f.Close()
		sg.f = nil
	}
	sg.fileMu.Unlock()
	if unlink && sg.path != "" {
		os.Remove(sg.path)
	}
}

func putRecordHeader(b []byte, publishTime int64, data []byte) {
	binary.LittleEndian.PutUint32(b[0:], uint32(len(data)))
	binary.LittleEndian.PutUint64(b[8:], uint64(publishTime))
	binary.LittleEndian.PutUint32(b[4:], recordCRC(b, data))
}

func recordCRC(hdr, data []byte) uint32 {
	c := crc32.Update(0, castagnoli, hdr[0:4])
	c = crc32.Update(c, castagnoli, hdr[8:16])
	return crc32.Update(c, castagnoli, data)
}

func recordOK(hdr, data []byte) bool {
	return binary.LittleEndian.Uint32(hdr[4:]) == recordCRC(hdr, data)
}

// createSegment makes dir/<base>.seg with its header through a scratch file
// and a rename, so a segment file never exists without a whole header.
func createSegment(dir string, base uint64, sync bool) (*os.File, string, error) {
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return nil, "", err
	}
	var hdr [segHeaderSize]byte
	copy(hdr[:], segMagic)
	binary.LittleEndian.PutUint64(hdr[8:], base)
	path := filepath.Join(dir, segName(base))
	_, err = f.Write(hdr[:])
	if err == nil && sync {
		err = f.Sync()
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err == nil && sync {
		err = syncDir(dir)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, "", fmt.Errorf("store: create segment %s: %w", path, err)
	}
	return f, path, nil
}

func checkSegHeader(r io.ReaderAt, path string, base uint64) error {
	var hdr [segHeaderSize]byte
	if _, err := r.ReadAt(hdr[:], 0); err != nil {
		return &CorruptError{File: path, Reason: "short segment header"}
	}
	if string(hdr[:8]) != segMagic {
		return &CorruptError{File: path, Reason: "not a segment file"}
	}
	if got := binary.LittleEndian.Uint64(hdr[8:]); got != base {
		return &CorruptError{File: path, Reason: fmt.Sprintf("header says base id %d, name says %d", got, base)}
	}
	return nil
}

// blankHeader reports a file too short for a segment header, or whose header
// is all zeros: never written, as opposed to overwritten with something else.
func blankHeader(r io.ReaderAt, size int64) bool {
	if size < segHeaderSize {
		return true
	}
	var hdr [segHeaderSize]byte
	if _, err := r.ReadAt(hdr[:], 0); err != nil {
		return false
	}
	return hdr == [segHeaderSize]byte{}
}

// scanResult is what a full pass over a segment learns.
type scanResult struct {
	index   []indexPoint
	count   uint64 // whole, valid records
	end     int64  // offset just past the last valid record
	maxTime int64
	torn    bool // the bytes from end to the file's size are a torn tail
}

// scanSegment checks every record of a segment of the given size and builds
// its sparse index. For the last segment (tail) an invalid record is a torn
// write when nothing valid follows it; anywhere else it is corruption.
func scanSegment(r io.ReaderAt, path string, base uint64, size int64, tail bool) (scanResult, error) {
	res := scanResult{end: segHeaderSize, maxTime: math.MinInt64}
	if err := checkSegHeader(r, path, base); err != nil {
		return res, err
	}
	br := bufio.NewReaderSize(io.NewSectionReader(r, segHeaderSize, size-segHeaderSize), 1<<20)
	var hdr [recHeaderSize]byte
	var data []byte
	off := int64(segHeaderSize)
	for off < size {
		why := ""
		if size-off < recHeaderSize {
			why = "short record header"
		} else if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return res, fmt.Errorf("store: read %s: %w", path, err)
		} else if n := int64(binary.LittleEndian.Uint32(hdr[0:])); n > MaxEntryBytes || n > size-off-recHeaderSize {
			why = "record length past end of file"
		} else {
			if int64(cap(data)) < n {
				data = make([]byte, n)
			}
			data = data[:n]
			if _, err := io.ReadFull(br, data); err != nil {
				return res, fmt.Errorf("store: read %s: %w", path, err)
			}
			if !recordOK(hdr[:], data) {
				why = "checksum mismatch"
			}
		}
		if why != "" {
			if !tail {
				return res, &CorruptError{File: path, Offset: off, Reason: why}
			}
			if at, found, err := findRecord(r, off+1, size); err != nil {
				return res, fmt.Errorf("store: read %s: %w", path, err)
			} else if found {
				return res, &CorruptError{File: path, Offset: off, Reason: fmt.Sprintf("%s, with a valid record after it at offset %d", why, at)}
			}
			res.torn = true
			return res, nil
		}
		pt := int64(binary.LittleEndian.Uint64(hdr[8:]))
		id := base + res.count
		res.index = addToIndex(res.index, id, off, pt)
		res.maxTime = max(res.maxTime, pt)
		res.count++
		off += recHeaderSize + int64(len(data))
		res.end = off
	}
	return res, nil
}

// findRecord looks for any valid record starting in [from, size). A torn
// write leaves at most one partial record at the end of a file, so finding a
// valid one after a bad one means damage in the middle, never a torn tail.
// The search gives up (reporting found, to stay on the safe side) after
// checksumming maxResync bytes, which only adversarial content reaches.
func findRecord(r io.ReaderAt, from, size int64) (int64, bool, error) {
	const maxResync = 1 << 30
	if size-from < recHeaderSize {
		return 0, false, nil
	}
	buf := make([]byte, size-from)
	if _, err := r.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return 0, false, err
	}
	work := 0
	for i := 0; i+recHeaderSize <= len(buf); i++ {
		n := int(binary.LittleEndian.Uint32(buf[i:]))
		if n > MaxEntryBytes || n > len(buf)-i-recHeaderSize {
			continue
		}
		if work += n + recHeaderSize; work > maxResync {
			return from + int64(i), true, nil
		}
		if recordOK(buf[i:i+recHeaderSize], buf[i+recHeaderSize:i+recHeaderSize+n]) {
			return from + int64(i), true, nil
		}
	}
	return 0, false, nil
}
