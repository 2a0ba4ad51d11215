<?php

declare(strict_types=1);

require __DIR__ . '/lib.php';

use Idem\BaseIdempotentJob;
use Idem\Canonical;
use Idem\Client;
use Idem\ConflictException;
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
    check(count(array_filter($vectors['formats'], fn ($f) => array_key_exists('function', $f))) >= 5, 'lock key vectors');
    $unchecked = array_filter($vectors['formats'], fn ($f) => !array_key_exists('user', $f) && !array_key_exists('prefix', $f) && !array_key_exists('function', $f));
    same([], array_values($unchecked), 'every format vector is checked');
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
    } elseif (array_key_exists('function', $f)) {
        test('lock key: ' . $f['name'], function () use ($f) {
            same($f['key'], Keys::lockJson($f['function'], $f['tenant'], $f['time'], $f['zone'], $f['grain'], $f['entities']));
            // The same key from a DateTime in another zone and a PHP array, as an app computes it.
            $t = (new DateTimeImmutable($f['time']))->setTimezone(new DateTimeZone('America/New_York'));
            $entities = $f['entities'] === null ? null : json_decode($f['entities'], true);
            same($f['key'], Keys::lock($f['function'], $f['tenant'], $t, new DateTimeZone($f['zone']), $f['grain'], $entities));
            if ($f['entities'] !== null) {
                same($f['entities_canonical'], Keys::entityCanonicalJson($f['entities']));
                same(substr($f['key'], strrpos($f['key'], ':') + 1), Keys::entityHash($entities));
            }
        });
    } elseif (array_key_exists('prefix', $f)) {
        test('content key: ' . $f['name'], function () use ($f) {
            same($f['key'], Keys::content($f['prefix'], json_decode($f['payload'], true)));
        });
    }
}

// Go's answers on the edges (key/testdata/canonical-edges.json, pinned by
// package key's TestCanonicalEdges): refused inputs throw, kept ones match.
$edges = json_decode((string) file_get_contents(dirname(__DIR__, 3) . '/key/testdata/canonical-edges.json'), true, 512, JSON_THROW_ON_ERROR);
foreach ($edges['cases'] as $e) {
    test('canonical edge: ' . $e['name'], function () use ($e) {
        if (isset($e['nest'])) {
            $in = $want = str_repeat('[', $e['nest']) . str_repeat(']', $e['nest']);
        } else {
            $in = isset($e['input_hex']) ? (string) hex2bin($e['input_hex']) : $e['input'];
            $want = $e['canonical'] ?? null;
        }
        if (!empty($e['error'])) {
            throws(InvalidArgumentException::class, fn () => Canonical::fromJson($in));
            return;
        }
        same($want, Canonical::fromJson($in));
    });
}

test('a PHP value canonicalizes as the JSON json_encode sends for it', function () {
    $values = [
        ["\0x" => 1, 'a' => [1.0, 'b' => null]],
        (object) ['z' => new stdClass(), 'y' => [], 'x' => ['k' => (object) []]],
        ['0' => 'a', '1' => 'b'],
        [3 => 'x', 'é' => "caf\u{e9}", '€' => -0.0, 'long' => 0.1 + 0.2],
    ];
    foreach ($values as $v) {
        same(Canonical::fromJson(json_encode($v, JSON_THROW_ON_ERROR | JSON_PRESERVE_ZERO_FRACTION)), Canonical::encode($v));
    }
});

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

