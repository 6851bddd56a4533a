package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// A record written from two buffers lands as their concatenation, at its
// offset.
func TestWriteRecordAtWritesHeaderThenData(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdr, data := []byte("0123456789abcdef"), bytes.Repeat([]byte("xyz"), 50000)
	if n, err := writeRecordAt(f, hdr, data, 7); err != nil || n != len(hdr)+len(data) {
		t.Fatalf("writeRecordAt = %d, %v; want %d, nil", n, err, len(hdr)+len(data))
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	want := append(make([]byte, 7), append(hdr, data...)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("file holds %d bytes, not the record at offset 7", len(got))
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
