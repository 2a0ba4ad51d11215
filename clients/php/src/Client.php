<?php

declare(strict_types=1);

namespace Idem;

/**
 * A client of the idem HTTP API over curl. Jobs, results and problems are
 * associative arrays as in /v1/openapi.json; ids are strings.
 *
 * Every POST carries an Idempotency-Key (the caller's, or a random one per
 * call), and requests that got no answer, a 5xx, a 429, a 409 "key in
 * progress" or a 409 "conflict" (a concurrent change; nothing was done)
 * are retried with the same key and body, as the Go client does: a
 * retried enqueue answers the job the first attempt created.
 */
class Client
{
    use ClientResources;

    /** Retries after the first attempt, by default. */
    public const DEFAULT_MAX_RETRIES = 4;
    /** Seconds that bound the backoff between retries, by default. */
    public const DEFAULT_MIN_BACKOFF = 0.1;
    public const DEFAULT_MAX_BACKOFF = 5.0;

    private string $baseUrl;

    /** @var (callable(): bool)|null the check of interruptClaims */
    private $claimInterrupt = null;

    /** @var (callable(): bool)|null the check the request in flight polls (a claim's, while it runs) */
    private $abortCheck = null;

    /**
     * @param string      $baseUrl    such as "http://127.0.0.1:8080"
     * @param string      $apiKey     an API key (idem_…)
     * @param string|null $tenant     act in this tenant (admin keys only): Idem-Tenant
     * @param float       $timeout    seconds per request, beyond any long-poll wait
     * @param int         $maxRetries retries after the first attempt (0: none)
     * @param float       $minBackoff seconds: the exponential backoff with jitter
     * @param float       $maxBackoff between retries stays within these; a
     *                                Retry-After wins when longer, up to $maxBackoff
     */
    public function __construct(
        string $baseUrl,
        private string $apiKey,
        private ?string $tenant = null,
        private float $timeout = 30.0,
        private int $maxRetries = self::DEFAULT_MAX_RETRIES,
        private float $minBackoff = self::DEFAULT_MIN_BACKOFF,
        private float $maxBackoff = self::DEFAULT_MAX_BACKOFF,
    ) {
        $this->baseUrl = rtrim($baseUrl, '/');
        $this->maxRetries = max($this->maxRetries, 0);
        $this->minBackoff = max($this->minBackoff, 0.001);
        $this->maxBackoff = max($this->maxBackoff, $this->minBackoff);
    }

    /** A copy acting in another tenant (admin keys only). */
    public function withTenant(?string $tenant): self
    {
        $c = clone $this;
        $c->tenant = $tenant;
        return $c;
    }

    /**
     * enqueue enqueues a job: ['kind' => …, 'queue' => …, 'args' => […], …].
     * With an idempotency key (argument or 'idempotency_key'), a retry
     * answers the key's existing job. Without one the client makes a random
     * key for the call (the job's idempotency_key), so its own retries
     * never enqueue twice.
     *
     * @param array<string,mixed> $job
     * @return array{job: array<string,mixed>, existing: bool}
     */
    public function enqueue(array $job, ?string $idempotencyKey = null): array
    {
        if ($idempotencyKey === null || $idempotencyKey === '') {
            $idempotencyKey = isset($job['idempotency_key']) ? (string) $job['idempotency_key'] : null;
        }
        return $this->request('POST', '/v1/jobs', $job, self::keyHeader($idempotencyKey));
    }

    /** newKey returns a random idempotency key (32 hex digits). */
    public static function newKey(): string
    {
        return bin2hex(random_bytes(16));
    }

