<?php

declare(strict_types=1);

namespace Idem;

/**
 * The calls of Client for result leases, delivery targets, limits, the job
 * health checks and API keys (the Go client's LeaseAcquire…, PutTarget…,
 * LimitPut…, HealthChecks and RevokeAPIKey), with Client's retries.
 */
trait ClientResources
{
    /**
     * leaseAcquire takes the execution lease of a key (a result lease, as
     * the Go client's LeaseAcquire), or answers its cached result:
     * ['cached' => true, 'result' => …] (do not run the work), or
     * ['acquired' => true, 'lease_token' => …, 'lease_expires_at' => …]
     * (run it, then leaseComplete or leaseRelease). While another holder
     * runs it the server answers 409 idempotency-key-in-progress, which is
     * retried ($maxRetries) and then thrown. $lease and $resultTtl are Go
     * durations; null: the server's defaults. The call's Idempotency-Key
     * makes a retry after a lost reply answer the same lease.
     *
     * @return array<string,mixed>
     */
    public function leaseAcquire(string $key, ?string $lease = null, ?string $resultTtl = null, ?string $idempotencyKey = null): array
    {
        $body = [];
        if ($lease !== null && $lease !== '') {
            $body['lease'] = $lease;
        }
        if ($resultTtl !== null && $resultTtl !== '') {
            $body['result_ttl'] = $resultTtl;
        }
        return $this->request('POST', self::leasePath($key, ''), (object) $body, self::keyHeader($idempotencyKey));
    }

    /** leaseRenew extends a result lease (by $lease, or the server's default); it returns its new end (RFC 3339). A lost lease throws 409. */
    public function leaseRenew(string $key, string $token, ?string $lease = null): string
    {
        $body = ['lease_token' => $token];
        if ($lease !== null && $lease !== '') {
            $body['lease'] = $lease;
        }
        return $this->request('POST', self::leasePath($key, '/renew'), $body, self::keyHeader(null))['lease_expires_at'];
    }

    /**
     * leaseComplete stores the result of the work (JSON; null stores null)
     * and ends the lease; later leaseAcquire calls of the key answer it
     * cached. $durationMs is how long the work took, $resultTtl how long the
     * result is kept (a Go duration; null: the lease's).
     *
     * @return array<string,mixed> the stored result: key, result, stored_at, duration_ms
     */
    public function leaseComplete(string $key, string $token, mixed $result = null, ?int $durationMs = null, ?string $resultTtl = null): array
    {
        $body = ['lease_token' => $token];
        if ($result !== null) {
            $body['result'] = $result;
        }
        if ($durationMs !== null && $durationMs >= 0) {
            $body['duration_ms'] = $durationMs;
        }
        if ($resultTtl !== null && $resultTtl !== '') {
            $body['result_ttl'] = $resultTtl;
        }
        return $this->request('POST', self::leasePath($key, '/complete'), $body, self::keyHeader(null));
    }

    /** leaseRelease gives the key up after failed work: nothing is cached, the next leaseAcquire gets the lease. */
    public function leaseRelease(string $key, string $token): void
    {
        $this->request('POST', self::leasePath($key, '/release'), ['lease_token' => $token], self::keyHeader(null));
    }

    private static function leasePath(string $key, string $tail): string
    {
        return '/v1/idempotency/' . self::pathSegment($key) . '/lease' . $tail;
    }

    /**
     * putTarget creates or replaces the delivery target $name (as the Go
     * client's PutTarget): ['url' => …, 'queue' => …, 'kind' => …,
     * 'secrets' => […], 'timeout' => …]; 'created' reports a 201. Without
     * 'secrets' the server generates one and returns it once, in
     * target['secret'], when the PUT creates the target, and keeps the
     * stored ones when it replaces it (a retried or repeated putTarget never
     * rotates them); given secrets replace them; [] sends unsigned pushes.
     *
     * @param array<string,mixed> $target
     * @return array{target: array<string,mixed>, created: bool}
     */
    public function putTarget(string $name, array $target): array
    {
        $t = $this->request('PUT', self::targetPath($name), (object) $target, [], 0.0, $status);
        return ['target' => $t, 'created' => $status === 201];
    }

    /** @return list<array<string,mixed>> the delivery targets of the tenant (never their secrets) */
    public function listTargets(): array
    {
        return $this->request('GET', '/v1/targets')['targets'];
    }

