package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
)

// Git modes of the entries of a snapshot's tree.
const (
	modeFile   = "100644"
	modeExec   = "100755"
	modeLink   = "120000"
	modeGitlnk = "160000"
)

// listTree lists the files of a snapshot's tree that keep accepts: one
// git process for the whole tree, whatever the number of files asked.
func (s *Store) listTree(ctx context.Context, w *workspace, tree string, keep func(path string) bool) (map[string]Entry, error) {
	out, err := s.run(ctx, w, nil, "ls-tree", "-r", "-z", "-l", "--full-tree", tree)
	if err != nil {
		return nil, fmt.Errorf("list snapshot %s: %w", tree, err)
	}
	files := map[string]Entry{}
	for rec := range bytes.SplitSeq(out, []byte{0}) {
		// "<mode> SP <type> SP <object> SP+ <size> TAB <path>"
		meta, path, ok := bytes.Cut(rec, []byte{'\t'})
		if !ok || !keep(string(path)) {
			continue
		}
		f := bytes.Fields(meta)
		if len(f) != 4 {
			return nil, fmt.Errorf("list snapshot %s: unexpected entry %q", tree, rec)
		}
		size, _ := strconv.ParseInt(string(f[3]), 10, 64) // "-" for a submodule
		files[string(path)] = Entry{Mode: string(f[0]), Blob: string(f[2]), Size: size}
	}
	return files, nil
}

// maxBatch bounds the bytes of the blobs one cat-file process returns, so
// that a restore of many large files holds a bounded amount in memory.
const maxBatch = 32 << 20

// blobs reads the contents of the given blobs from the store, a batch of
// up to maxBatch bytes per git process, and hands each to fn with its
// index in want.
func (s *Store) blobs(ctx context.Context, w *workspace, want []Entry, fn func(i int, data []byte) error) error {
	for from := 0; from < len(want); {
		n, total := 0, int64(0)
		for from+n < len(want) && (n == 0 || total+want[from+n].Size <= maxBatch) {
			total += want[from+n].Size
			n++
		}
		err := s.blobBatch(ctx, w, want[from:from+n], func(i int, data []byte) error { return fn(from+i, data) })
		if err != nil {
			return err
		}
		from += n
	}
	return nil
}

func (s *Store) blobBatch(ctx context.Context, w *workspace, want []Entry, fn func(i int, data []byte) error) error {
	var in bytes.Buffer
	for _, e := range want {
		in.WriteString(e.Blob)
		in.WriteByte('\n')
	}
	out, err := s.run(ctx, w, in.Bytes(), "cat-file", "--batch")
	if err != nil {
		return err
	}
	for i := range want {
		// "<object> SP <type> SP <size> LF <contents> LF", or
		// "<object> SP missing LF".
		head, rest, ok := bytes.Cut(out, []byte{'\n'})
		if !ok {
			return fmt.Errorf("cat-file: output cut short")
		}
		f := bytes.Fields(head)
		if len(f) == 0 {
			return fmt.Errorf("cat-file: bad header %q", head)
		}
		if len(f) != 3 {
			return fmt.Errorf("snapshot object %s is gone (snapshots older than the retention are pruned)", f[0])
		}
		size, err := strconv.Atoi(string(f[2]))
		if err != nil || size+1 > len(rest) {
			return fmt.Errorf("cat-file: bad header %q", head)
		}
		if err := fn(i, rest[:size]); err != nil {
			return err
		}
		out = rest[size+1:]
	}
	return nil
}