test('lock key parts are checked; entities must be an object', function () {
    $t = '2026-02-06T14:05:09Z';
    throws(InvalidArgumentException::class, fn () => Keys::lockJson('a:b', 't', $t, 'UTC', 'day', null));
    throws(InvalidArgumentException::class, fn () => Keys::lockJson('f', 't:1', $t, 'UTC', 'day', null));
    throws(InvalidArgumentException::class, fn () => Keys::lockJson('f', '', $t, 'UTC', 'day', null));
    throws(InvalidArgumentException::class, fn () => Keys::lockJson('f', 't', 'not a time', 'UTC', 'day', null));
    // A time string without an offset would be read in PHP's default zone.
    throws(InvalidArgumentException::class, fn () => Keys::lockJson('f', 't', '2026-02-06T23:30:00', 'UTC', 'hour', null));
    throws(InvalidArgumentException::class, fn () => Keys::lockJson('f', 't', '2026-02-06', 'UTC', 'day', null));
    same('f:t:2026-02-06T22', Keys::lockJson('f', 't', '2026-02-06T23:30:00+01:00', 'UTC', 'hour', null));
    throws(InvalidArgumentException::class, fn () => Keys::lockJson('f', 't', $t, 'UTC', 'week', null));
    throws(InvalidArgumentException::class, fn () => Keys::lockJson('f', 't', $t, 'Nowhere/City', 'day', null));
    throws(InvalidArgumentException::class, fn () => Keys::lockJson('f', 't', $t, 'UTC', 'day', '[1]'));
    throws(InvalidArgumentException::class, fn () => Keys::lockJson('f', 't', $t, 'UTC', 'day', '{"a":1,"a":2}'));
    throws(InvalidArgumentException::class, fn () => Keys::lock('f', 't', new DateTimeImmutable($t), null, 'day', [1, 2]));
    same('f:t:2026-02-06', Keys::lockJson('f', 't', $t, null, 'day', '  null '), 'JSON null and no zone (UTC)');
    // Go's key.EntityCanonical of names PHP arrays would make integers, nesting and escapes.
    $in = '{"b":{"y":[1,{"q":"\\\\"}],"x":null},"10":"a","2":"b","":0,"\\u00e9":1e21}';
    same('[["",0],["10","a"],["2","b"],["b",{"x":null,"y":[1,{"q":"\\\\"}]}],["é",1e+21]]', Keys::entityCanonicalJson($in));
    same('[]', Keys::entityCanonicalJson('{}'));
    same(Keys::entityHash(new stdClass()), substr(hash('sha256', '[]'), 0, 12));
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

// --- keys "0", args {} and error texts the server refuses ------------------

final class PingJob extends BaseIdempotentJob
{
    protected static string $queue = 'php-ping';

    protected function execute(JobContext $ctx): mixed
    {
        return null;
    }
}

/** A job class that leaves the backoff to the server: an empty $retry. */
final class ServerRetryJob extends BaseIdempotentJob
{
    protected static string $queue = 'php-server-retry';
    protected static array $retry = [];

    protected function execute(JobContext $ctx): mixed
    {
        return null;
    }
}

test('a job class with an empty $retry dispatches, and its job has no policy of its own', function () use ($server) {
    $c = $server();
    $r = ServerRetryJob::dispatch($c, 't1', 'u1', ['n' => 1]);
    same(false, $r['existing']);
    same(3, $r['job']['max_attempts']);
    same(null, $r['job']['retry'] ?? null, 'the job keeps the server\'s policy');
});

/** Go key.Scoped(tenant, user, action, canonical): {} for t1, u1, ping is t1_u1_ping_44136fa355b3678a. */
function go_scoped(string $tenant, string $user, string $action, string $canonical): string
{
    return $tenant . '_' . $user . '_' . $action . '_' . substr(hash('sha256', $canonical), 0, 16);
}

test('dispatch with the default (empty) payload: key is Go key.Scoped of the args it sends ({})', function () use ($server, &$srv) {
    $c = $server();
    same('t1_u1_ping_44136fa355b3678a', go_scoped('t1', 'u1', 'ping', '{}'));
    $r = PingJob::dispatch($c, 't1', 'u1');
    // The args as stored and served (raw JSON, before PHP's decoding): an object.
    $ch = curl_init($srv->url . '/v1/jobs/' . $r['job']['id']);
    curl_setopt_array($ch, [CURLOPT_RETURNTRANSFER => true, CURLOPT_HTTPHEADER => ['Authorization: Bearer ' . $srv->adminKey]]);
    $raw = (string) curl_exec($ch);
    check(str_contains($raw, '"args":{}'), 'args on the server are {}: ' . $raw);
    same(go_scoped('t1', 'u1', 'ping', '{}'), $r['job']['idempotency_key'], 'key of args {}');
});

test('dispatch with a payload whose keys are "0","1": key is Go key.Scoped of {"0":..,"1":..}', function () {
    $payload = ['0' => 'a', '1' => 'b'];
    // what dispatch() puts on the wire as args:
    same('{"0":"a","1":"b"}', json_encode((object) $payload));
    same(go_scoped('t1', 'u1', 'ping', '{"0":"a","1":"b"}'), (new PingJob('t1', 'u1', $payload))->idempotencyKey());
});

test('dispatch with a payload name starting with NUL: the args keep it and the key is Go key.Scoped of them', function () use ($server, &$srv) {
    $c = $server();
    $r = PingJob::dispatch($c, 't1', 'u1', ["\0a" => 1, 'b' => [2]]);
    $ch = curl_init($srv->url . '/v1/jobs/' . $r['job']['id']);
    curl_setopt_array($ch, [CURLOPT_RETURNTRANSFER => true, CURLOPT_HTTPHEADER => ['Authorization: Bearer ' . $srv->adminKey]]);
    $args = json_encode(json_decode((string) curl_exec($ch), true)['args']);
    same('{"\\u0000a":1,"b":[2]}', $args, 'args on the server');
    same(go_scoped('t1', 'u1', 'ping', Canonical::fromJson($args)), $r['job']['idempotency_key']);
});

test('enqueue and enqueueBatch with Idempotency-Key "0" enqueue once', function () use ($server) {
    $c = $server()->withTenant('php-zero');
    $a = $c->enqueue(['kind' => 'k', 'queue' => 'php-zero'], '0');
    $b = $c->enqueue(['kind' => 'k', 'queue' => 'php-zero'], '0');
    same(true, $b['existing'], 'second enqueue with key "0" is a replay');
    same($a['job']['id'], $b['job']['id']);
    $c = $server()->withTenant('php-zero-batch');
    $a = $c->enqueueBatch([['kind' => 'k', 'queue' => 'php-zero']], '0');
    $b = $c->enqueueBatch([['kind' => 'k', 'queue' => 'php-zero']], '0');
    same($a[0]['job']['id'], $b[0]['job']['id'], 'second batch with key "0" is a replay');
});

// A key that starts and ends with a double quote (a JSON-encoded id) is
// that key: the server, which reads a quoted header as a structured-field
// string, neither refuses it as differing from the body's key nor drops
// its quotes.
test('a key in double quotes is kept as it is', function () use ($server) {
    $c = $server();
    $key = json_encode('php-order-1');
    $a = $c->enqueue(['kind' => 'k', 'queue' => 'php-quoted', 'idempotency_key' => $key]);
    same($key, $a['job']['idempotency_key']);
    $b = $c->enqueue(['kind' => 'k', 'queue' => 'php-quoted'], $key);
    same(true, $b['existing']);
    same($a['job']['id'], $b['job']['id']);
    same($a['job']['id'], $c->record($key)['job_id']);
    same(false, $c->enqueue(['kind' => 'k', 'queue' => 'php-quoted'], 'php-order-1')['existing'], 'the key php-order-1 is another key');
});

// A key that starts with a double quote but does not end with one, or
// with spaces around it, is that key too: it travels as a structured-field
// string (a bare value that starts with '"' is refused, and HTTP drops the
// spaces around a bare one).
test('keys with a leading quote or spaces around are kept as they are', function () use ($server) {
    $c = $server();
    foreach (['"php-half', ' php padded ', '"php\\"esc"'] as $key) {
        $a = $c->enqueue(['kind' => 'k', 'queue' => 'php-quoted'], $key);
        same($key, $a['job']['idempotency_key']);
        $b = $c->enqueue(['kind' => 'k', 'queue' => 'php-quoted'], $key);
        same(true, $b['existing'], 'the key ' . $key . ' again');
        same($a['job']['id'], $b['job']['id']);
    }
});

test('dispatch with custom key "0" sends it', function () use ($server) {
    $c = $server();
    $a = PingJob::dispatch($c, 't', 'u', ['x' => 1], '0');
    same('0', $a['job']['idempotency_key'] ?? null, 'the job carries key "0"');
});

// A handler exception whose message the server refuses as fail's "error"
// (invalid UTF-8, a NUL byte, > 64 KiB) is cleaned up before fail: the job
// does not stay running until its lease expires (and run again).
foreach (['invalid UTF-8' => "bad input \xff", 'a NUL byte' => "bad input \0", 'more than 64 KiB' => str_repeat('x', 70 * 1024)] as $name => $msg) {
    test("a PermanentError whose message has $name makes the job dead, run once", function () use ($server, $msg, $name) {
        $c = $server();
        $queue = 'php-perm-' . strlen($name);
        $id = $c->enqueue(['kind' => 'work', 'queue' => $queue, 'max_attempts' => 5])['job']['id'];
        $errors = [];
        $runs = 0;
        $w = new Worker($c, [$queue], 'php-perm', '2s', '1s', function (Throwable $e) use (&$errors) { $errors[] = get_class($e) . ': ' . substr($e->getMessage(), 0, 120); });
        $w->handle('work', function () use (&$runs, $msg) {
            $runs++;
            throw new PermanentError($msg);
        });
        $w->run(null, 9.0);
        $j = $c->getJob($id);
        same('dead', $j['state'], "after $runs runs, loop errors " . implode('; ', $errors));
        same(1, $runs);
    });
}

test('error texts are made acceptable to fail', function () {
    same("bad \u{fffd}x", Worker::errorText("bad \xff\0x"));
    $s = Worker::errorText(str_repeat("\u{20ac}", 40000)); // 3 bytes each: the cut falls inside one
    same(65535, strlen($s));
    check((bool) preg_match('//u', $s), 'valid UTF-8');
});

// A result complete() cannot send (json_encode fails: invalid UTF-8) fails
// the job: it does not stay running until its lease expires, then run again.
test('a result that cannot be encoded fails the job and the handler runs once', function () use ($server) {
    $c = $server();
    $id = $c->enqueue(['kind' => 'work', 'queue' => 'php-result', 'max_attempts' => 5])['job']['id'];
    $errors = [];
    $runs = 0;
    $w = new Worker($c, ['php-result'], 'php-result', '2s', '1s', function (Throwable $e) use (&$errors) { $errors[] = get_class($e) . ': ' . $e->getMessage(); });
    $w->handle('work', function () use (&$runs) {
        $runs++;
        return ['name' => "caf\xe9"]; // latin-1 from a legacy DB
    });
    $w->run(null, 9.0);
    $j = $c->getJob($id);
    same(1, $runs, "handler runs (job {$j['state']}); loop errors " . implode('; ', $errors));
    same('dead', $j['state']);
    check(str_contains((string) ($j['last_error'] ?? ''), 'result is not JSON'), 'last_error: ' . ($j['last_error'] ?? ''));
});

// --- retries (a fault-injecting proxy in front of the server), keys, records ---

/** with_proxy runs $fn with a client behind a FaultProxy that follows $plan. */
function with_proxy(TestServer $srv, array $plan, callable $fn, array $opts = []): mixed
{
    $p = new FaultProxy($srv->url, $plan);
    try {
        return $fn(new Client($p->url, $srv->adminKey, null, 30.0, ...$opts), $p);
    } finally {
        $p->stop();
    }
}

test('an enqueue whose reply is lost is retried with the same key: one job', function () use ($server, &$srv) {
    $c = $server();
    $r = with_proxy($srv, ['lost'], function (Client $pc, FaultProxy $p) {
        $r = $pc->enqueue(['kind' => 'k', 'queue' => 'php-lost']);
        $seen = $p->seen();
        same(2, count($seen));
        same($seen[0][2], $seen[1][2], 'one key for both attempts');
        return $r;
    }, ['minBackoff' => 0.01]);
    same(true, $r['existing'], 'the retry answered the job the first attempt made');
    same([$r['job']['id']], array_map(fn ($j) => $j['id'], iterator_to_array($c->listJobs(['queue' => 'php-lost']), false)));
});

// A reply whose body is cut (the connection ends after the headers) got no
// answer: it is retried with the same key, as the Go and TypeScript
// clients retry it.
test('an enqueue whose reply body is cut is retried with the same key: one job', function () use ($server, &$srv) {
    $c = $server();
    $r = with_proxy($srv, ['cut'], function (Client $pc, FaultProxy $p) {
        $r = $pc->enqueue(['kind' => 'k', 'queue' => 'php-cut']);
        $seen = $p->seen();
        same(2, count($seen));
        same($seen[0][2], $seen[1][2], 'one key for both attempts');
        return $r;
    }, ['minBackoff' => 0.01]);
    same(true, $r['existing'], 'the retry answered the job the first attempt made');
    same([$r['job']['id']], array_map(fn ($j) => $j['id'], iterator_to_array($c->listJobs(['queue' => 'php-cut']), false)));
});

test('a claim and a complete whose replies are lost are retried: one attempt, completed', function () use ($server, &$srv) {
    $c = $server();
    $id = $c->enqueue(['kind' => 'k', 'queue' => 'php-lost-claim'])['job']['id'];
    with_proxy($srv, ['lost', 'pass', 'lost', 'pass'], function (Client $pc) use ($id) {
        $jobs = $pc->claim(['php-lost-claim'], 'w', 1, '30s', '0s');
        same([$id], array_map(fn ($j) => $j['id'], $jobs), 'the retried claim replays the first claim');
        same('completed', $pc->complete($jobs[0], ['ok' => 1])['state']);
    }, ['minBackoff' => 0.01]);
    same(1, count($c->attempts($id)));
});

test('a 503 with Retry-After waits that long, at most maxBackoff; 4xx and maxRetries 0 are not retried', function () use ($server, &$srv) {
    $server();
    $unavailable = [[503, '1', '/problems/service-unavailable']];
    $t0 = microtime(true);
    with_proxy($srv, $unavailable, fn (Client $pc) => $pc->stats(), ['minBackoff' => 0.01]);
    check(microtime(true) - $t0 >= 0.95, 'retried before the Retry-After');
    $t0 = microtime(true);
    with_proxy($srv, $unavailable, fn (Client $pc) => $pc->stats(), ['minBackoff' => 0.01, 'maxBackoff' => 0.2]);
    check(microtime(true) - $t0 < 0.9, 'the cap is maxBackoff');
    with_proxy($srv, $unavailable, function (Client $pc, FaultProxy $p) {
        same(503, throws(IdemException::class, fn () => $pc->stats())->status);
        same(1, count($p->seen()));
    }, ['maxRetries' => 0]);
    with_proxy($srv, [], function (Client $pc, FaultProxy $p) {
        same(400, throws(IdemException::class, fn () => $pc->enqueue(['kind' => 'k', 'max_attempts' => 0]))->status);
        same(1, count($p->seen()));
    }, ['minBackoff' => 0.01]);
    with_proxy($srv, [[409, '0', '/problems/idempotency-key-in-progress']], function (Client $pc, FaultProxy $p) {
        same(false, $pc->enqueue(['kind' => 'k', 'queue' => 'php-in-progress'])['existing']);
        same(2, count($p->seen()));
    }, ['minBackoff' => 0.01]);
});

// A 409 conflict (a concurrent change kept the operation from completing;
// nothing was done, and the server keeps no answer under the key) is
// retried with the same key, as the Go client retries it; when the retries
// run out it throws ConflictException (an IdemException of type conflict).
test('a 409 conflict is retried with the same key; ConflictException when retries run out', function () use ($server, &$srv) {
    $c = $server()->withTenant('php-conflict');
    $c->putSchedule('php-conflict', ['every' => '1h', 'kind' => 'k', 'queue' => 'php-conflict']);
    $conflict = [409, '0', '/problems/conflict'];
    $r = with_proxy($srv, [$conflict, $conflict], function (Client $pc, FaultProxy $p) {
        $r = $pc->withTenant('php-conflict')->triggerSchedule('php-conflict');
        $seen = $p->seen();
        same(['POST', 'POST', 'POST'], array_column($seen, 0));
        same(1, count(array_unique(array_column($seen, 2))), 'one key for every attempt');
        return $r;
    }, ['minBackoff' => 0.01]);
    same(false, $r['existing'], 'the third attempt reached the server and fired the schedule');
    same([$r['job']['id']], array_map(fn ($j) => $j['id'], iterator_to_array($c->listJobs(['queue' => 'php-conflict']), false)));
    with_proxy($srv, [$conflict, $conflict, $conflict], function (Client $pc, FaultProxy $p) {
        $e = throws(ConflictException::class, fn () => $pc->withTenant('php-conflict')->triggerSchedule('php-conflict'));
        check($e instanceof IdemException, 'a ConflictException is an IdemException');
        same(409, $e->status);
        same('conflict', $e->type());
        same(3, count($p->seen()), 'the first attempt and maxRetries retries');
    }, ['minBackoff' => 0.01, 'maxRetries' => 2]);
    with_proxy($srv, [[409, '0', '/problems/wrong-state']], function (Client $pc, FaultProxy $p) {
        $e = throws(IdemException::class, fn () => $pc->cancel('1'));
        check(!$e instanceof ConflictException, 'another 409 is no ConflictException');
        same(1, count($p->seen()), 'another 409 is not retried');
    }, ['minBackoff' => 0.01]);
});

test('an idempotency key that cannot travel as a header is refused before sending', function () use ($server, &$srv) {
    $server();
    with_proxy($srv, [], function (Client $pc, FaultProxy $p) {
        throws(InvalidArgumentException::class, fn () => $pc->enqueue(['kind' => 'k', 'queue' => 'php-crlf'], "a\r\nX-Other: 1"));
        throws(InvalidArgumentException::class, fn () => $pc->cancel('1', "caf\u{e9}"));
        same(0, count($p->seen()));
    });
});

test('records show result_job_id and result_expires_at; include=result; delete; stats; keys "." and ".."', function () use ($server) {
    $c = $server();
    foreach (['php-record-1', '.', '..'] as $key) {
        $job = $c->enqueue(['kind' => 'k', 'queue' => 'php-records'], $key)['job'];
        $rec = $c->record($key);
        same($key, $rec['key']);
        same('in_progress', $rec['status']);
        check(!isset($rec['result_job_id']), 'no result yet');
        $claimed = $c->claim(['php-records'], 'w');
        $c->complete($claimed[0], ['n' => 1]);
        $rec = $c->record($key);
        same('completed', $rec['status']);
        same($job['id'], $rec['job_id']);
        same($job['id'], $rec['result_job_id']);
        check(strtotime($rec['result_expires_at']) > time(), 'result_expires_at ahead');
        check(!array_key_exists('result', $rec), 'no result without include');
        same(['n' => 1], $c->record($key, true)['result']);
        $c->deleteRecord($key);
        same(404, throws(IdemException::class, fn () => $c->record($key))->status);
    }
    check($c->recordStats()['entries'] >= 0, 'stats');
    $dead = $c->enqueue(['kind' => 'k', 'queue' => 'php-retry-job'])['job']['id'];
    $c->cancel($dead);
    same('available', $c->retry($dead)['state']);
});

// --- parity with the Go client: throttled claims, error codes, replay, DLQ delete, topics ---

/**
 * roomy_rate is $n jobs per an hour or a little more (whole minutes), in a
 * window that does not end in the next five minutes: idem's rate windows are
 * fixed and aligned to the Unix epoch, and a test that spends a budget and
 * then expects to be throttled fails when a window ends between its claims
 * (a whole hour did, once in 3,600 runs). Returns [rate, period in seconds].
 */
function roomy_rate(int $n): array
{
    $now = microtime(true);
    $minutes = 60;
    while ($minutes * 60 - fmod($now, $minutes * 60) < 300) {
        $minutes++;
    }
    $per = $minutes % 60 === 0 ? intdiv($minutes, 60) . 'h' : $minutes . 'm';
    return [$n . '/' . $per, $minutes * 60];
}

/** put_limit sets a queue's flow limit. */
function put_limit(Client $c, string $queue, array $limit): void
{
    $c->request('PUT', '/v1/limits/queue/' . rawurlencode($queue), $limit);
}

test('claimDetail reports a spent rate limit: throttled, retry_after and next_available_at', function () use ($server) {
    $c = $server();
    [$rate, $period] = roomy_rate(1);
    put_limit($c, 'php-rate', ['rate' => $rate]);
    $c->enqueue(['kind' => 'k', 'queue' => 'php-rate']);
    $c->enqueue(['kind' => 'k', 'queue' => 'php-rate']);
    $first = $c->claimDetail(['php-rate'], 'w');
    same(1, count($first['jobs']));
    same(false, $first['throttled']);
    same(null, $first['retry_after']);
    $held = $c->claimDetail(['php-rate'], 'w');
    same([], $held['jobs']);
    same(true, $held['throttled']);
    check(is_string($held['retry_after']) && Client::seconds($held['retry_after']) > 0 && Client::seconds($held['retry_after']) <= $period, 'retry_after ' . var_export($held['retry_after'], true));
    same(Client::seconds($held['retry_after']), $held['retry_after_seconds']);
    check(strtotime((string) $held['next_available_at']) >= time(), 'next_available_at ahead');
    same([], $c->claim(['php-rate'], 'w'), 'claim still answers the jobs alone');
});

test('claimDetail reports a concurrency limit: throttled without retry_after', function () use ($server) {
    $c = $server();
    put_limit($c, 'php-conc', ['concurrency' => 1]);
    $c->enqueue(['kind' => 'k', 'queue' => 'php-conc']);
    $c->enqueue(['kind' => 'k', 'queue' => 'php-conc']);
    same(1, count($c->claim(['php-conc'], 'w')));
    $held = $c->claimDetail(['php-conc'], 'w');
    same(true, $held['throttled']);
    same(null, $held['retry_after']);
    same(0.0, $held['retry_after_seconds']);
});

test('fail sends error_code; dead jobs are listed by it, replayed and deleted', function () use ($server) {
    $c = $server();
    $id = $c->enqueue(['kind' => 'charge', 'queue' => 'php-codes', 'args' => ['n' => 1]])['job']['id'];
    $claimed = $c->claim(['php-codes'], 'w')[0];
    same($id, $claimed['id']);
    $dead = $c->fail($claimed, 'card declined', false, null, 'E_DECLINED');
    same('dead', $dead['state']);
    same('E_DECLINED', $dead['error_code']);
    same([$id], array_map(fn ($j) => $j['id'], iterator_to_array($c->listDLQ(['error_code' => 'E_DECLINED']), false)));
    same(400, throws(IdemException::class, fn () => $c->fail($claimed, 'x', null, null, 'has space'))->status);

    same(1, $c->replay(['queue' => 'php-codes', 'error_code' => 'E_DECLINED'], 'php-codes-replayed'));
    $copies = iterator_to_array($c->listJobs(['queue' => 'php-codes-replayed']), false);
    same(1, count($copies));
    same($id, $copies[0]['metadata']['replay_of'] ?? null);
    same(['n' => 1], $copies[0]['args']);
    same(0, $c->replay(['queue' => 'php-codes', 'kind' => 'nothing-matches']));

    $c->dlqDelete($id);
    same(404, throws(IdemException::class, fn () => $c->getJob($id))->status);
    same(404, throws(IdemException::class, fn () => $c->dlqDelete($id))->status, 'a first attempt\'s 404 is reported');
});

// A replay copies finished jobs only: the unfinished ones the filter
// selects are counted as skipped (the server's {enqueued, skipped}, the Go
// client's ReplayReport); replay still returns the copies alone.
test('replayReport copies the finished job and counts the unfinished one skipped', function () use ($server) {
    $c = $server();
    $done = $c->enqueue(['kind' => 'k', 'queue' => 'php-replay-mixed'])['job']['id'];
    $claimed = $c->claim(['php-replay-mixed'], 'w')[0];
    same($done, $claimed['id']);
    $c->complete($claimed, ['ok' => true]);
    $waiting = $c->enqueue(['kind' => 'k', 'queue' => 'php-replay-mixed'])['job']['id'];
    same(['enqueued' => 1, 'skipped' => 1], $c->replayReport(['queue' => 'php-replay-mixed'], 'php-replay-mixed-copies'));
    $copies = iterator_to_array($c->listJobs(['queue' => 'php-replay-mixed-copies']), false);
    same([$done], array_map(fn ($j) => $j['metadata']['replay_of'] ?? null, $copies));
    same('available', $c->getJob($waiting)['state'], 'the unfinished job runs as itself');
    same(1, $c->replay(['queue' => 'php-replay-mixed'], 'php-replay-mixed-copies'), 'replay returns the copies alone');
});

test('topics: subscriptions CRUD, publish once per key, the event log and replay', function () use ($server) {
    $c = $server();
    $topic = 'php-orders';
    $made = $c->putSubscription($topic, 'billing', ['url' => 'http://127.0.0.1:9/b', 'kinds' => ['order.paid'], 'max_attempts' => 2]);
    same(true, $made['created']);
    check(str_starts_with((string) ($made['subscription']['secret'] ?? ''), 'whsec_'), 'a generated secret, shown once');
    same(['order.paid'], $made['subscription']['kinds']);
    same(2, $made['subscription']['max_attempts']);
    $again = $c->putSubscription($topic, 'billing', ['url' => 'http://127.0.0.1:9/b2', 'kinds' => ['order.paid']]);
    same(false, $again['created']);
    check(!isset($again['subscription']['secret']), 'no secret when replaced');
    same([['billing', 'http://127.0.0.1:9/b2']], array_map(fn ($s) => [$s['name'], $s['url']], $c->subscriptions($topic)));

    $p1 = $c->publish($topic, ['key' => 'evt-1', 'type' => 'order.paid', 'partition_key' => 'o-1', 'payload' => ['n' => 1]]);
    same(false, $p1['existing']);
    same(1, $p1['deliveries']);
    $p2 = $c->publish($topic, ['key' => 'evt-1', 'type' => 'order.paid', 'partition_key' => 'o-1', 'payload' => ['n' => 1]]);
    same(true, $p2['existing']);
    same($p1['event_id'], $p2['event_id']);
    $other = $c->publish($topic, ['type' => 'order.created', 'payload' => ['n' => 2]]);
    same(0, $other['deliveries'], 'kinds filter the event types');

    same([$p1['event_id'], $other['event_id']], array_map(fn ($e) => $e['id'], iterator_to_array($c->listEvents($topic, ['limit' => 1]), false)), 'oldest first, page by page');
    same([['evt-1', ['n' => 1]]], array_map(fn ($e) => [$e['key'], $e['payload']], iterator_to_array($c->listEvents($topic, ['type' => ['order.paid']]), false)));

    same(['events' => 1, 'deliveries' => 1], $c->replayEvents($topic, ['partition_key' => 'o-1']));
    same(['events' => 2, 'deliveries' => 1], $c->replayEvents($topic));

    $c->deleteSubscription($topic, 'billing');
    same([], $c->subscriptions($topic));
    same(404, throws(IdemException::class, fn () => $c->deleteSubscription($topic, 'billing'))->status);
});

test('getSubscription answers one subscription, never its secret; an unknown one is a 404', function () use ($server) {
    $c = $server();
    $topic = 'php-get-sub';
    $made = $c->putSubscription($topic, 'billing', ['url' => 'http://127.0.0.1:9/b', 'kinds' => ['order.paid'], 'max_attempts' => 3]);
    check(isset($made['subscription']['secret']), 'the PUT that created it shows the secret');
    $c->putSubscription($topic, 'audit', ['url' => 'http://127.0.0.1:9/a']);
    $got = $c->getSubscription($topic, 'billing');
    same($topic, $got['topic']);
    same('billing', $got['name']);
    same('http://127.0.0.1:9/b', $got['url']);
    same(['order.paid'], $got['kinds']);
    same(3, $got['max_attempts']);
    same(1, $got['secret_count']);
    check(!array_key_exists('secret', $got), 'never its secret');
    same($made['subscription']['created_at'], $got['created_at']);
    $notFound = function (callable $fn, string $msg) {
        $e = throws(IdemException::class, $fn);
        same(404, $e->status, $msg);
        same('not-found', $e->type(), $msg);
    };
    $notFound(fn () => $c->getSubscription($topic, 'nobody'), 'an unknown name');
    $notFound(fn () => $c->getSubscription('php-get-sub-other', 'billing'), 'the name is looked up in its topic');
    $c->deleteSubscription($topic, 'billing');
    $notFound(fn () => $c->getSubscription($topic, 'billing'), 'a deleted subscription');
});

test('a dead-letter delete and a subscription delete whose replies are lost are retried; the retry\'s 404 means gone', function () use ($server, &$srv) {
    $c = $server();
    $id = $c->enqueue(['kind' => 'k', 'queue' => 'php-lost-delete'])['job']['id'];
    $c->fail($c->claim(['php-lost-delete'], 'w')[0], 'boom', false);
    $c->putSubscription('php-lost-topic', 's', ['url' => 'http://127.0.0.1:9/s']);
    // The dead-letter delete's retry answers 404 and checks the job is gone (GET).
    with_proxy($srv, ['lost', 'pass', 'pass', 'lost', 'pass'], function (Client $pc, FaultProxy $p) use ($id) {
        $pc->dlqDelete($id);
        $pc->deleteSubscription('php-lost-topic', 's');
        same(['DELETE', 'DELETE', 'GET', 'DELETE', 'DELETE'], array_map(fn ($s) => $s[0], $p->seen()));
    }, ['minBackoff' => 0.01]);
    same(404, throws(IdemException::class, fn () => $c->getJob($id))->status);
    same([], $c->subscriptions('php-lost-topic'));
});

test('a dead-letter delete whose retry answers 404 for a job that is not dead throws', function () use ($server, &$srv) {
    $c = $server();
    $id = $c->enqueue(['kind' => 'k', 'queue' => 'php-delete-live'])['job']['id'];
    with_proxy($srv, [[503, null, '/problems/service-unavailable']], function (Client $pc, FaultProxy $p) use ($id) {
        same(404, throws(IdemException::class, fn () => $pc->dlqDelete($id))->status);
        same(['DELETE', 'DELETE', 'GET'], array_map(fn ($s) => $s[0], $p->seen()));
    }, ['minBackoff' => 0.01]);
    same('available', $c->getJob($id)['state']);
});

test('a keyed publish sends its key as the Idempotency-Key', function () use ($server, &$srv) {
    with_proxy($srv, [], function (Client $pc, FaultProxy $p) {
        $pc->publish('php-keyed-publish', ['key' => 'evt-1', 'type' => 't', 'payload' => ['n' => 1]]);
        same(['evt-1'], array_map(fn ($s) => $s[2], $p->seen()));
    });
});

test('a publish without a key whose reply is lost publishes once', function () use ($server, &$srv) {
    $c = $server();
    $r = with_proxy($srv, ['lost'], fn (Client $pc) => $pc->publish('php-lost-publish', ['type' => 't', 'payload' => ['n' => 1]]), ['minBackoff' => 0.01]);
    same(true, $r['existing'], 'the retry answered the event the first attempt published');
    same(1, count(iterator_to_array($c->listEvents('php-lost-publish'), false)));
});

/** A real client that records the wait and the answer of each claim; the third stops its worker, unsent. */
final class RecordingClient extends Client
{
    /** @var list<array{string, ?array<string,mixed>}> */
    public array $claims = [];
    public ?Worker $worker = null;

    public function claimDetail(array $queues, string $workerId, int $limit = 1, string $lease = '30s', string $wait = '0s', ?array $kinds = null): array
    {
        $i = count($this->claims);
        $this->claims[] = [$wait, null];
        if ($i === 2) {
            $this->worker?->stop();
            throw new RuntimeException('enough claims');
        }
        $r = parent::claimDetail($queues, $workerId, $limit, $lease, $wait, $kinds);
        $this->claims[$i][1] = $r;
        return $r;
    }
}

test('after a claim a spent rate limit held back, the worker long-polls until the budget returns', function () use ($server, &$srv) {
    $c = $server();
    put_limit($c, 'php-worker-rate', ['rate' => roomy_rate(1)[0]]);
    $c->enqueue(['kind' => 'k', 'queue' => 'php-worker-rate']);
    $c->enqueue(['kind' => 'k', 'queue' => 'php-worker-rate']);
    $rc = new RecordingClient($srv->url, $srv->adminKey);
    $w = new Worker($rc, ['php-worker-rate'], 'php-rate-worker', '30s', '1s', static function (Throwable $e) {
    });
    $rc->worker = $w;
    $ran = 0;
    $w->handle('k', function () use (&$ran) {
        $ran++;
        return null;
    });
    $w->run();
    same(1, $ran);
    same(3, count($rc->claims));
    same('1s', $rc->claims[0][0]);
    same('1s', $rc->claims[1][0], 'the claim after one that got a job waits as configured');
    $held = $rc->claims[1][1];
    check($held['throttled'] && $held['retry_after_seconds'] > 0, 'the second claim was throttled');
    $third = Client::seconds($rc->claims[2][0]);
    // A window with five minutes left at least (one ending between the first
    // two claims would let the second job through): the wait is retry_after,
    // capped at 60s.
    check($third >= min($held['retry_after_seconds'], 60.0) && $third <= min($held['retry_after_seconds'] + 0.012, 60.0),
        "third claim waits {$rc->claims[2][0]}, retry_after {$held['retry_after']}");
});

// The routes the Go client offers as BatchCancel, DLQResolve, QueuePause
// and QueueResume, with the same meaning.
test('cancelBatch, dlqResolve, pauseQueue and resumeQueue', function () use ($server) {
    $c = $server();
    $made = $c->createBatch('php-cancel-batch', [['kind' => 'k', 'queue' => 'php-batch-cancel', 'args' => ['n' => 1]], ['kind' => 'k', 'queue' => 'php-batch-cancel', 'args' => ['n' => 2]]]);
    $cancelled = $c->cancelBatch($made['batch']['id']);
    same($made['batch']['id'], $cancelled['id']);
    same(true, $cancelled['finished']);
    same(['cancelled', 'cancelled'], array_column($cancelled['jobs'], 'state'));

    $job = $c->enqueue(['kind' => 'k', 'queue' => 'php-resolve'])['job'];
    $claimed = $c->claim(['php-resolve'], 'w');
    same($job['id'], $claimed[0]['id']);
    $c->fail($claimed[0], 'boom', false);
    same('dead', $c->dlqResolve($job['id'], 'refunded by hand')['state']);
    same([], iterator_to_array($c->listDLQ(['queue' => 'php-resolve', 'resolved' => 'false']), false));
    same([$job['id']], array_map(fn ($j) => $j['id'], iterator_to_array($c->listDLQ(['queue' => 'php-resolve', 'resolved' => true]), false)));
    same([], iterator_to_array($c->listJobs(['queue' => 'php-resolve', 'resolved' => false, 'state' => ['dead', 'completed']]), false));
    same([$job['id']], array_map(fn ($j) => $j['id'], iterator_to_array($c->listJobs(['queue' => 'php-resolve', 'state' => ['dead', 'completed']]), false)), 'a state list repeats the parameter');
    same(400, throws(IdemException::class, fn () => iterator_to_array($c->listJobs(['stat' => 'dead'])))->status, 'an unknown parameter is refused');

    same(['queue' => 'php-paused', 'paused' => true], $c->pauseQueue('php-paused'));
    $c->enqueue(['kind' => 'k', 'queue' => 'php-paused']);
    same([], $c->claim(['php-paused'], 'w'), 'a paused queue hands out nothing');
    same(['queue' => 'php-paused', 'paused' => false], $c->resumeQueue('php-paused'));
    same(1, count($c->claim(['php-paused'], 'w')));
});

// The schedule routes the Go client offers (PutSchedule, GetSchedule,
// ListSchedules, DeleteSchedule, TriggerSchedule), with the same meaning.
test('schedules: put, get, list, trigger once per key, delete', function () use ($server) {
    $c = $server()->withTenant('php-sched');
    $s = $c->putSchedule('php-nightly', ['cron' => '0 3 * * *', 'timezone' => 'Europe/Berlin', 'kind' => 'report', 'queue' => 'php-sched', 'args' => ['full' => true]]);
    same('php-nightly', $s['name']);
    check(!empty($s['next_fire_at']), 'a next firing');
    same('report', $c->getSchedule('php-nightly')['kind']);
    same(['php-nightly'], array_column($c->listSchedules(), 'name'));
    $first = $c->triggerSchedule('php-nightly', 'manual-1');
    same(false, $first['existing']);
    same(['full' => true], $first['job']['args']);
    $again = $c->triggerSchedule('php-nightly', 'manual-1');
    same(true, $again['existing']);
    same($first['job']['id'], $again['job']['id']);
    $c->deleteSchedule('php-nightly');
    same(404, throws(IdemException::class, fn () => $c->getSchedule('php-nightly'))->status);
    same(404, throws(IdemException::class, fn () => $c->deleteSchedule('php-nightly'))->status);
    same($first['job']['id'], $c->getJob($first['job']['id'])['id'], 'the jobs it made are kept');
});

require __DIR__ . '/signals.php';
require __DIR__ . '/resources.php';
require __DIR__ . '/durations.php';

// exit() would skip a finally block: the server is stopped first, then the
// code is returned (a server left running outlived every CI run).
$code = 1;
try {
    $code = run_tests();
} finally {
    $srv?->stop();
}
exit($code);
