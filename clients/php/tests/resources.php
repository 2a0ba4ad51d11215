<?php

declare(strict_types=1);

// The routes the Go client offers as LeaseAcquire/Renew/Complete/Release,
// PutTarget/Targets/Target/DeleteTarget, LimitPut/Get/List/Delete,
// HealthChecks and RevokeAPIKey, against a real server. Required by
// run.php, whose $server, $srv and with_proxy it uses.

use Idem\Client;
use Idem\IdemException;

/** status_of returns the status of the IdemException $fn throws (and its type after a space when $withType). */
function status_of(callable $fn, bool $withType = false): string
{
    $e = throws(IdemException::class, $fn);
    return $withType ? "$e->status {$e->type()}" : (string) $e->status;
}

test('result leases: acquire, held by another, renew, complete, then cached', function () use ($server, &$srv) {
    $c = $server();
    $key = 'php-lease-1';
    $l = $c->leaseAcquire($key, '1m', '1h');
    same([true, false], [$l['acquired'], $l['cached']]);
    check($l['lease_token'] !== '' && $l['lease_expires_at'] !== '', 'a lease token and its end');
    $other = new Client($srv->url, $srv->adminKey, null, 30.0, 0);
    same('409 idempotency-key-in-progress', status_of(fn () => $other->leaseAcquire($key), true), 'held by another holder');
    $until = $c->leaseRenew($key, $l['lease_token'], '10m');
    check(strtotime($until) > strtotime($l['lease_expires_at']), "renewed to $until, was {$l['lease_expires_at']}");
    same('409', status_of(fn () => $c->leaseRenew($key, 'not-the-token')));
    same($key, $c->leaseComplete($key, $l['lease_token'], ['area' => 42], 7)['key']);
    $cached = $c->leaseAcquire($key);
    same([true, false], [$cached['cached'], $cached['acquired']]);
    same(['area' => 42], $cached['result']);
    same(7, $cached['duration_ms']);
});

test('a released lease caches nothing: the next acquire gets the lease', function () use ($server, &$srv) {
    $c = $server();
    $key = 'php-lease-2';
    $l = $c->leaseAcquire($key);
    $c->leaseRelease($key, $l['lease_token']);
    $again = $c->leaseAcquire($key);
    same(true, $again['acquired']);
    check($again['lease_token'] !== $l['lease_token'], 'a new token');
    // Releasing a lease no longer held changes nothing: the new holder keeps it.
    $c->leaseRelease($key, $l['lease_token']);
    $other = new Client($srv->url, $srv->adminKey, null, 30.0, 0);
    same('409 idempotency-key-in-progress', status_of(fn () => $other->leaseAcquire($key), true));
});

test('a lease acquire whose reply is lost is retried with the same key: the caller holds the lease', function () use ($server, &$srv) {
    $c = $server();
    $key = 'php-lease-lost';
    $l = with_proxy($srv, ['lost'], function (Client $pc, FaultProxy $p) use ($key) {
        $l = $pc->leaseAcquire($key, '1m');
        $seen = $p->seen();
        same(2, count($seen));
        same($seen[0][2], $seen[1][2], 'one Idempotency-Key for both attempts');
        return $l;
    }, ['minBackoff' => 0.01]);
    same(true, $l['acquired']);
    $c->leaseComplete($key, $l['lease_token'], 'ok');
    same('ok', $c->leaseAcquire($key)['result']);
});

test('targets: put creates then replaces, list, get, delete', function () use ($server) {
    $c = $server()->withTenant('php-targets');
    $made = $c->putTarget('php-orders', ['url' => 'http://127.0.0.1:9/hook', 'queue' => 'php-hooks', 'timeout' => '5s']);
    same(true, $made['created']);
    check(str_starts_with($made['target']['secret'] ?? '', 'whsec_'), 'a generated secret, shown once');
    same([1, '5s'], [$made['target']['secret_count'], $made['target']['timeout']]);
    $again = $c->putTarget('php-orders', ['url' => 'http://127.0.0.1:9/v2', 'queue' => 'php-hooks', 'secrets' => []]);
    same(false, $again['created']);
    same([false, 0], [isset($again['target']['secret']), $again['target']['secret_count']]);
    same('400', status_of(fn () => $c->putTarget('php-nowhere', ['url' => 'http://127.0.0.1:9/'])), 'a target needs a queue or a kind');
    same([['php-orders', 'http://127.0.0.1:9/v2', false]], array_map(fn ($t) => [$t['name'], $t['url'], isset($t['secret'])], $c->listTargets()));
    same('http://127.0.0.1:9/v2', $c->getTarget('php-orders')['url']);
    $c->deleteTarget('php-orders');
    same('404', status_of(fn () => $c->deleteTarget('php-orders')));
    same('404', status_of(fn () => $c->getTarget('php-orders')));
});

