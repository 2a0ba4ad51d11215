package sqlitestore

// The repair of pending dependants whose release was missed
// (JobDependantsRepair).
const (
	// qRepairCandidates walks the pending jobs created before ?1, after
	// the cursor (?2 created_at, ?3 id), up to ?4, through the partial
	// index jobs_pending (created_at, then the rowid: the id), so a call
	// reads ?4 index entries and never the finished history.
	qRepairCandidates = `SELECT id, created_at FROM jobs INDEXED BY jobs_pending
WHERE state = 'pending' AND created_at < ?1 AND created_at >= ?2 AND (created_at > ?2 OR id > ?3)
ORDER BY created_at, id LIMIT ?4`

	// qRepairRelease releases the pending jobs of the JSON id list ?2
	// whose dependencies are satisfied, as qDependantsRelease does as of
	// ?1 (the same state and condition).
	qRepairRelease = `UPDATE jobs SET state = ` + sqlReleasedState + `
WHERE state = 'pending' AND id IN (SELECT value FROM json_each(?2)) AND ` + sqlDepsSatisfied + `
RETURNING id, queue, state`

	// qRepairCancel cancels at ?1 the pending jobs of the JSON id list ?2
	// that wait for their dependencies to complete and have a dead or
	// cancelled one (sqlRetryDepState), naming it as qDependantsCancel's
	// callers do (sqlDepCancelReason). It returns what cancelDependants'
	// callers need of each (onFinal).
	qRepairCancel = `UPDATE jobs SET state = 'cancelled', finished_at = ?1, last_error = ` + sqlDepCancelReason + `
WHERE state = 'pending' AND id IN (SELECT value FROM json_each(?2)) AND ` + sqlRetryDepState + ` = 'cancelled'
RETURNING id, tenant, idempotency_key, dedup_window_us, result_ttl_us`
)