    /**
     * getTarget returns the target $name (never its secrets); an unknown
     * one throws an IdemException with status 404.
     *
     * @return array<string,mixed>
     */
    public function getTarget(string $name): array
    {
        return $this->request('GET', self::targetPath($name));
    }

    /** deleteTarget deletes the target $name; as dlqDelete, a retry that finds it gone returns. */
    public function deleteTarget(string $name): void
    {
        $this->deleteGone(self::targetPath($name));
    }

    private static function targetPath(string $name): string
    {
        return '/v1/targets/' . self::pathSegment($name);
    }

    /**
     * putLimit sets the limit of a scope (admin keys only): $scope is
     * ['tenant' => …] (its work in every queue; '*' is the default of every
     * tenant), ['queue' => …] (every tenant's work in it) or both (one
     * tenant's work in one queue); $limit is ['rate' => '100/1m',
     * 'concurrency' => …, 'weight' => …].
     *
     * @param array{tenant?: ?string, queue?: ?string} $scope
     * @param array<string,mixed> $limit
     * @return array<string,mixed> the limit with its usage
     */
    public function putLimit(array $scope, array $limit): array
    {
        return $this->request('PUT', self::limitPath($scope), (object) $limit);
    }

    /**
     * getLimit returns the limit of a scope (as putLimit's) with its usage;
     * none throws an IdemException with status 404.
     *
     * @param array{tenant?: ?string, queue?: ?string} $scope
     * @return array<string,mixed>
     */
    public function getLimit(array $scope): array
    {
        return $this->request('GET', self::limitPath($scope));
    }

    /** @return list<array<string,mixed>> the limits the key may see, with their usage */
    public function listLimits(): array
    {
        return $this->request('GET', '/v1/limits')['limits'];
    }

    /**
     * deleteLimit removes the limit of a scope (admin keys only); as
     * dlqDelete, a retry that finds it gone returns.
     *
     * @param array{tenant?: ?string, queue?: ?string} $scope
     */
    public function deleteLimit(array $scope): void
    {
        $this->deleteGone(self::limitPath($scope));
    }

    /**
     * limitPath is /v1/limits/queue/Q for a queue alone, else
     * /v1/limits/tenant/T (?queue=Q); a scope with neither throws
     * InvalidArgumentException.
     *
     * @param array{tenant?: ?string, queue?: ?string} $scope
     */
    private static function limitPath(array $scope): string
    {
        $tenant = (string) ($scope['tenant'] ?? '');
        $queue = (string) ($scope['queue'] ?? '');
        if ($tenant !== '') {
            return '/v1/limits/tenant/' . self::pathSegment($tenant) . ($queue !== '' ? '?queue=' . rawurlencode($queue) : '');
        }
        if ($queue !== '') {
            return '/v1/limits/queue/' . self::pathSegment($queue);
        }
        throw new \InvalidArgumentException('a limit scope names a tenant, a queue or both');
    }

    /**
     * healthChecks returns the job health checks of GET /v1/health (dead
     * and waiting jobs, success and retry rates, the result cache) of the
     * client's tenant, or of every tenant for an admin key without one:
     * ['status' => 'healthy'|'degraded'|'unhealthy', 'checks' => […]]. An
     * unhealthy grade, which the server answers 503, is returned as the
     * report; any other failure (a 503 problem when the storage cannot be
     * reached) throws. It asks once, without retries: a probe reports the
     * state of now (the Go client's HealthChecks).
     *
     * @return array{status: string, checks: array<string, array<string,mixed>>}
     */
    public function healthChecks(): array
    {
        try {
            return $this->once('GET', '/v1/health', null, [], 0.0, $retryAfter);
        } catch (IdemException $e) {
            $p = $e->problem;
            if ($e->status === 503 && ($p['status'] ?? null) === 'unhealthy' && isset($p['checks'])) {
                return $p;
            }
            throw $e;
        }
    }

    /**
     * revokeApiKey revokes the API key $id (admin keys only; the key_… id
     * of `idem apikey list`): requests with it are refused from then on. As
     * dlqDelete, a retry that finds it gone returns, and a 404 is thrown only
     * when the first attempt answers it.
     */
    public function revokeApiKey(string $id): void
    {
        $this->deleteGone('/v1/apikeys/' . self::pathSegment($id));
    }
}
