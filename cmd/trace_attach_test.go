package cmd

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/artproject/art/objects"
	"github.com/artproject/art/repo"
)

// TestAttachTrace: a session's log that cannot be stored is given up
// alone, the commit's transaction going on; a failure that ended the
// transaction itself (SQLite rolls back on a full disk) is an error, so
// that nothing more is written through it (each later statement would
// commit on its own: a branch at a commit whose trees were rolled back).
func TestAttachTrace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(tx *repo.Tx) (*objects.ID, error)
	}{
		{"stored", func(tx *repo.Tx) (*objects.ID, error) {
			id, _, err := tx.PutFile(bytes.NewReader([]byte("a log line\n")))
			return &id, err
		}},
		{"failed alone", func(tx *repo.Tx) (*objects.ID, error) {
			tx.PutFile(bytes.NewReader([]byte("half a log\n")))
			return nil, errors.New("the log's file went away")
		}},
		{"disk full", func(tx *repo.Tx) (*objects.ID, error) {
			var pages int64
			if err := tx.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
				return nil, err
			}
			if _, err := tx.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+2)); err != nil {
				return nil, err
			}
			big := make([]byte, 4<<20)
			rand.Read(big)
			id, _, err := tx.PutFile(bytes.NewReader(big))
			return &id, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := repo.Init(filepath.Join(t.TempDir(), "art.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			tx, err := r.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			before, _, _ := tx.PutFile(bytes.NewReader([]byte("the commit's own data\n")))
			id, lost, err := attachTrace(tx, tc.store)
			switch tc.name {
			case "stored":
				if id == nil || lost != nil || err != nil {
					t.Fatalf("attachTrace = %v, %v, %v", id, lost, err)
				}
			case "failed alone":
				if id != nil || lost == nil || err != nil {
					t.Fatalf("attachTrace = %v, %v, %v; want the log lost alone", id, lost, err)
				}
			case "disk full":
				if id != nil || lost == nil {
					t.Fatalf("attachTrace = %v, %v, %v; want the log lost", id, lost, err)
				}
				// SQLite rolls a transaction back by itself on a full
				// disk: that must come back as an error.
				if err == nil {
					t.Fatalf("attachTrace on a full disk: the log lost alone (%v), the transaction taken as whole", lost)
				}
			}
			if err != nil {
				return // the caller gives the transaction up
			}
			// The transaction goes on, whole: what it wrote before the
			// log is there after it commits.
			tx.Exec(`PRAGMA max_page_count = 1073741823`)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if _, err := objects.OpenFile(r, before); err != nil {
				t.Fatalf("the commit's own data after the log was given up: %v", err)
			}
		})
	}
}