    /**
     * The Idempotency-Key header of a call: the key, or a random one for
     * null or "" (the server wants 1 or more characters; "0" is a key). A
     * key that cannot travel as a header (characters outside printable
     * ASCII, 0x20–0x7E) throws InvalidArgumentException: sent, a CR LF
     * would end the header and send a different key. A key that starts
     * with '"' (a JSON-encoded id) or with or before a space is sent as a
     * Structured Field string, quoted with '"' and '\' escaped.
     *
     * @return array{Idempotency-Key: string}
     */
    private static function keyHeader(?string $key): array
    {
        if ($key === null || $key === '') {
            return ['Idempotency-Key' => self::newKey()];
        }
        if (!preg_match('/^[\x20-\x7e]+$/', $key)) {
            throw new \InvalidArgumentException('an idempotency key is 1 or more printable ASCII characters (0x20-0x7E)');
        }
        // The server reads a value that starts with '"' as a Structured
        // Field string (RFC 8941: "a\"b" is the key a"b), and HTTP drops
        // the spaces around a header value: such keys go as sf-strings.
        if ($key[0] === '"' || $key[0] === ' ' || $key[-1] === ' ') {
            return ['Idempotency-Key' => '"' . addcslashes($key, '"\\') . '"'];
        }
        return ['Idempotency-Key' => $key];
    }

    /** pathSegment escapes one path segment; "." and ".." are percent-encoded (sent bare, they would name another resource). */
    private static function pathSegment(string $s): string
    {
        return match ($s) {
            '.' => '%2E',
            '..' => '%2E%2E',
            default => rawurlencode($s),
        };
    }

    /**
     * enqueueBatch enqueues up to 1000 jobs; each result is ['job', 'existing'] or ['error'].
     *
     * @param list<array<string,mixed>> $jobs
     * @return list<array<string,mixed>>
     */
    public function enqueueBatch(array $jobs, ?string $idempotencyKey = null): array
    {
        // array_values: a list with gaps (after array_filter, unset) would
        // be encoded as a JSON object, which the API refuses.
        return $this->request('POST', '/v1/jobs/batch', ['jobs' => array_values($jobs)], self::keyHeader($idempotencyKey))['results'];
    }

    /**
     * createBatch creates a batch and its jobs in one transaction, once per key
     * (a repeat answers ['batch' => …, 'existing' => true]). $onFinish is the
     * completion job: it runs once every job has finished, whatever the outcome,
     * and reads the outcomes with getBatch (its metadata carries idem_batch_id).
     *
     * @param list<array<string,mixed>> $jobs
     * @param array<string,mixed>|null $onFinish
     * @param array<string,mixed>|null $metadata
     * @return array{batch: array<string,mixed>, existing: bool}
     */
    public function createBatch(string $key, array $jobs, ?array $onFinish = null, ?array $metadata = null): array
    {
        $body = ['key' => $key, 'jobs' => array_values($jobs)];
        if ($onFinish !== null) {
            $body['on_finish'] = $onFinish;
        }
        if ($metadata !== null) {
            $body['metadata'] = $metadata;
        }
        // The body's key, repeated as the header, makes retries safe; "" gets the server's 400.
        return $this->request('POST', '/v1/batches', $body, $key === '' ? [] : self::keyHeader($key));
    }

    /**
     * cancelBatch cancels the jobs of a batch that have not started (as the
     * Go client's BatchCancel); its on_finish job runs once the rest have
     * finished.
     *
     * @return array<string,mixed> the batch
     */
    public function cancelBatch(string $id, ?string $idempotencyKey = null): array
    {
        return $this->request('POST', '/v1/batches/' . rawurlencode($id) . '/cancel', null, self::keyHeader($idempotencyKey));
    }

    /** @return array<string,mixed> the batch with its counts, jobs and on_finish job */
    public function getBatch(string $id): array
    {
        return $this->request('GET', '/v1/batches/' . rawurlencode($id));
    }

    /** @return array<string,mixed> */
    public function getJob(string $id): array
    {
        return $this->request('GET', '/v1/jobs/' . rawurlencode($id));
    }

    /**
     * listJobs yields every job the query selects, newest first, page by page.
     *
     * @param array<string,mixed> $query state (a string, comma-separated, or a list), queue, kind,
     *   partition_key, idempotency_key, since, until, finished_since, error_code, resolved (a bool),
     *   limit; another name is refused by the server (400 naming it)
     * @return \Generator<int, array<string,mixed>>
     */
    public function listJobs(array $query = [], string $path = '/v1/jobs'): \Generator
    {
        for (;;) {
            $page = $this->request('GET', $path . self::queryString($query));
            foreach ($page['jobs'] as $job) {
                yield $job;
            }
            if (empty($page['next_cursor'])) {
                return;
            }
            $query['cursor'] = $page['next_cursor'];
        }
    }

