<?php

declare(strict_types=1);

require __DIR__ . '/lib.php';

use Idem\BaseIdempotentJob;
use Idem\Canonical;
use Idem\Client;
use Idem\IdemException;
use Idem\JobContext;
use Idem\Keys;
use Idem\PermanentError;
use Idem\Worker;

// --- RFC 8785 and keys against shared/testdata/key-vectors.json (beside the checkout) ---

$vectorsFile = getenv('IDEM_KEY_VECTORS') ?: dirname(__DIR__, 3) . '/../shared/testdata/key-vectors.json';
if (!is_file($vectorsFile)) {
    $vectorsFile = dirname(__DIR__, 3) . '/key/testdata/key-vectors.json';
}
$vectors = json_decode((string) file_get_contents($vectorsFile), true, 512, JSON_THROW_ON_ERROR);

test('key vectors are present', function () use ($vectors) {
    check(count($vectors['canonical']) >= 10, 'canonical vectors');
    check(count(array_filter($vectors['formats'], fn ($f) => array_key_exists('user', $f))) >= 4, 'scoped vectors');
});

foreach ($vectors['canonical'] as $v) {
    test('canonical: ' . $v['name'], function () use ($v) {
        $c = Canonical::fromJson($v['input']);
        same($v['canonical'], $c);
        same($v['sha256'], hash('sha256', $c));
        same($v['sha256'], Keys::hashJson($v['input']));
    });
}

foreach ($vectors['formats'] as $f) {
    if (array_key_exists('user', $f)) {
        test('scoped key: ' . $f['name'], function () use ($f) {
            same($f['key'], Keys::scopedJson($f['tenant'], $f['user'], $f['action'], $f['payload']));
            // The same key from a PHP array, as an app dispatches it.
            same($f['key'], Keys::scoped($f['tenant'], $f['user'], $f['action'], json_decode($f['payload'], true)));
        });
    } elseif (array_key_exists('prefix', $f)) {
        test('content key: ' . $f['name'], function () use ($f) {
            same($f['key'], Keys::content($f['prefix'], json_decode($f['payload'], true)));
        });
    }
}

test('canonical PHP values: empty object vs list, key order, floats', function () {
    same('{"a":[],"b":{},"c":1.5,"d":100}', Canonical::encode(['d' => 100.0, 'c' => 1.5, 'b' => new stdClass(), 'a' => []]));
    same('{"1":"x","a":true}', Canonical::encode(['a' => true, 1 => 'x']));
    same('-1e-7', Canonical::number(-1e-7));
    same('123456789012345680000', Canonical::number(123456789012345678901.0));
    throws(InvalidArgumentException::class, fn () => Canonical::number(NAN));
    throws(InvalidArgumentException::class, fn () => Canonical::encode("\xff"));
});

test('scoped parts are checked', function () {
    throws(InvalidArgumentException::class, fn () => Keys::scoped('ten_ant', 'u', 'a', []));
    throws(InvalidArgumentException::class, fn () => Keys::scoped('t', "u\n", 'a', []));
    throws(InvalidArgumentException::class, fn () => Keys::scoped('t', 'u', '', []));
    same('t_u_send_email_' . substr(hash('sha256', '{"a":1}'), 0, 16), Keys::scoped('t', 'u', 'send_email', ['a' => 1]));
});

// --- against a real idem serve --------------------------------------------

final class SendEmailJob extends BaseIdempotentJob
{
    protected static string $queue = 'mail';
    /** @var list<string> */
    public static array $log = [];

    public function middleware(): array
    {
        return [static function (BaseIdempotentJob $job, callable $next) {
            self::$log[] = 'before ' . $job->tenantId;
            $r = $next($job);
            self::$log[] = 'after';
            return $r;
        }];
    }

    protected function execute(JobContext $ctx): mixed
    {
        self::$log[] = 'send to ' . $this->payload['to'];
        return ['sent' => $this->payload['to'], 'user' => $this->userId];
    }
}

