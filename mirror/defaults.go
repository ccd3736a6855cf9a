package mirror

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/kmirror/kmirror/coordinator"
)

// Directories of the default state stores under a file destination's root.
const (
	// StateStoreDir holds the coordinator.FileStore of the partition states
	// (__mirror_state).
	StateStoreDir = "__mirror_state"
	// ControllerLogDir holds the FileControllerLog of mirror definitions and desired
	// states (__mirror_controller).
	ControllerLogDir = "__mirror_controller"
)

// rootedDestination is a Destination that lives in a directory: a LocalDestination
// opened with OpenFileDestination, or a type that embeds one. Root is "" for one in
// memory.
type rootedDestination interface {
	Root() string
}

// openDefaultStores fills in the ControllerLog and Store the host left nil: for a
// destination with a root, the file stores under it (durable); otherwise the in-memory
// ones. It returns the stores it opened, which the Mirror closes.
func openDefaultStores(cfg *Config) ([]io.Closer, error) {
	root := ""
	if rd, ok := cfg.Destination.(rootedDestination); ok {
		root = rd.Root()
	}
	var owned []io.Closer
	if cfg.ControllerLog == nil {
		if root == "" {
			cfg.ControllerLog = &MemoryControllerLog{}
		} else {
			l, err := OpenFileControllerLog(filepath.Join(root, ControllerLogDir))
			if err != nil {
				return nil, err
			}
			cfg.ControllerLog = l
			owned = append(owned, l)
		}
	}
	if cfg.Store == nil {
		if root == "" {
			cfg.Store = coordinator.NewMemoryStore()
		} else {
			s, err := coordinator.NewFileStore(filepath.Join(root, StateStoreDir),
				coordinator.FileStoreOptions{NumPartitions: cfg.Coordinator.WithDefaults().NumPartitions})
			if err != nil {
				return nil, errors.Join(fmt.Errorf("mirror: default state store: %w", err), closeAll(owned))
			}
			cfg.Store = s
			owned = append(owned, s)
		}
	}
	return owned, nil
}

// closeAll closes cs in reverse order.
func closeAll(cs []io.Closer) error {
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		errs = append(errs, cs[i].Close())
	}
	return errors.Join(errs...)
}