    /** @return \Generator<int, array<string,mixed>> */
    public function listDLQ(array $query = []): \Generator
    {
        return $this->listJobs($query, '/v1/dlq');
    }

    /**
     * claim claims up to $limit jobs of $queues, waiting up to $wait (a Go
     * duration such as "20s") for one.
     *
     * @param list<string> $queues
     * @return list<array<string,mixed>> claimed jobs, each with lease_token
     */
    public function claim(array $queues, string $workerId, int $limit = 1, string $lease = '30s', string $wait = '0s', ?array $kinds = null): array
    {
        return $this->claimDetail($queues, $workerId, $limit, $lease, $wait, $kinds)['jobs'];
    }

    /**
     * claimDetail is claim that also reports throttling (the Go client's
     * ClaimDetail): 'throttled' is true when a rate or concurrency limit
     * held work back and nothing was claimed; for a spent rate limit
     * 'next_available_at' (RFC 3339) and 'retry_after' (a Go duration, also
     * as 'retry_after_seconds') say when its budget returns, else null and
     * 0.0. A pull worker claims again with about that wait rather than
     * polling.
     *
     * @param list<string> $queues
     * @return array{jobs: list<array<string,mixed>>, throttled: bool, next_available_at: ?string, retry_after: ?string, retry_after_seconds: float}
     */
    public function claimDetail(array $queues, string $workerId, int $limit = 1, string $lease = '30s', string $wait = '0s', ?array $kinds = null): array
    {
        $body = ['queues' => array_values($queues), 'worker_id' => $workerId, 'limit' => $limit, 'lease' => $lease, 'wait' => $wait];
        if ($kinds) {
            $body['kinds'] = array_values($kinds);
        }
        $this->abortCheck = $this->claimInterrupt;
        try {
            $r = $this->request('POST', '/v1/claim', $body, self::keyHeader(null), self::seconds($wait));
        } catch (IdemException $e) {
            if ($e->status === 0 && $this->abortCheck !== null && ($this->abortCheck)()) {
                return ['jobs' => [], 'throttled' => false, 'next_available_at' => null, 'retry_after' => null, 'retry_after_seconds' => 0.0];
            }
            throw $e;
        } finally {
            $this->abortCheck = null;
        }
        $retryAfter = isset($r['retry_after']) && $r['retry_after'] !== '' ? (string) $r['retry_after'] : null;
        return [
            'jobs' => $r['jobs'] ?? [],
            'throttled' => ($r['throttled'] ?? false) === true,
            'next_available_at' => $r['next_available_at'] ?? null,
            'retry_after' => $retryAfter,
            'retry_after_seconds' => $retryAfter === null ? 0.0 : max(self::seconds($retryAfter), 0.0),
        ];
    }

    /**
     * interruptClaims sets a check that a claim's long poll (claim,
     * claimDetail) calls while it waits, about once a second: once it
     * returns true the claim ends at once, answers no jobs, and is not
     * retried. null removes it; the check it replaces is returned. Worker
     * sets one for its run, so that a SIGTERM ends a long poll promptly
     * instead of after its whole wait.
     *
     * @param (callable(): bool)|null $check
     * @return (callable(): bool)|null
     */
    public function interruptClaims(?callable $check): ?callable
    {
        $prev = $this->claimInterrupt;
        $this->claimInterrupt = $check;
        return $prev;
    }

    /** heartbeat extends a claimed job's lease; it returns the new end (RFC 3339). */
    public function heartbeat(array $job, ?string $lease = null): string
    {
        $body = ['lease_token' => $job['lease_token']];
        if ($lease !== null) {
            $body['lease'] = $lease;
        }
        return $this->request('POST', '/v1/jobs/' . rawurlencode($job['id']) . '/heartbeat', $body, self::keyHeader(null))['lease_expires_at'];
    }

    /** complete completes a claimed job with an optional JSON result. */
    public function complete(array $job, mixed $result = null): array
    {
        $body = ['lease_token' => $job['lease_token']];
        if ($result !== null) {
            $body['result'] = $result;
        }
        return $this->request('POST', '/v1/jobs/' . rawurlencode($job['id']) . '/complete', $body, self::keyHeader(null));
    }