test('limits: put, get, list, delete on queue, tenant and tenant-in-queue scopes', function () use ($server, &$srv) {
    $c = $server();
    $queue = ['queue' => 'php-lim-mail'];
    $tenant = ['tenant' => 'php-lim-acme'];
    $both = ['tenant' => 'php-lim-acme', 'queue' => 'php-lim-sms'];
    $l = $c->putLimit($queue, ['rate' => '100/1m', 'concurrency' => 5]);
    same(['php-lim-mail', false, '100/1m', 5, 0], [$l['queue'], isset($l['tenant']), $l['rate'], $l['concurrency'], $l['usage']['running']]);
    same(3, $c->putLimit($tenant, ['weight' => 3])['weight']);
    $b = $c->putLimit($both, ['concurrency' => 1]);
    same(['php-lim-acme', 'php-lim-sms', 1], [$b['tenant'], $b['queue'], $b['concurrency']]);
    same('400', status_of(fn () => $c->putLimit($queue, ['rate' => 'lots'])));
    same('400', status_of(fn () => $c->putLimit($queue, ['weight' => 2])), 'a weight is for tenant scopes');
    same(1, $c->getLimit($both)['concurrency']);
    same('100/1m', $c->getLimit($queue)['rate']);
    $mine = array_filter($c->listLimits(), fn ($x) => str_starts_with($x['tenant'] ?? $x['queue'] ?? '', 'php-lim-'));
    $names = array_map(fn ($x) => ($x['tenant'] ?? '') . '/' . ($x['queue'] ?? ''), $mine);
    sort($names);
    same(['/php-lim-mail', 'php-lim-acme/', 'php-lim-acme/php-lim-sms'], $names);
    $c->deleteLimit($both);
    same('404', status_of(fn () => $c->getLimit($both)));
    same('404', status_of(fn () => $c->deleteLimit($both)));
    same(3, $c->getLimit($tenant)['weight'], "the tenant's own limit is another scope");
    throws(InvalidArgumentException::class, fn () => $c->getLimit([]));
    $acme = new Client($srv->url, $srv->createKey('php-lim-acme')['key']);
    same('403', status_of(fn () => $acme->putLimit($queue, ['concurrency' => 1])), 'a tenant key may not set limits');
    $c->deleteLimit($queue);
    $c->deleteLimit($tenant);
});

test('deletes of a target, a limit and an API key whose replies are lost are retried and succeed', function () use ($server, &$srv) {
    $c = $server();
    $c->putTarget('php-lost', ['url' => 'http://127.0.0.1:9/hook', 'kind' => 'php-lost']);
    $c->putLimit(['queue' => 'php-lost'], ['concurrency' => 2]);
    $id = $srv->createKey('php-lost')['id'];
    with_proxy($srv, ['lost', 'pass', 'lost', 'pass', 'lost', 'pass'], function (Client $pc, FaultProxy $p) use ($id) {
        $pc->deleteTarget('php-lost');
        $pc->deleteLimit(['queue' => 'php-lost']);
        $pc->revokeApiKey($id);
        same(array_fill(0, 6, 'DELETE'), array_map(fn ($s) => $s[0], $p->seen()));
    }, ['minBackoff' => 0.01]);
    same('404', status_of(fn () => $c->getTarget('php-lost')));
    same('404', status_of(fn () => $c->getLimit(['queue' => 'php-lost'])));
});

test('healthChecks: healthy, then an unhealthy report (the server\'s 503) is returned; asked once', function () {
    $strict = new TestServer(['IDEM_HEALTH_DEAD_JOBS' => '0']); // any dead job is unhealthy
    try {
        $c = new Client($strict->url, $strict->adminKey, 'php-health');
        $before = $c->healthChecks();
        same(['healthy', 'healthy'], [$before['status'], $before['checks']['dead_jobs']['status']]);
        $c->enqueue(['kind' => 'k', 'queue' => 'php-health', 'max_attempts' => 1]);
        $c->fail($c->claim(['php-health'], 'w')[0], 'boom', false);
        $after = $c->healthChecks();
        same(['unhealthy', 'unhealthy', 1], [$after['status'], $after['checks']['dead_jobs']['status'], $after['checks']['dead_jobs']['value']]);
        same('healthy', $c->withTenant('php-health-other')->healthChecks()['status'], "of the client's tenant");
        with_proxy($strict, [[503, '0', '/problems/service-unavailable']], function (Client $pc, FaultProxy $p) {
            same('503 service-unavailable', status_of(fn () => $pc->healthChecks(), true), 'a problem, not a report, is thrown');
            same(1, count($p->seen()), 'a probe is not retried');
        }, ['minBackoff' => 0.01]);
    } finally {
        $strict->stop();
    }
});

test('revokeApiKey: a revoked key is refused; tenant keys may not revoke; an unknown id is a 404', function () use ($server, &$srv) {
    $c = $server();
    ['id' => $id, 'key' => $key] = $srv->createKey('php-victim');
    $victim = new Client($srv->url, $key, null, 30.0, 0);
    $victim->stats();
    same('403', status_of(fn () => $victim->revokeApiKey($id)));
    $c->revokeApiKey($id);
    same('401', status_of(fn () => $victim->stats()));
    same('404', status_of(fn () => $c->revokeApiKey('key_no_such_key')));
});
