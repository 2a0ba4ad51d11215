package sqlitestore

import (
	"testing"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return openTest(t, nil) })
}
