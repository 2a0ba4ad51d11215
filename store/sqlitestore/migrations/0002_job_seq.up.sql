-- 0002: the job id high-water mark.
-- Job ids are allocated by the store (the writer), not by AUTOINCREMENT,
-- which costs a sqlite_sequence read and write per INSERT statement. New ids
-- continue from max(max(jobs.id), job_seq.seq); job_seq.seq is raised only
-- when jobs are deleted, so a deleted job's id is never given again.
CREATE TABLE job_seq (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
);
INSERT INTO job_seq (id, seq) SELECT 1, COALESCE(max(id), 0) FROM jobs;