    /**
     * fail fails a claimed job: retried later unless $retry is false or
     * attempts are used up. $retryAfter (a Go duration) overrides the
     * backoff; $errorCode is the failure's code (seed 004's error_code,
     * printable ASCII without spaces), which lists and requeues filter by.
     */
    public function fail(array $job, string $error, ?bool $retry = null, ?string $retryAfter = null, ?string $errorCode = null): array
    {
        $body = ['lease_token' => $job['lease_token'], 'error' => $error];
        if ($retry !== null) {
            $body['retry'] = $retry;
        }
        if ($retryAfter !== null) {
            $body['retry_after'] = $retryAfter;
        }
        if ($errorCode !== null && $errorCode !== '') {
            $body['error_code'] = $errorCode;
        }
        return $this->request('POST', '/v1/jobs/' . rawurlencode($job['id']) . '/fail', $body, self::keyHeader(null));
    }

    /** cancel cancels a job (409 wrong-state when it is finished). */
    public function cancel(string $id, ?string $idempotencyKey = null): array
    {
        return $this->request('POST', '/v1/jobs/' . rawurlencode($id) . '/cancel', null, self::keyHeader($idempotencyKey));
    }

    /** retry makes a dead or cancelled job available again ($runAt in the future, RFC 3339: scheduled). */
    public function retry(string $id, ?string $runAt = null, ?string $idempotencyKey = null): array
    {
        $body = $runAt === null ? null : ['run_at' => $runAt];
        return $this->request('POST', '/v1/jobs/' . rawurlencode($id) . '/retry', $body, self::keyHeader($idempotencyKey));
    }

    /** @return list<array<string,mixed>> the attempts of a job, oldest first */
    public function attempts(string $id): array
    {
        return $this->request('GET', '/v1/jobs/' . rawurlencode($id) . '/attempts')['attempts'];
    }

    /**
     * replay enqueues copies of the finished jobs (completed, dead,
     * cancelled) $filter selects (at most 10000; into $queue when given)
     * and returns how many; replayReport also tells the unfinished jobs
     * skipped. A copy has the original's kind, args and metadata plus
     * metadata.replay_of, no idempotency key, and runs now. The call's
     * Idempotency-Key makes its retries replay once.
     *
     * @param array<string,mixed> $filter state, queue, kind, partition_key, idempotency_key, since, until, error_code, resolved
     */
    public function replay(array $filter, ?string $queue = null, ?string $idempotencyKey = null): int
    {
        return $this->replayReport($filter, $queue, $idempotencyKey)['enqueued'];
    }

    /**
     * replayReport is replay with the count of unfinished jobs skipped (the
     * Go client's ReplayReport): a replay copies only finished jobs, and the
     * unfinished ones $filter selects (pending, scheduled, available,
     * running, retryable) are not copied (each still runs as itself) but
     * counted in 'skipped'.
     *
     * @param array<string,mixed> $filter as replay's
     * @return array{enqueued: int, skipped: int}
     */
    public function replayReport(array $filter, ?string $queue = null, ?string $idempotencyKey = null): array
    {
        $body = ['filter' => (object) $filter];
        if ($queue !== null && $queue !== '') {
            $body['queue'] = $queue;
        }
        $r = $this->request('POST', '/v1/jobs/replay', $body, self::keyHeader($idempotencyKey));
        return ['enqueued' => (int) $r['enqueued'], 'skipped' => (int) ($r['skipped'] ?? 0)];
    }

    /**
     * dlqDelete deletes a dead job with its attempts. As the Go client's
     * DLQDelete, a retry (after no answer or a 5xx) that finds it gone
     * returns: the earlier attempt may have deleted it. A 404 is thrown only
     * when the first attempt answers it.
     */
    public function dlqDelete(string $id): void
    {
        $this->deleteGone('/v1/dlq/' . rawurlencode($id), '/v1/jobs/' . rawurlencode($id));
    }