$srv = null;
$client = null;
$server = function () use (&$srv, &$client): Client {
    if ($srv === null) {
        $srv = new TestServer();
        $client = new Client($srv->url, $srv->adminKey);
    }
    return $client;
};

test('enqueue with a key enqueues once; problems throw', function () use ($server, &$srv) {
    $c = $server();
    $a = $c->enqueue(['kind' => 'k', 'queue' => 'once', 'args' => ['x' => 1]], 'php-once-1');
    same(false, $a['existing']);
    $b = $c->enqueue(['kind' => 'k', 'queue' => 'once', 'args' => ['x' => 1]], 'php-once-1');
    same(true, $b['existing']);
    same($a['job']['id'], $b['job']['id']);
    $e = throws(IdemException::class, fn () => $c->enqueue(['kind' => 'k', 'queue' => 'once', 'args' => ['x' => 2]], 'php-once-1'));
    same(422, $e->status);
    $e = throws(IdemException::class, fn () => $c->enqueue(['kind' => 'k', 'max_attempts' => 0]));
    same(400, $e->status);
    same('invalid-request', $e->type());
    $e = throws(IdemException::class, fn () => (new Client($srv->url, 'idem_nope'))->stats());
    same(401, $e->status);
});

test('batches and paged lists', function () use ($server) {
    $c = $server();
    $res = $c->enqueueBatch([['kind' => 'a', 'queue' => 'php-pages'], ['kind' => 'b', 'queue' => 'php-pages', 'max_attempts' => 0]]);
    check(isset($res[0]['job']) && isset($res[1]['error']), 'one ok, one error');
    for ($i = 0; $i < 6; $i++) {
        $c->enqueue(['kind' => 'p', 'queue' => 'php-pages', 'args' => ['i' => $i]]);
    }
    $ids = [];
    foreach ($c->listJobs(['queue' => 'php-pages', 'limit' => 2]) as $j) {
        $ids[] = (int) $j['id'];
    }
    same(7, count($ids));
    $sorted = $ids;
    rsort($sorted);
    same($sorted, $ids, 'newest first');
});

test('a job retry policy; a batch with an on_finish job', function () use ($server) {
    $c = $server();
    $j = $c->enqueue(['kind' => 'hook', 'queue' => 'php-retry', 'retry' => ['max_attempts' => 5, 'base' => '5s']])['job'];
    same(5, $j['max_attempts']);
    same('5s', $j['retry']['base']);
    $e = throws(IdemException::class, fn () => $c->enqueue(['kind' => 'hook', 'retry' => ['factor' => 0.5]]));
    same(400, $e->status);
    check(isset($e->problem['errors']['retry.factor']), 'the problem names retry.factor');
    $b = $c->createBatch('php-upload-1', [['kind' => 'upload', 'queue' => 'php-up', 'args' => ['f' => 'a']]],
        ['kind' => 'report', 'queue' => 'php-reports']);
    same(false, $b['existing']);
    same('pending', $b['batch']['on_finish']['state']);
    $c->cancel($b['batch']['jobs'][0]['id']);
    $got = $c->getBatch($b['batch']['id']);
    same(true, $got['finished']);
    same('available', $got['on_finish']['state']);
    same((int) $b['batch']['id'], $got['on_finish']['metadata']['idem_batch_id']);
});

test('dispatch derives the seed 002 key and enqueues once', function () use ($server) {
    $c = $server();
    $payload = ['to' => 'a@example.com', 'template' => 'welcome'];
    $first = SendEmailJob::dispatch($c, 'tenant-abc123', 'user-xyz789', $payload);
    same('tenant-abc123_user-xyz789_send_email_b1c2daf60412e169', $first['job']['idempotency_key']);
    same('send_email', $first['job']['kind']);
    same('mail', $first['job']['queue']);
    same(3, $first['job']['max_attempts']);
    same(['base' => '1m0s', 'factor' => 2, 'max' => '1h0m0s', 'jitter' => 0], $first['job']['retry']);
    $again = SendEmailJob::dispatch($c, 'tenant-abc123', 'user-xyz789', $payload);
    same(true, $again['existing']);
    same($first['job']['id'], $again['job']['id']);
    $nullTenant = SendEmailJob::dispatch($c, null, 'user-xyz789', $payload);
    same('_user-xyz789_send_email_b1c2daf60412e169', $nullTenant['job']['idempotency_key']);
    $custom = SendEmailJob::dispatch($c, 't', 'u', $payload, 'custom_key_42_send');
    same('custom_key_42_send', $custom['job']['idempotency_key']);
});

