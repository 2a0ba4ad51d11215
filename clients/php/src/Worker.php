<?php

declare(strict_types=1);

namespace Idem;

/**
 * A pull worker: claims jobs with a long poll, runs the handler of each
 * kind through the middleware (Laravel's job-middleware shape:
 * fn(array $job, callable $next)), completes with the handler's result or
 * fails with its exception (PermanentError: no retry). PHP runs one job at
 * a time, so a handler that may outlast the lease calls $ctx->heartbeat().
 * stop() (from a handler, a middleware or a signal handler) ends the loop
 * after the current job, and ends a claim's long poll at once (within about
 * a second); SIGTERM and SIGINT call it when pcntl is loaded.
 * After a claim that a spent rate limit held back, the next claim waits
 * its retry_after (at most 60s) instead of $wait.
 */
class Worker
{
    /** The server's cap on a claim's wait, in milliseconds. */
    private const MAX_CLAIM_WAIT_MS = 60_000;

    /** The most bytes fail accepts as "error". */
    private const MAX_ERROR_BYTES = 64 << 10;

    /** @var array<string, callable(array, JobContext): mixed> */
    private array $handlers = [];
    /** @var list<callable(array, callable): mixed> */
    private array $middleware = [];
    private bool $stopping = false;
    /** @var callable(\Throwable): void */
    private $onError;

    /** @param list<string> $queues */
    public function __construct(
        private Client $client,
        private array $queues,
        private string $workerId,
        private string $lease = '30s',
        private string $wait = '20s',
        ?callable $onError = null,
    ) {
        $this->onError = $onError ?? static fn (\Throwable $e) => error_log('idem worker: ' . $e->getMessage());
    }

    /** handle registers the handler of a kind: fn(array $job, JobContext $ctx): mixed (the result). */
    public function handle(string $kind, callable $handler): self
    {
        $this->handlers[$kind] = $handler;
        return $this;
    }

    /** register registers a BaseIdempotentJob subclass under its kind. */
    public function register(string $jobClass): self
    {
        if (!is_subclass_of($jobClass, BaseIdempotentJob::class)) {
            throw new \InvalidArgumentException("$jobClass is not a BaseIdempotentJob");
        }
        return $this->handle($jobClass::kind(), static fn (array $job, JobContext $ctx) => $jobClass::fromClaimed($job)->runWith($ctx));
    }

    /** through adds a middleware: fn(array $job, callable $next): mixed. */
    public function through(callable $middleware): self
    {
        $this->middleware[] = $middleware;
        return $this;
    }

    public function stop(): void
    {
        $this->stopping = true;
    }

    /**
     * run claims and runs jobs until stop(), $maxJobs jobs, or $maxSeconds.
     * It returns how many jobs it ran.
     */
    public function run(?int $maxJobs = null, ?float $maxSeconds = null): int
    {
        $this->stopping = false;
        if (function_exists('pcntl_async_signals')) {
            pcntl_async_signals(true);
            pcntl_signal(SIGTERM, fn () => $this->stop());
            pcntl_signal(SIGINT, fn () => $this->stop());
        }
        // A stop (SIGTERM) ends a claim's long poll too, not only the loop.
        $prevInterrupt = $this->client->interruptClaims($this->stopRequested(...));
        try {
            return $this->loop($maxJobs, $maxSeconds);
        } finally {
            $this->client->interruptClaims($prevInterrupt);
        }
    }

    /**
     * stopRequested runs the handlers of pending signals (pcntl) and
     * reports whether stop() was called: the check of a claim's long poll.
     */
    private function stopRequested(): bool
    {
        if (function_exists('pcntl_signal_dispatch')) {
            pcntl_signal_dispatch();
        }
        return $this->stopping;
    }

    /** loop is run's loop of claims and jobs. */
    private function loop(?int $maxJobs, ?float $maxSeconds): int
    {
        $deadline = $maxSeconds === null ? null : microtime(true) + $maxSeconds;
        $ran = 0;
        // After a claim that a spent rate limit held back, the next one
        // long-polls until the budget returns (its retry_after, at most the
        // server's 60s), as the Go client's ClaimWait.
        $nextWait = $this->wait;
        while (!$this->stopping && ($maxJobs === null || $ran < $maxJobs)) {
            $wait = $nextWait;
            if ($deadline !== null) {
                $left = $deadline - microtime(true);
                if ($left <= 0) {
                    break;
                }
                $wait = min(Client::seconds($nextWait), $left) * 1000 . 'ms';
            }
            try {
                $res = $this->client->claimDetail($this->queues, $this->workerId, 1, $this->lease, $wait, $this->kinds());
                $jobs = $res['jobs'];
                $nextWait = $res['retry_after_seconds'] > 0
                    ? (int) ceil(min($res['retry_after_seconds'] * 1000 + 10, self::MAX_CLAIM_WAIT_MS)) . 'ms'
                    : $this->wait;
            } catch (\Throwable $e) {
                ($this->onError)($e);
                usleep(500_000);
                continue;
            }
            foreach ($jobs as $job) {
                $this->runJob($job);
                $ran++;
            }
        }
        return $ran;
    }

    /**
     * kinds are the kinds the worker claims: those it has handlers for, as
     * strings (PHP makes an array key such as "42" an int, which the claim
     * would send as a number, refused), or null for any.
     *
     * @return list<string>|null
     */
    private function kinds(): ?array
    {
        return array_map('strval', array_keys($this->handlers)) ?: null;
    }

    /** @param array<string,mixed> $job */
    private function runJob(array $job): void
    {
        $handler = $this->handlers[$job['kind']] ?? null;
        $ctx = new JobContext($this->client, $job, $this->lease);
        $core = $handler === null
            ? static fn (array $job) => throw new PermanentError('no handler for kind ' . $job['kind'])
            : static fn (array $job) => $handler($job, $ctx);
        $pipeline = array_reduce(array_reverse($this->middleware),
            static fn (callable $next, callable $mw) => static fn (array $job) => $mw($job, $next), $core);
        try {
            try {
                $result = $pipeline($job);
            } catch (\Throwable $e) {
                $this->client->fail($job, self::errorText($e->getMessage() ?: get_class($e)), $e instanceof PermanentError ? false : null);
                return;
            }
            try {
                json_encode(['result' => $result], JSON_THROW_ON_ERROR);
            } catch (\JsonException $e) {
                // complete() could not send it: fail the job (no retry: the
                // handler would run again and return the same) rather than
                // leave it running until its lease expires.
                $this->client->fail($job, self::errorText('result is not JSON: ' . $e->getMessage()), false);
                return;
            }
            $this->client->complete($job, $result);
        } catch (\Throwable $e) {
            ($this->onError)($e);
        }
    }

    /**
     * errorText makes an error message acceptable as fail's "error": invalid
     * UTF-8 replaced by U+FFFD, NUL bytes removed, cut to 64 KiB on a
     * character boundary.
     */
    public static function errorText(string $s): string
    {
        if (!preg_match('//u', $s)) {
            $s = (string) json_decode((string) json_encode($s, JSON_INVALID_UTF8_SUBSTITUTE));
        }
        $s = str_replace("\0", '', $s);
        if (strlen($s) > self::MAX_ERROR_BYTES) {
            $s = substr($s, 0, self::MAX_ERROR_BYTES);
            while ($s !== '' && !preg_match('//u', $s)) {
                $s = substr($s, 0, -1); // a character cut in two
            }
        }
        return $s;
    }
}