    /**
     * putSubscription creates or replaces a subscription of a topic:
     * ['url' => …, 'secret' => …, 'kinds' => […], 'max_attempts' => …,
     * 'timeout' => …]. Without 'secret' the server generates one and returns
     * it once, when the PUT creates the subscription; a replacing PUT keeps
     * the stored secrets; '' sends unsigned pushes. 'created' reports that
     * this PUT created it.
     *
     * @param array<string,mixed> $subscription
     * @return array{subscription: array<string,mixed>, created: bool}
     */
    public function putSubscription(string $topic, string $name, array $subscription): array
    {
        $s = $this->request('PUT', self::topicPath($topic, '/subscriptions/' . self::pathSegment($name)), $subscription);
        return ['subscription' => $s, 'created' => $s['created_at'] === $s['updated_at']];
    }

    /** @return list<array<string,mixed>> the subscriptions of a topic (never their secrets) */
    public function subscriptions(string $topic): array
    {
        return $this->request('GET', self::topicPath($topic, '/subscriptions'))['subscriptions'];
    }

    /**
     * getSubscription returns one subscription of a topic (never its
     * secret); an unknown one throws an IdemException with status 404.
     *
     * @return array<string,mixed>
     */
    public function getSubscription(string $topic, string $name): array
    {
        return $this->request('GET', self::topicPath($topic, '/subscriptions/' . self::pathSegment($name)));
    }

    /** deleteSubscription deletes a subscription; as dlqDelete, a retry that finds it gone returns. */
    public function deleteSubscription(string $topic, string $name): void
    {
        $this->deleteGone(self::topicPath($topic, '/subscriptions/' . self::pathSegment($name)));
    }

    /**
     * publish publishes an event to a topic: ['payload' => …, 'key' => …,
     * 'type' => …, 'partition_key' => …, 'metadata' => […]]; one delivery
     * job per matching subscription. A repeated key answers the existing
     * event with 'existing' => true. Without a key every call is a new
     * event; the call's random Idempotency-Key, which the server takes as
     * the event key when the body has none, makes its retries publish once.
     *
     * @param array<string,mixed> $event
     * @return array{event_id: string, deliveries: int, existing: bool}
     */
    public function publish(string $topic, array $event): array
    {
        // A key the header can carry travels as the header too (the same
        // key: a header and a body key that differ are refused).
        $key = $event['key'] ?? null;
        if (!is_string($key) || !preg_match('/^[\x20-\x7e]+$/', $key)) {
            $key = null;
        }
        return $this->request('POST', self::topicPath($topic, '/events'), $event, self::keyHeader($key));
    }

    /**
     * listEvents yields the event log of a topic, oldest first, page by page.
     *
     * @param array<string,mixed> $query partition_key, type (a string or a list), limit, cursor
     * @return \Generator<int, array<string,mixed>>
     */
    public function listEvents(string $topic, array $query = []): \Generator
    {
        for (;;) {
            $page = $this->request('GET', self::topicPath($topic, '/events') . self::queryString($query));
            foreach ($page['events'] as $event) {
                yield $event;
            }
            if (empty($page['next_cursor'])) {
                return;
            }
            $query['cursor'] = $page['next_cursor'];
        }
    }

    /**
     * replayEvents delivers the selected events of a topic again
     * (['partition_key', 'types', 'metadata', 'from', 'to', 'subscription']),
     * to every current matching subscription or to 'subscription' only, as
     * new delivery jobs.
     *
     * @param array<string,mixed> $selection
     * @return array{events: int, deliveries: int}
     */
    public function replayEvents(string $topic, array $selection = [], ?string $idempotencyKey = null): array
    {
        return $this->request('POST', self::topicPath($topic, '/replay'), (object) $selection, self::keyHeader($idempotencyKey));
    }

    /**
     * queryString renders a list query: a list value repeats its parameter
     * (state=a&state=b; http_build_query's state[0]=a is a parameter the
     * server does not take), a bool is true or false, null is left out.
     *
     * @param array<string,mixed> $query
     */
    private static function queryString(array $query): string
    {
        $q = [];
        foreach ($query as $k => $v) {
            if ($v === null) {
                continue;
            }
            foreach ((array) $v as $one) {
                if (is_bool($one)) {
                    $one = $one ? 'true' : 'false';
                }
                $q[] = rawurlencode((string) $k) . '=' . rawurlencode((string) $one);
            }
        }
        return $q ? '?' . implode('&', $q) : '';
    }

