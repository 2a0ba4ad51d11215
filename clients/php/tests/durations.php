<?php

declare(strict_types=1);

// Durations in whole seconds ("30", which the API takes as well as "30s")
// and kinds PHP keeps as int array keys ("42"). Required by run.php, whose
// $server and $srv it uses.

use Idem\Client;
use Idem\JobContext;
use Idem\Worker;

test('durations in whole seconds are seconds', function () {
    same(30.0, Client::seconds('30'));
    same(0.0, Client::seconds('0'));
    same(90.0, Client::seconds('1m30s'));
    same(0.5, Client::seconds('500ms'));
});

// A claim's long poll in whole seconds ("2") was read as 0 s: the request
// timed out after the client's timeout alone, before the server answered,
// and the claim returned early (or threw) instead of waiting.
test('a claim waits a wait given in whole seconds', function () use ($server, &$srv) {
    $server();
    $c = new Client($srv->url, $srv->adminKey, null, 0.5);
    $t0 = microtime(true);
    $jobs = $c->claim(['php-wait-seconds'], 'php-w', 1, '30s', '2');
    $took = microtime(true) - $t0;
    same([], $jobs);
    check($took >= 1.8, sprintf('the claim returned after %.2fs, before its 2 s wait', $took));
});

// A handler of a kind that PHP keeps as an int array key ("42") was
// claimed for as the number 42, which the server refuses: the worker
// never claimed anything.
test('a worker claims the jobs of a kind that looks like a number', function () use ($server) {
    $c = $server();
    $id = $c->enqueue(['kind' => '42', 'queue' => 'php-numeric-kind'])['job']['id'];
    $errors = [];
    $w = new Worker($c, ['php-numeric-kind'], 'php-numeric', '5s', '1s', function (Throwable $e) use (&$errors) { $errors[] = $e->getMessage(); });
    $w->handle('42', fn (array $job, JobContext $ctx) => ['kind' => $job['kind']]);
    same(1, $w->run(1, 5.0), 'jobs run; loop errors: ' . implode('; ', $errors));
    same([], $errors);
    $j = $c->getJob($id);
    same('completed', $j['state']);
    same(['kind' => '42'], $j['result']);
});

// A list with gaps (array_filter, unset) is a PHP array that json_encode
// writes as an object: the batch, the claim's queues and a requeue's ids
// were refused with a 400 instead of being sent as the lists they are.
test('lists with gaps are sent as lists', function () use ($server) {
    $c = $server();
    $jobs = array_filter([
        ['kind' => 'gap', 'queue' => 'php-gaps'],
        null,
        ['kind' => 'gap', 'queue' => 'php-gaps'],
    ]);
    same([0, 2], array_keys($jobs));
    $results = $c->enqueueBatch($jobs);
    same(2, count($results));
    $queues = array_filter(['', 'php-gaps']);
    same(2, count($c->claim($queues, 'php-gap-worker', 5, '30s', '0s')));
});
