package sqlitestore

import (
	"encoding/json"
	"fmt"

	"github.com/idem-dev/idem/store"
)

// heldBack tells budget b which of the scopes its spent limits kept the
// claim p from hold a job the claim could otherwise have taken
// (store.ClaimBudget.SpentScopes, HeldBack): one statement per queue with
// such scopes, none when no limit was found spent.
func heldBack(t *wtx, p *store.JobClaimParams, b *store.ClaimBudget, now int64) error {
	scopes := b.SpentScopes(p.Tenant)
	if len(scopes) == 0 {
		return nil
	}
	var (
		order    []string
		byQueue  = map[string][]string{}
		waiting  []store.FlowScope
		kindArgs = make([]any, len(p.Kinds))
	)
	for i, k := range p.Kinds {
		kindArgs[i] = k
	}
	for _, sc := range scopes {
		if _, ok := byQueue[sc.Queue]; !ok {
			order = append(order, sc.Queue)
		}
		byQueue[sc.Queue] = append(byQueue[sc.Queue], sc.Tenant)
	}
	for _, queue := range order {
		tenants, err := json.Marshal(byQueue[queue])
		if err != nil {
			return fmt.Errorf("held back: %w", err)
		}
		rows, err := t.query(qHeldBack(p.Kinds), append([]any{queue, now, string(tenants)}, kindArgs...)...)
		if err != nil {
			return fmt.Errorf("held back: %w", err)
		}
		for rows.Next() {
			var tenant string
			if err := rows.Scan(&tenant); err != nil {
				rows.Close()
				return fmt.Errorf("held back: %w", err)
			}
			waiting = append(waiting, store.FlowScope{Tenant: tenant, Queue: queue})
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("held back: %w", err)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("held back: %w", err)
		}
	}
	b.HeldBack(p.Tenant, waiting)
	return nil
}

// qHeldBack returns the tenants of ?3 (a JSON array; "" = every tenant)
// with a job of queue ?1 the claim could take at ?2: claimable, due, of
// the claim's kinds (bound from ?4 on; none = any). Each is one probe of
// jobs_claim_tenant, as nextTenants' probes are.
func qHeldBack(kinds []string) string {
	probe := `SELECT 1 FROM jobs j WHERE j.queue = ?1 AND ` + sqlAvailable("j") + ` AND j.run_at <= ?2` + kindFilter(kinds, 4)
	return `SELECT t.value FROM json_each(?3) t WHERE t.value <> '' AND EXISTS (` + probe + ` AND j.tenant = t.value)
UNION ALL
SELECT '' WHERE EXISTS (SELECT 1 FROM json_each(?3) t WHERE t.value = '') AND EXISTS (` + probe + `)`
}