    private static function topicPath(string $topic, string $suffix): string
    {
        return '/v1/topics/' . self::pathSegment($topic) . $suffix;
    }

    /**
     * deleteGone sends a DELETE with the retries of request; a retry
     * answered 404 returns (an earlier attempt whose reply was lost
     * deleted it), as the Go client does, unless $gonePath is given and
     * answers a GET with anything but 404 (a dead-letter delete answers
     * 404 for a job that is not dead too).
     */
    private function deleteGone(string $path, ?string $gonePath = null): void
    {
        for ($attempt = 0; ; $attempt++) {
            try {
                $this->once('DELETE', $path, null, [], 0.0, $retryAfter);
                return;
            } catch (IdemException $e) {
                if ($attempt > 0 && $e->status === 404 && $this->gone($gonePath)) {
                    return;
                }
                if ($attempt >= $this->maxRetries || !self::retryable($e)) {
                    throw $e;
                }
                usleep((int) ($this->backoff($attempt, $retryAfter) * 1e6));
            }
        }
    }

    /** gone reports whether GET $path answers 404 (true for no path). */
    private function gone(?string $path): bool
    {
        if ($path === null) {
            return true;
        }
        try {
            $this->request('GET', $path);
        } catch (IdemException $e) {
            return $e->status === 404;
        }
        return false;
    }

    /**
     * dlqResolve marks a dead job resolved with an optional note (as the Go
     * client's DLQResolve): it stays dead, kept for audit, out of the
     * unresolved count.
     *
     * @return array<string,mixed> the job
     */
    public function dlqResolve(string $id, ?string $note = null, ?string $idempotencyKey = null): array
    {
        $body = $note === null ? (object) [] : ['note' => $note];
        return $this->request('POST', '/v1/dlq/' . rawurlencode($id) . '/resolve', $body, self::keyHeader($idempotencyKey));
    }

    /**
     * pauseQueue pauses a queue on every node (as the Go client's
     * QueuePause): the whole queue, or with $tenant (admin keys) that
     * tenant's work in it; a tenant key pauses its own work.
     *
     * @return array{queue: string, tenant?: string, paused: bool}
     */
    public function pauseQueue(string $queue, ?string $tenant = null): array
    {
        return $this->request('POST', '/v1/queues/' . self::pathSegment($queue) . '/pause', self::pauseBody($tenant), self::keyHeader(null));
    }

    /**
     * resumeQueue undoes pauseQueue (the same queue and tenant).
     *
     * @return array{queue: string, tenant?: string, paused: bool}
     */
    public function resumeQueue(string $queue, ?string $tenant = null): array
    {
        return $this->request('POST', '/v1/queues/' . self::pathSegment($queue) . '/resume', self::pauseBody($tenant), self::keyHeader(null));
    }

    private static function pauseBody(?string $tenant): array|object
    {
        return $tenant === null || $tenant === '' ? (object) [] : ['tenant' => $tenant];
    }

    /** requeue moves dead jobs back: ['ids' => […]] or ['filter' => […]]. */
    public function requeue(array $selection): int
    {
        if (isset($selection['ids']) && is_array($selection['ids'])) {
            $selection['ids'] = array_values($selection['ids']);
        }
        return $this->request('POST', '/v1/dlq/requeue', $selection, self::keyHeader(null))['requeued'];
    }

    /**
     * record returns the idempotency record of a key: status, job_id, and
     * while a result is stored result_job_id (the job that produced it) and
     * result_expires_at; $includeResult adds the result itself.
     *
     * @return array<string,mixed>
     */
    public function record(string $key, bool $includeResult = false): array
    {
        return $this->request('GET', '/v1/idempotency/' . self::pathSegment($key) . ($includeResult ? '?include=result' : ''));
    }

    /**
     * deleteRecord deletes the idempotency record of a key: the key may be
     * used again. It is sent once, never retried (as the Go client's
     * DeleteRecord): a retry could delete a record another enqueue made
     * with the key meanwhile.
     */
    public function deleteRecord(string $key): void
    {
        $this->request('DELETE', '/v1/idempotency/' . self::pathSegment($key));
    }

