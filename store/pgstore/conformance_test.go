package pgstore

import (
	"testing"

	"github.com/idem-dev/idem/store"
	"github.com/idem-dev/idem/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newTestStore(t, 8) })
}