test('the worker runs jobs through middleware, completes, fails and stops', function () use ($server) {
    $c = $server();
    SendEmailJob::$log = [];
    $ok = $c->enqueue(['kind' => 'add', 'queue' => 'php-work', 'args' => ['a' => 2, 'b' => 3]])['job']['id'];
    $perm = $c->enqueue(['kind' => 'explode', 'queue' => 'php-work'])['job']['id'];
    $retry = $c->enqueue(['kind' => 'flaky', 'queue' => 'php-work', 'max_attempts' => 2])['job']['id'];
    $mail = SendEmailJob::dispatch($c, 'tenant-w', 'user-w', ['to' => 'w@example.com'])['job']['id'];
    $seen = [];
    $errors = [];
    $w = new Worker($c, ['php-work', 'mail'], 'php-worker', '5s', '1s', function (Throwable $e) use (&$errors) { $errors[] = $e; });
    $w->through(function (array $job, callable $next) use (&$seen) {
        $seen[] = $job['kind'];
        return $next($job);
    });
    $w->handle('add', fn (array $job, JobContext $ctx) => ['sum' => $job['args']['a'] + $job['args']['b'], 'lease' => $ctx->heartbeat() !== '']);
    $w->handle('explode', fn () => throw new PermanentError('bad input'));
    $w->handle('flaky', fn () => throw new RuntimeException('try again'));
    $w->register(SendEmailJob::class);
    $t0 = microtime(true);
    $ran = $w->run(null, 4.0);
    check(microtime(true) - $t0 < 8, 'run stops near maxSeconds');
    same([], array_map(fn ($e) => $e->getMessage(), $errors));
    check($ran >= 4, "ran $ran jobs");
    sort($seen);
    check(in_array('add', $seen) && in_array('send_email', $seen) && in_array('explode', $seen), 'middleware saw every kind');
    $j = $c->getJob($ok);
    same('completed', $j['state']);
    same(['sum' => 5, 'lease' => true], $j['result']);
    $j = $c->getJob($perm);
    same('dead', $j['state']);
    same('bad input', $j['last_error']);
    $j = $c->getJob($retry);
    check(in_array($j['state'], ['retryable', 'available', 'dead'], true), 'flaky job retried: ' . $j['state']);
    same('try again', $j['last_error']);
    $j = $c->getJob($mail);
    same('completed', $j['state']);
    same(['sent' => 'w@example.com', 'user' => 'user-w'], $j['result']);
    // The mail queue also held the three jobs dispatched by the test above: each ran once.
    same(['before tenant-w', 'send to w@example.com', 'after'], array_slice(SendEmailJob::$log, -3));
    same(4, count(array_filter(SendEmailJob::$log, fn ($l) => str_starts_with($l, 'send to'))));
});

test('stop() from a handler ends the loop after the job', function () use ($server) {
    $c = $server();
    $c->enqueue(['kind' => 'stopper', 'queue' => 'php-stop']);
    $c->enqueue(['kind' => 'stopper', 'queue' => 'php-stop']);
    $w = new Worker($c, ['php-stop'], 'php-stopper', '5s', '1s');
    $w->handle('stopper', function () use (&$w) {
        $w->stop();
        return null;
    });
    same(1, $w->run(null, 10.0));
    $left = iterator_to_array($c->listJobs(['queue' => 'php-stop', 'state' => 'available']), false);
    same(1, count($left));
});

// exit() would skip a finally block: the server is stopped first, then the
// code is returned (a server left running outlived every CI run).
$code = 1;
try {
    $code = run_tests();
} finally {
    $srv?->stop();
}
exit($code);