    /**
     * putSchedule creates or replaces a schedule (as the Go client's
     * PutSchedule): ['cron' => …] or ['every' => …], 'timezone', 'grain',
     * 'missed', and the job of each firing ('kind', 'queue', 'args', …);
     * its firing history is kept.
     *
     * @param array<string,mixed> $schedule
     * @return array<string,mixed> the schedule with its last and next firings
     */
    public function putSchedule(string $name, array $schedule): array
    {
        return $this->request('PUT', '/v1/schedules/' . self::pathSegment($name), $schedule);
    }

    /** @return array<string,mixed> the schedule; an unknown one throws an IdemException with status 404 */
    public function getSchedule(string $name): array
    {
        return $this->request('GET', '/v1/schedules/' . self::pathSegment($name));
    }

    /** @return list<array<string,mixed>> the tenant's schedules, by name */
    public function listSchedules(): array
    {
        return $this->request('GET', '/v1/schedules')['schedules'];
    }

    /** deleteSchedule deletes a schedule (never the jobs it made); as dlqDelete, a retry that finds it gone returns. */
    public function deleteSchedule(string $name): void
    {
        $this->deleteGone('/v1/schedules/' . self::pathSegment($name));
    }

    /**
     * triggerSchedule fires a schedule now (as the Go client's
     * TriggerSchedule): triggers with the same $key make one job
     * ('existing' => true for the later ones); the call's Idempotency-Key
     * makes its own retries fire once.
     *
     * @return array{job: array<string,mixed>, existing: bool}
     */
    public function triggerSchedule(string $name, ?string $key = null, ?string $idempotencyKey = null): array
    {
        $body = $key === null || $key === '' ? (object) [] : ['key' => $key];
        $r = $this->request('POST', '/v1/schedules/' . self::pathSegment($name) . '/trigger', $body, self::keyHeader($idempotencyKey), 0.0, $status);
        $r['existing'] = ($r['existing'] ?? false) || $status === 200;
        return $r;
    }

    /** @return array<string,mixed> entries, in_progress, expiring_24h, expired, size_bytes, hits, misses, hit_rate */
    public function recordStats(): array
    {
        return $this->request('GET', '/v1/idempotency');
    }

    public function stats(): array
    {
        return $this->request('GET', '/v1/stats');
    }

    /**
     * request sends a request and decodes the JSON answer; a problem throws
     * IdemException. GET, HEAD and PUT, and requests with an
     * Idempotency-Key, are retried after no answer, a 5xx, a 429, a 409
     * "key in progress" or a 409 "conflict" (up to $maxRetries times, the
     * same key and body; ConflictException when they run out).
     * $body is an array, or an object (such as (object) [] for {});
     * $status is set to the HTTP status of the answer.
     *
     * @param array<string,string> $headers
     */
    public function request(string $method, string $path, array|object|null $body = null, array $headers = [], float $extraSeconds = 0.0, ?int &$status = null): ?array
    {
        $repeatable = in_array($method, ['GET', 'HEAD', 'PUT'], true) || isset($headers['Idempotency-Key']);
        for ($attempt = 0; ; $attempt++) {
            try {
                return $this->once($method, $path, $body, $headers, $extraSeconds, $retryAfter, $status);
            } catch (IdemException $e) {
                if (!$repeatable || $attempt >= $this->maxRetries || !self::retryable($e)
                    || ($this->abortCheck !== null && ($this->abortCheck)())) {
                    throw $e;
                }
                usleep((int) ($this->backoff($attempt, $retryAfter) * 1e6));
            }
        }
    }

    /**
     * retryable: no answer, a 5xx, a 429, a key still in progress, or a
     * conflict (a concurrent change kept the operation from completing and
     * nothing was done, so a repeat is safe; the server keeps no such
     * answer under the key), as the Go client's retryable.
     */
    private static function retryable(IdemException $e): bool
    {
        return $e->status === 0 || $e->status >= 500 || $e->status === 429
            || ($e->status === 409 && $e->type() === 'idempotency-key-in-progress')
            || $e instanceof ConflictException;
    }

