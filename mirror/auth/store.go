package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/kmirror/kmirror/admin/scram"
	"github.com/kmirror/kmirror/internal/atomicfile"
)

// CredentialsFile is the name of the credentials file in a store's directory.
const CredentialsFile = "kmirror-scram-credentials.json"

// fileVersion is the format of CredentialsFile this package writes.
const fileVersion = 1

// ErrStore is wrapped by every error of reading or writing the credentials
// file.
var ErrStore = errors.New("auth: credential store")

// Store is the SCRAM credentials of a site; safe for concurrent use.
type Store struct {
	dir string // "" for a memory store

	mu    sync.Mutex                             // guards users; held across a write so writes are ordered
	users map[string]map[string]scram.Credential // user -> mechanism name -> credential
}

// fileCredential is one credential in the file.
type fileCredential struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

type fileData struct {
	Version int                                  `json:"version"`
	Users   map[string]map[string]fileCredential `json:"users"`
}

// NewMemoryStore returns an empty store that keeps nothing on disk.
func NewMemoryStore() *Store { return &Store{users: map[string]map[string]scram.Credential{}} }

// OpenStore opens the store of dir (CredentialsFile in it; none yet is an
// empty store). A file of a newer format, or one whose credentials are
// outside the bounds (scram.Credential.Check), is refused.
func OpenStore(dir string) (*Store, error) {
	s := &Store{dir: dir, users: map[string]map[string]scram.Credential{}}
	path := filepath.Join(dir, CredentialsFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStore, err)
	}
	var fd fileData
	if err := json.Unmarshal(data, &fd); err != nil {
		return nil, fmt.Errorf("%w: corrupt %s: %w", ErrStore, path, err)
	}
	if fd.Version != fileVersion {
		return nil, fmt.Errorf("%w: %s has format %d, this kmirror reads %d", ErrStore, path, fd.Version, fileVersion)
	}
	for user, byMech := range fd.Users {
		for name, fc := range byMech {
			m, ok := scram.ByName(name)
			if !ok {
				return nil, fmt.Errorf("%w: %s: user %q has unknown mechanism %q", ErrStore, path, user, name)
			}
			c := scram.Credential{Mechanism: m, Salt: fc.Salt, Iterations: fc.Iterations, StoredKey: fc.StoredKey, ServerKey: fc.ServerKey}
			if err := c.Check(); err != nil {
				return nil, fmt.Errorf("%w: %s: user %q %s: %w", ErrStore, path, user, name, err)
			}
			if user == "" {
				return nil, fmt.Errorf("%w: %s: empty user name", ErrStore, path)
			}
			if s.users[user] == nil {
				s.users[user] = map[string]scram.Credential{}
			}
			s.users[user][name] = c
		}
	}
	return s, nil
}

// ScramCredential implements admin.CredentialStore.
func (s *Store) ScramCredential(m scram.Mechanism, user string) (scram.Credential, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.users[user][m.Name]
	return c, ok, nil
}

// Users returns the user names with at least one credential, sorted.
func (s *Store) Users() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.users))
	for u := range s.users {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// Mechanisms returns the mechanisms user has a credential for, SHA-256
// first, with their iterations.
func (s *Store) Mechanisms(user string) []scram.Credential {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []scram.Credential
	for _, m := range scram.Mechanisms() {
		if c, ok := s.users[user][m.Name]; ok {
			out = append(out, c)
		}
	}
	return out
}

// Change is one credential to set (Credential set) or remove (Delete).
type Change struct {
	User       string
	Mechanism  scram.Mechanism
	Credential *scram.Credential // nil: delete the user's credential for Mechanism
}

// Apply makes the changes and persists them before it returns (an error
// leaves the store and its file as they were). Each change must have a
// user; a credential must pass Check and be of the change's mechanism.
func (s *Store) Apply(changes []Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[string]map[string]scram.Credential, len(s.users))
	for u, byMech := range s.users {
		next[u] = make(map[string]scram.Credential, len(byMech))
		for k, c := range byMech {
			next[u][k] = c
		}
	}
	for _, ch := range changes {
		if ch.User == "" {
			return errors.New("auth: empty user name")
		}
		if ch.Credential == nil {
			delete(next[ch.User], ch.Mechanism.Name)
			if len(next[ch.User]) == 0 {
				delete(next, ch.User)
			}
			continue
		}
		if err := ch.Credential.Check(); err != nil {
			return err
		}
		if ch.Credential.Mechanism.Name != ch.Mechanism.Name {
			return fmt.Errorf("auth: a %s credential given for %s", ch.Credential.Mechanism.Name, ch.Mechanism.Name)
		}
		if next[ch.User] == nil {
			next[ch.User] = map[string]scram.Credential{}
		}
		next[ch.User][ch.Mechanism.Name] = *ch.Credential
	}
	if err := s.writeLocked(next); err != nil {
		return err
	}
	s.users = next
	return nil
}

// writeLocked persists users (nothing for a memory store).
func (s *Store) writeLocked(users map[string]map[string]scram.Credential) error {
	if s.dir == "" {
		return nil
	}
	fd := fileData{Version: fileVersion, Users: map[string]map[string]fileCredential{}}
	for u, byMech := range users {
		fd.Users[u] = map[string]fileCredential{}
		for name, c := range byMech {
			fd.Users[u][name] = fileCredential{Salt: c.Salt, Iterations: c.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey}
		}
	}
	data, err := json.MarshalIndent(fd, "", "  ") // map keys are sorted: the same store writes the same bytes
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	if err := atomicfile.WriteFile(s.dir, CredentialsFile, data, 0o600); err != nil {
		return fmt.Errorf("%w: write %s: %w", ErrStore, filepath.Join(s.dir, CredentialsFile), err)
	}
	return nil
}
