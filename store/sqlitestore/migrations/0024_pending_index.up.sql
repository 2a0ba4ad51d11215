-- 0024: pending jobs (waiting for a dependency) by creation time. The per-kind
-- summary of /v1/stats (JobKindStats) counts the jobs created in the last
-- 24 hours through partial indexes only (finished jobs by finish time,
-- claimable and running ones by their runtime indexes); pending jobs had
-- none, so the query walked the whole table. The index is partial over a
-- small set: a job without dependencies never enters it.
CREATE INDEX IF NOT EXISTS jobs_pending ON jobs (created_at) WHERE state = 'pending';