    /** backoff is the Go client's: exponential with jitter, or Retry-After when longer, at most $maxBackoff. */
    private function backoff(int $attempt, float $retryAfter): float
    {
        $d = min($this->minBackoff * 2 ** $attempt, $this->maxBackoff);
        $d = $d / 2 + mt_rand() / mt_getrandmax() * $d / 2;
        return max($d, min($retryAfter, $this->maxBackoff));
    }

    /**
     * once sends one attempt; $retryAfter is set to the seconds of the
     * answer's Retry-After (0 when absent).
     *
     * @param array<string,string> $headers
     */
    private function once(string $method, string $path, array|object|null $body, array $headers, float $extraSeconds, ?float &$retryAfter, ?int &$status = null): ?array
    {
        $retryAfter = 0.0;
        $status = 0;
        $h = ['Authorization: Bearer ' . $this->apiKey, 'Accept: application/json'];
        if ($this->tenant !== null) {
            $h[] = 'Idem-Tenant: ' . $this->tenant;
        }
        foreach ($headers as $k => $v) {
            $h[] = "$k: $v";
        }
        $ch = curl_init($this->baseUrl . $path);
        $opts = [
            CURLOPT_CUSTOMREQUEST => $method,
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_TIMEOUT_MS => (int) (($this->timeout + $extraSeconds) * 1000),
            CURLOPT_PATH_AS_IS => true, // "%2E" stays a key, not a dot segment
            CURLOPT_HEADERFUNCTION => static function ($ch, string $line) use (&$retryAfter): int {
                if (preg_match('/^retry-after:\s*([0-9]+)\s*$/i', $line, $m)) {
                    $retryAfter = (float) $m[1];
                }
                return strlen($line);
            },
        ];
        if ($this->abortCheck !== null) {
            // libcurl calls this about once a second while the reply is
            // awaited; a non-zero return ends the transfer at once.
            $check = $this->abortCheck;
            $opts[CURLOPT_NOPROGRESS] = false;
            $opts[CURLOPT_XFERINFOFUNCTION] = static fn ($ch, int $dlTotal, int $dl, int $ulTotal, int $ul): int => $check() ? 1 : 0;
        }
        if ($body !== null) {
            $h[] = 'Content-Type: application/json';
            $opts[CURLOPT_POSTFIELDS] = self::json($body);
        }
        $opts[CURLOPT_HTTPHEADER] = $h;
        curl_setopt_array($ch, $opts);
        $raw = curl_exec($ch);
        if ($raw === false) {
            $err = curl_error($ch);
            curl_close($ch);
            throw new IdemException(0, null, "idem: $method $path: $err");
        }
        $status = (int) curl_getinfo($ch, CURLINFO_RESPONSE_CODE);
        curl_close($ch);
        $data = $raw === '' ? null : json_decode($raw, true);
        if ($status >= 400) {
            $p = is_array($data) ? $data : null;
            $msg = $p ? ($p['title'] ?? 'error') . ': ' . ($p['detail'] ?? '') : "HTTP $status";
            if ($status === 409 && str_ends_with((string) ($p['type'] ?? ''), '/conflict')) {
                throw new ConflictException($status, $p, "idem: $method $path: $msg");
            }
            throw new IdemException($status, $p, "idem: $method $path: $msg");
        }
        return $data;
    }

    /** JSON for the wire: empty PHP arrays under args/metadata/result stay as given. */
    private static function json(array|object $body): string
    {
        return json_encode($body, JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION);
    }

    /**
     * seconds parses the durations of the API: Go durations ("20s", "1m",
     * "500ms") and whole seconds ("30"), which the server takes as well.
     */
    public static function seconds(string $d): float
    {
        if (preg_match('/^[0-9]+$/', $d)) {
            return (float) $d;
        }
        $units = ['ns' => 1e-9, 'us' => 1e-6, 'µs' => 1e-6, 'ms' => 1e-3, 's' => 1.0, 'm' => 60.0, 'h' => 3600.0];
        preg_match_all('/([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)/u', $d, $m, PREG_SET_ORDER);
        $t = 0.0;
        foreach ($m as [, $n, $u]) {
            $t += (float) $n * $units[$u];
        }
        return $t;
    }
}
