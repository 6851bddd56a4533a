package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A record written from two buffers lands as their concatenation, at its
// offset.
// Both ways of writing (raw, and told to the runtime at --sync) alike.
func TestWriteRecordAtWritesHeaderThenData(t *testing.T) {
	for name, write := range map[string]func(*os.File, []byte, []byte, int64) (int, error){
		"raw": writeRecordAt, "synced": writeRecordAtSynced,
	} {
		f, err := os.Create(filepath.Join(t.TempDir(), "f"))
		if err != nil {
			t.Fatal(err)
		}
		hdr, data := []byte("0123456789abcdef"), bytes.Repeat([]byte("xyz"), 50000)
		if n, err := write(f, hdr, data, 7); err != nil || n != len(hdr)+len(data) {
			t.Fatalf("%s: writeRecordAt = %d, %v; want %d, nil", name, n, err, len(hdr)+len(data))
		}
		f.Close()
		got, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		want := append(make([]byte, 7), append(hdr, data...)...)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: file holds %d bytes, not the record at offset 7", name, len(got))
		}
	}
}

// readAt reads as os.File.ReadAt does: all of the buffer, or what the file
// holds and io.EOF.
func TestReadAtIsReadAt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	content := bytes.Repeat([]byte("0123456789"), 30000)
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct{ off, n int }{{0, 300000}, {5, 1000}, {299990, 10}, {299990, 20}, {300000, 5}, {400000, 5}} {
		got, want := make([]byte, c.n), make([]byte, c.n)
		n, err := readAt(f, got, int64(c.off))
		wn, werr := f.ReadAt(want, int64(c.off))
		if n != wn || !errors.Is(err, werr) && err != werr || !bytes.Equal(got[:n], want[:wn]) {
			t.Errorf("readAt(%d bytes at %d) = %d, %v; ReadAt = %d, %v", c.n, c.off, n, err, wn, werr)
		}
	}
}

// After a short write the rest starts where it stopped, across buffers.
func TestAdvanceSkipsWhatWasWritten(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "abc|defg"}, {2, "c|defg"}, {3, "defg"}, {5, "fg"}, {7, ""}} {
		iov := advance([][]byte{[]byte("abc"), []byte("defg")}, c.n)
		var got []string
		for _, b := range iov {
			got = append(got, string(b))
		}
		if s := join(got); s != c.want {
			t.Errorf("advance by %d leaves %q, want %q", c.n, s, c.want)
		}
	}
}

func join(parts []string) string {
	var b bytes.Buffer
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(p)
	}
	return b.String()
}
