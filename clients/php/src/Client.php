<?php

declare(strict_types=1);

namespace Idem;

/**
 * A client of the idem HTTP API over curl. Jobs, results and problems are
 * associative arrays as in /v1/openapi.json; ids are strings.
 */
class Client
{
    private string $baseUrl;

    /**
     * @param string      $baseUrl such as "http://127.0.0.1:8080"
     * @param string      $apiKey  an API key (idem_…)
     * @param string|null $tenant  act in this tenant (admin keys only): Idem-Tenant
     * @param float       $timeout seconds per request, beyond any long-poll wait
     */
    public function __construct(string $baseUrl, private string $apiKey, private ?string $tenant = null, private float $timeout = 30.0)
    {
        $this->baseUrl = rtrim($baseUrl, '/');
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
     * With an idempotency key, a retry answers the key's existing job.
     *
     * @param array<string,mixed> $job
     * @return array{job: array<string,mixed>, existing: bool}
     */
    public function enqueue(array $job, ?string $idempotencyKey = null): array
    {
        return $this->request('POST', '/v1/jobs', $job, self::keyHeader($idempotencyKey));
    }

    /** The Idempotency-Key header of a key: none for null or "" (the server wants 1 or more characters); "0" is a key. */
    private static function keyHeader(?string $key): array
    {
        return $key !== null && $key !== '' ? ['Idempotency-Key' => $key] : [];
    }

    /**
     * enqueueBatch enqueues up to 1000 jobs; each result is ['job', 'existing'] or ['error'].
     *
     * @param list<array<string,mixed>> $jobs
     * @return list<array<string,mixed>>
     */
    public function enqueueBatch(array $jobs, ?string $idempotencyKey = null): array
    {
        return $this->request('POST', '/v1/jobs/batch', ['jobs' => $jobs], self::keyHeader($idempotencyKey))['results'];
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
        $body = ['key' => $key, 'jobs' => $jobs];
        if ($onFinish !== null) {
            $body['on_finish'] = $onFinish;
        }
        if ($metadata !== null) {
            $body['metadata'] = $metadata;
        }
        return $this->request('POST', '/v1/batches', $body);
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
     * @param array<string,string|int> $query state, queue, kind, partition_key, idempotency_key, since, until, limit
     * @return \Generator<int, array<string,mixed>>
     */
    public function listJobs(array $query = [], string $path = '/v1/jobs'): \Generator
    {
        for (;;) {
            $page = $this->request('GET', $path . '?' . http_build_query($query));
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
        $body = ['queues' => $queues, 'worker_id' => $workerId, 'limit' => $limit, 'lease' => $lease, 'wait' => $wait];
        if ($kinds) {
            $body['kinds'] = $kinds;
        }
        return $this->request('POST', '/v1/claim', $body, [], self::seconds($wait))['jobs'];
    }

    /** heartbeat extends a claimed job's lease; it returns the new end (RFC 3339). */
    public function heartbeat(array $job, ?string $lease = null): string
    {
        $body = ['lease_token' => $job['lease_token']];
        if ($lease !== null) {
            $body['lease'] = $lease;
        }
        return $this->request('POST', '/v1/jobs/' . rawurlencode($job['id']) . '/heartbeat', $body)['lease_expires_at'];
    }

    /** complete completes a claimed job with an optional JSON result. */
    public function complete(array $job, mixed $result = null): array
    {
        $body = ['lease_token' => $job['lease_token']];
        if ($result !== null) {
            $body['result'] = $result;
        }
        return $this->request('POST', '/v1/jobs/' . rawurlencode($job['id']) . '/complete', $body);
    }

    /** fail fails a claimed job: retried later unless $retry is false or attempts are used up. */
    public function fail(array $job, string $error, ?bool $retry = null, ?string $retryAfter = null): array
    {
        $body = ['lease_token' => $job['lease_token'], 'error' => $error];
        if ($retry !== null) {
            $body['retry'] = $retry;
        }
        if ($retryAfter !== null) {
            $body['retry_after'] = $retryAfter;
        }
        return $this->request('POST', '/v1/jobs/' . rawurlencode($job['id']) . '/fail', $body);
    }

    public function cancel(string $id): array
    {
        return $this->request('POST', '/v1/jobs/' . rawurlencode($id) . '/cancel');
    }

    /** requeue moves dead jobs back: ['ids' => […]] or ['filter' => […]]. */
    public function requeue(array $selection): int
    {
        return $this->request('POST', '/v1/dlq/requeue', $selection)['requeued'];
    }

    public function stats(): array
    {
        return $this->request('GET', '/v1/stats');
    }

    /**
     * request sends one request and decodes the JSON answer; a problem
     * throws IdemException.
     *
     * @param array<string,string> $headers
     */
    public function request(string $method, string $path, ?array $body = null, array $headers = [], float $extraSeconds = 0.0): ?array
    {
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
        ];
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
            throw new IdemException($status, $p, "idem: $method $path: $msg");
        }
        return $data;
    }

    /** JSON for the wire: empty PHP arrays under args/metadata/result stay as given. */
    private static function json(array $body): string
    {
        return json_encode($body, JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION);
    }

    /** seconds parses the simple Go durations used here ("20s", "1m", "500ms"). */
    public static function seconds(string $d): float
    {
        $units = ['ns' => 1e-9, 'us' => 1e-6, 'µs' => 1e-6, 'ms' => 1e-3, 's' => 1.0, 'm' => 60.0, 'h' => 3600.0];
        preg_match_all('/([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)/u', $d, $m, PREG_SET_ORDER);
        $t = 0.0;
        foreach ($m as [, $n, $u]) {
            $t += (float) $n * $units[$u];
        }
        return $t;
    }
}
