<?php

declare(strict_types=1);

namespace Idem;

/**
 * The shape of seed 002's BaseIdempotentJob on idem: a job with a tenant,
 * a user and a payload whose idempotency key is
 * {tenant}_{user}_{action}_{hash16} (or a custom key). dispatch() enqueues
 * it once per key — a second dispatch answers the first job — and a Worker
 * that register()s the class runs execute() exactly once per key, through
 * the class's middleware().
 *
 *     final class SendEmailJob extends BaseIdempotentJob {
 *         protected function execute(JobContext $ctx): mixed {
 *             mail($this->payload['to'], 'Welcome', '…');
 *             return ['sent' => true];
 *         }
 *     }
 *     SendEmailJob::dispatch($client, 'tenant-1', 'user-7', ['to' => 'a@example.com']);
 */
abstract class BaseIdempotentJob
{
    /** @var string the idem queue; override in a subclass */
    protected static string $queue = 'default';
    /** @var int attempts before the job is dead (seed 002: 3 tries) */
    protected static int $maxAttempts = 3;
    /**
     * @var array<string,mixed> the job's retry policy (POST /v1/jobs "retry"):
     * seed 002's exponential backoff, 60 s → 120 s → 240 s, capped at 1 h, no jitter;
     * an empty array sends none (the server's policy for the queue or kind)
     */
    protected static array $retry = ['base' => '60s', 'factor' => 2, 'max' => '1h', 'jitter' => 0];

    /** @param array<string,mixed> $payload */
    final public function __construct(
        public readonly ?string $tenantId,
        public readonly ?string $userId,
        public readonly array $payload = [],
        protected ?string $customKey = null,
    ) {
    }

    /** The work; its return value (JSON) is the job's result. */
    abstract protected function execute(JobContext $ctx): mixed;

    /**
     * Middleware around execute(), Laravel's job-middleware shape:
     * list of fn(BaseIdempotentJob $job, callable $next): mixed.
     *
     * @return list<callable>
     */
    public function middleware(): array
    {
        return [];
    }

    /** The action: the class name in snake_case without "Job" (SendEmailJob → send_email). */
    public static function action(): string
    {
        $short = substr(strrchr('\\' . static::class, '\\'), 1);
        $short = preg_replace('/Job$/', '', $short) ?: $short;
        return strtolower((string) preg_replace('/(?<!^)[A-Z]/', '_$0', $short));
    }

    /** The idem kind the worker dispatches on; default the action. */
    public static function kind(): string
    {
        return static::action();
    }

    /** The key of the args dispatch() sends: the payload as a JSON object ({} when empty, {"0":…} for a list). */
    public function idempotencyKey(): string
    {
        return $this->customKey ?? Keys::scoped($this->tenantId, $this->userId, static::action(), self::args($this->payload));
    }

    /**
     * The payload as dispatch() sends it, a JSON object: an empty or
     * list-shaped payload as an object; any other stays an array, which
     * json_encode writes as an object with every member (an object would
     * lose the members whose names start with NUL).
     *
     * @param array<string,mixed> $payload
     */
    private static function args(array $payload): array|object
    {
        return array_is_list($payload) ? (object) $payload : $payload;
    }

    /**
     * dispatch enqueues the job once per idempotency key.
     *
     * @param array<string,mixed> $payload
     * @return array{job: array<string,mixed>, existing: bool}
     */
    public static function dispatch(Client $client, ?string $tenantId, ?string $userId, array $payload = [], ?string $customKey = null): array
    {
        $job = new static($tenantId, $userId, $payload, $customKey);
        $req = [
            'kind' => static::kind(),
            'queue' => static::$queue,
            'args' => self::args($payload),
            'max_attempts' => static::$maxAttempts,
            'metadata' => ['tenant_id' => $tenantId, 'user_id' => $userId, 'action' => static::action()],
        ];
        if (static::$retry !== []) { // [] would go out as a JSON array, which the server refuses
            $req['retry'] = static::$retry;
        }
        return $client->enqueue($req, $job->idempotencyKey());
    }

    /** fromClaimed rebuilds the job from a claimed idem job. */
    public static function fromClaimed(array $job): static
    {
        $meta = $job['metadata'] ?? [];
        return new static($meta['tenant_id'] ?? null, $meta['user_id'] ?? null, (array) ($job['args'] ?? []), $job['idempotency_key'] ?? null);
    }

    /** runWith runs execute() through middleware(). */
    public function runWith(JobContext $ctx): mixed
    {
        $core = fn (self $job) => $job->execute($ctx);
        $pipeline = array_reduce(array_reverse($this->middleware()),
            static fn (callable $next, callable $mw) => static fn (self $job) => $mw($job, $next), $core);
        return $pipeline($this);
    }
}
